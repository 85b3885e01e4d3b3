package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommits pipelined on one connection are applied in the order sent,
// as Kafka applies a connection's requests: after any number of them the
// stored offset is the last one's, never an earlier one that was handled
// late.
func TestPipelinedOffsetCommitsApplyInOrder(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "oc", 1)
	c := dialRaw(t, b)
	commit := func(group string, offset int64) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 8
		req.Group, req.Generation = group, -1 // a group that only stores offsets
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "oc"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	const rounds, perRound = 5, 200
	corr := int32(0)
	for round := range rounds {
		groups := []string{"oc-a", "oc-b"}
		var sent []*kmsg.OffsetCommitRequest
		for i := range perRound {
			corr++
			req := commit(groups[i%2], int64(round*perRound+i+1))
			c.send(req, corr)
			sent = append(sent, req)
		}
		for i, req := range sent {
			resp := c.readResp(req, corr-int32(len(sent)-1-i)).(*kmsg.OffsetCommitResponse)
			if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
				t.Fatalf("round %d commit %d: error %d", round, i, ec)
			}
		}
		for gi, g := range groups {
			f := kmsg.NewPtrOffsetFetchRequest()
			f.Version = 7
			f.Group = g
			ft := kmsg.NewOffsetFetchRequestTopic()
			ft.Topic, ft.Partitions = "oc", []int32{0}
			f.Topics = append(f.Topics, ft)
			corr++
			r := c.roundTrip(f, corr).(*kmsg.OffsetFetchResponse)
			want := int64(round*perRound + perRound - 1 + gi) // the last commit sent for g
			if got := r.Topics[0].Partitions[0].Offset; got != want {
				t.Fatalf("round %d group %s: committed %d after pipelined commits, want the last one sent, %d", round, g, got, want)
			}
		}
	}
}
