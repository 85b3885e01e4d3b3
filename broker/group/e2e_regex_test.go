package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestE2EKIP848RegexSubscription: through the real broker (its Topics
// implements TopicLister), a member subscribing with a regular expression
// is assigned every partition of the matching topics and nothing else. As
// in Kafka the expression matches whole names ("old-orders-c" does not
// match "orders-.*") and internal topics are not excluded.
func TestE2EKIP848RegexSubscription(t *testing.T) {
	b := startBroker(t, t.TempDir())
	defer b.Close()
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "orders-a", 2)
	createTopic(t, adm, "orders-b", 1)
	createTopic(t, adm, "other", 3)
	createTopic(t, adm, "old-orders-c", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, "orders-a", "orders-b", "other", "old-orders-c", "__consumer_offsets", "__transaction_state")
	if err != nil {
		t.Fatal(err)
	}
	names := map[[16]byte]string{}
	for _, td := range md.Topics {
		names[td.ID] = td.Topic
	}

	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = "rg"
	req.MemberID = "m-regex-1"
	req.MemberEpoch = 0
	req.RebalanceTimeoutMillis = 10000
	re := "orders-.*|__consumer_offsets"
	req.SubscribedTopicRegex = &re
	got := map[string]int{}
	for i := 0; i < 50; i++ {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			t.Fatalf("heartbeat error %d: %s", resp.ErrorCode, msg)
		}
		if resp.Assignment != nil {
			got = map[string]int{}
			for _, tp := range resp.Assignment.Topics {
				got[names[tp.TopicID]] += len(tp.Partitions)
			}
		}
		if got["orders-a"] == 2 && got["orders-b"] == 1 && got["__consumer_offsets"] == 1 {
			break
		}
		req.MemberEpoch = resp.MemberEpoch
		req.SubscribedTopicRegex = nil
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 3 || got["orders-a"] != 2 || got["orders-b"] != 1 || got["__consumer_offsets"] != 1 {
		t.Fatalf("assignment %v, want orders-a:2 orders-b:1 __consumer_offsets:1", got)
	}
}
