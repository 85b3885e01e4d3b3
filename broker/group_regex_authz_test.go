package broker

import (
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A KIP-848 regular-expression subscription resolves to the matching
// topics its principal may DESCRIBE, as Kafka's coordinator filters it: a
// topic the member may not describe is never assigned to it, and once an
// ACL lets it describe the topic, its next heartbeats assign it.
func TestRegexSubscriptionFilteredByDescribe(t *testing.T) {
	b, _ := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))
	for topic, n := range map[string]int32{"orders-a": 2, "orders-b": 1} {
		if _, err := adm.CreateTopic(ctx, n, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	mustACL(t, adm, kadm.NewACLs().Allow("User:dave").Groups("rg").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	mustACL(t, adm, kadm.NewACLs().Allow("User:dave").Topics("orders-a").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	md, err := adm.Metadata(ctx, "orders-a", "orders-b")
	if err != nil {
		t.Fatal(err)
	}
	names := map[[16]byte]string{}
	for _, td := range md.Topics {
		names[td.ID] = td.Topic
	}

	dave := clientAs(t, b, "dave")
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis = "rg", "dave-member-1", 10_000
	re := "orders-.*"
	req.SubscribedTopicRegex = &re
	assigned := map[string]int{}
	// heartbeat sends one heartbeat reporting what the member owns and
	// returns its assignment (partitions per topic name).
	heartbeat := func() map[string]int {
		t.Helper()
		resp, err := req.RequestWith(ctx, dave)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat: error %d %v", resp.ErrorCode, resp.ErrorMessage)
		}
		req.MemberEpoch = resp.MemberEpoch
		req.SubscribedTopicRegex = nil
		if a := resp.Assignment; a != nil {
			assigned = map[string]int{}
			req.Topics = nil
			for _, tp := range a.Topics {
				assigned[names[tp.TopicID]] += len(tp.Partitions)
				rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
				rt.TopicID, rt.Partitions = tp.TopicID, tp.Partitions
				req.Topics = append(req.Topics, rt)
			}
		}
		return maps.Clone(assigned)
	}
	// until heartbeats until want holds (or fails after 50).
	until := func(what string, want func(map[string]int) bool) map[string]int {
		t.Helper()
		var got map[string]int
		for range 50 {
			if got = heartbeat(); want(got) {
				return got
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s: assignment %v", what, got)
		return nil
	}

	got := until("orders-a assigned", func(a map[string]int) bool { return a["orders-a"] == 2 })
	for range 3 { // and it stays without orders-b
		if got["orders-b"] != 0 || len(got) != 1 {
			t.Fatalf("assignment %v: orders-b, which dave may not describe, was assigned", got)
		}
		got = heartbeat()
	}

	mustACL(t, adm, kadm.NewACLs().Allow("User:dave").Topics("orders-b").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	until("orders-b assigned once dave may describe it", func(a map[string]int) bool {
		return a["orders-a"] == 2 && a["orders-b"] == 1
	})
}
