package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func aclOpNames(bits int32) []string {
	var out []string
	for _, op := range kadm.DecodeACLOperations(bits) {
		out = append(out, op.String())
	}
	slices.Sort(out)
	return out
}

// KIP-430 authorized operations, as Kafka without an authorizer: every
// operation of the resource type when asked, INT32_MIN when not.
func TestAuthorizedOperations(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, b)
	mustCreate(t, ctx, b, "ops", 1)
	raw := dialRaw(t, b)
	corr := int32(1)
	wantTopic := []string{"ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"}
	wantCluster := []string{"ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"}

	for _, ask := range []bool{true, false} {
		t.Run(fmt.Sprintf("asked=%v", ask), func(t *testing.T) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 10 // the last version with cluster operations
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("ops")
			req.Topics = append(req.Topics, rt)
			// A topic that does not exist has its operations too (as
			// Kafka), beside UNKNOWN_TOPIC_OR_PARTITION.
			rt.Topic = kmsg.StringPtr("not-yet")
			req.Topics = append(req.Topics, rt)
			req.AllowAutoTopicCreation = false
			req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = ask, ask
			// A raw connection keeps version 10 (a client would negotiate up).
			resp := raw.roundTrip(req, corr).(*kmsg.MetadataResponse)
			corr++
			dreq := kmsg.NewPtrDescribeClusterRequest()
			dreq.IncludeClusterAuthorizedOperations = ask
			dresp, err := dreq.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if !ask {
				if resp.AuthorizedOperations != -2147483648 || resp.Topics[0].AuthorizedOperations != -2147483648 || resp.Topics[1].AuthorizedOperations != -2147483648 || dresp.ClusterAuthorizedOperations != -2147483648 {
					t.Fatalf("not asked: cluster %d topic %d describe cluster %d, want INT32_MIN",
						resp.AuthorizedOperations, resp.Topics[0].AuthorizedOperations, dresp.ClusterAuthorizedOperations)
				}
				return
			}
			if got := aclOpNames(resp.Topics[0].AuthorizedOperations); !slices.Equal(got, wantTopic) {
				t.Errorf("topic operations %v, want %v", got, wantTopic)
			}
			if got := aclOpNames(resp.Topics[1].AuthorizedOperations); resp.Topics[1].ErrorCode != 3 || !slices.Equal(got, wantTopic) {
				t.Errorf("missing topic: error %d, operations %v, want 3 (UNKNOWN_TOPIC_OR_PARTITION) and %v", resp.Topics[1].ErrorCode, got, wantTopic)
			}
			if got := aclOpNames(resp.AuthorizedOperations); !slices.Equal(got, wantCluster) {
				t.Errorf("metadata cluster operations %v, want %v", got, wantCluster)
			}
			if got := aclOpNames(dresp.ClusterAuthorizedOperations); !slices.Equal(got, wantCluster) {
				t.Errorf("DescribeCluster operations %v, want %v", got, wantCluster)
			}
		})
	}
}
