package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzHandle decodes arbitrary bytes as a group request of any served key
// and version, runs it against a coordinator that already has a classic
// group, a KIP-848 group and offsets, and encodes the response: errors are
// fine, panics (in the handler or in encoding the response) are not.
// JoinGroup and SyncGroup run through their non-blocking loop halves.
func FuzzHandle(f *testing.F) {
	seed := func(key int16, version int16, req kmsg.Request) {
		req.SetVersion(version)
		f.Add(byte(key), byte(version), req.AppendTo(nil))
	}
	seed(int16(kmsg.JoinGroup), 9, joinReq(9, "g", "", ""))
	seed(int16(kmsg.JoinGroup), 0, joinReq(0, "g", "", ""))
	seed(int16(kmsg.SyncGroup), 5, syncReq("g", "m", 1, map[string]string{"m": "x"}))
	seed(int16(kmsg.Heartbeat), 4, hbReq("g", "m", 1))
	seed(int16(kmsg.OffsetCommit), 9, commitReq("g", "", -1, "t", map[int32]int64{0: 1}))
	seed(int16(kmsg.OffsetCommit), 2, commitReq("g", "", -1, "t", map[int32]int64{0: 1}))
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
	seed(int16(kmsg.OffsetFetch), 8, of)
	seed(int16(kmsg.OffsetFetch), 1, &kmsg.OffsetFetchRequest{Group: "g", Topics: []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}})
	seed(int16(kmsg.DescribeGroups), 5, &kmsg.DescribeGroupsRequest{Groups: []string{"g", "cg"}})
	seed(int16(kmsg.ListGroups), 5, &kmsg.ListGroupsRequest{StatesFilter: []string{"Stable"}})
	seed(int16(kmsg.DeleteGroups), 2, &kmsg.DeleteGroupsRequest{Groups: []string{"g", "s"}})
	seed(int16(kmsg.LeaveGroup), 4, &kmsg.LeaveGroupRequest{Group: "g", Members: []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}})
	seed(int16(kmsg.FindCoordinator), 4, &kmsg.FindCoordinatorRequest{CoordinatorKeys: []string{"g"}})
	seed(int16(kmsg.OffsetDelete), 0, &kmsg.OffsetDeleteRequest{Group: "s", Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: "t"}}})
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberID, cgh.RebalanceTimeoutMillis, cgh.SubscribedTopicNames = "cg", "m2", 1000, []string{"t"}
	cgh.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	seed(int16(kmsg.ConsumerGroupHeartbeat), 1, cgh)
	seed(int16(kmsg.ConsumerGroupDescribe), 0, &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"cg", "g"}})

	f.Fuzz(func(t *testing.T, keyb, versionb byte, body []byte) {
		served := APIVersions()
		api := served[int(keyb)%len(served)]
		key := api.ApiKey
		req := kmsg.RequestForKey(key)
		req.SetVersion(api.MinVersion + int16(versionb)%(api.MaxVersion-api.MinVersion+1))
		if err := req.ReadFrom(body); err != nil {
			return
		}
		h := newHarness(t)
		h.stableGroup("g", 1)
		h.commit(commitReq("s", "", -1, "t", map[int32]int64{0: 1}))
		h.cgHeartbeat("cg", &cmem{id: "m1"}, []string{"t"})
		var resp kmsg.Response
		switch r := req.(type) {
		case *kmsg.JoinGroupRequest:
			imm, _ := h.join(r)
			if imm != nil {
				resp = imm
			}
		case *kmsg.SyncGroupRequest:
			imm, _ := h.sync(r)
			if imm != nil {
				resp = imm
			}
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			resp, err = h.c.Handle(ctx, req)
			if err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), req.GetVersion(), err)
			}
		}
		if resp != nil {
			resp.SetVersion(req.GetVersion())
			_ = resp.AppendTo(nil)
		}
		h.advance(time.Hour) // fire every timer on the state the request left
	})
}
