package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups and consumer groups share one ID namespace: under a share
// group's ID, a KIP-848 ConsumerGroupHeartbeat (joining, heartbeating or
// leaving) is GROUP_ID_NOT_FOUND and a classic JoinGroup is
// INCONSISTENT_GROUP_PROTOCOL, as Kafka answers them, and neither makes a
// consumer or classic group of the ID.
func TestConsumerGroupUnderShareGroupIDRefused(t *testing.T) {
	b, _ := testBroker(t)
	mustCreate(t, testCtx(t), b, "t", 1)
	c := dialRaw(t, b)
	corr := int32(0)
	next := func() int32 { corr++; return corr }

	sh := kmsg.NewPtrShareGroupHeartbeatRequest()
	sh.Version, sh.GroupID, sh.MemberID, sh.MemberEpoch = 1, "sg", "AAAAAAAAAAAAAAAAAAAAAA", 0
	sh.SubscribedTopicNames = []string{"t"}
	if r := c.roundTrip(sh, next()).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("share member join: error %d", r.ErrorCode)
	}

	heartbeat := func(group string, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, group, "BBBBBBBBBBBBBBBBBBBBBB", epoch
		r.RebalanceTimeoutMillis = 30_000
		if epoch == 0 {
			r.SubscribedTopicNames = []string{"t"}
		}
		return c.roundTrip(r, next()).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	for _, epoch := range []int32{0, 1, -1} {
		r := heartbeat("sg", epoch)
		if r.ErrorCode != kerr.GroupIDNotFound.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Group sg is not a consumer group." {
			t.Errorf("ConsumerGroupHeartbeat epoch %d under a share group: error %d %v, want GROUP_ID_NOT_FOUND", epoch, r.ErrorCode, r.ErrorMessage)
		}
	}

	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.ProtocolType = 9, "sg", "consumer"
	jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = 10_000, 10_000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0}
	jg.Protocols = append(jg.Protocols, p)
	if r := c.roundTrip(jg, next()).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("JoinGroup under a share group: error %d, want INCONSISTENT_GROUP_PROTOCOL", r.ErrorCode)
	}

	// The ID is still one share group and nothing else.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	var types []string
	for _, g := range c.roundTrip(lg, next()).(*kmsg.ListGroupsResponse).Groups {
		if g.Group == "sg" {
			types = append(types, g.GroupType)
		}
	}
	if len(types) != 1 || types[0] != "share" {
		t.Errorf("ListGroups shows sg as %v, want one share group", types)
	}
	// Another ID is a consumer group as usual.
	if r := heartbeat("cg", 0); r.ErrorCode != 0 || r.MemberEpoch < 1 {
		t.Errorf("ConsumerGroupHeartbeat of a fresh group: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
}
