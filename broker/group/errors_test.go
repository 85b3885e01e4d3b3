package group

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Error codes of the classic protocol that the scenario tests do not
// reach, each against a Stable group of two members.
func TestClassicErrorCodes(t *testing.T) {
	type env struct {
		h        *harness
		leader   string
		follower string
		gen      int32
	}
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		run  func(e env) int16
		want *kerr.Error
	}{
		{"heartbeat old generation while preparing", func(e env) int16 {
			e.h.join(joinReq(9, "g", e.leader, ""))
			return e.h.handle(hbReq("g", e.follower, e.gen-1)).(*kmsg.HeartbeatResponse).ErrorCode
		}, kerr.IllegalGeneration},
		{"heartbeat current generation while preparing", func(e env) int16 {
			e.h.join(joinReq(9, "g", e.leader, ""))
			return e.h.handle(hbReq("g", e.follower, e.gen)).(*kmsg.HeartbeatResponse).ErrorCode
		}, kerr.RebalanceInProgress},
		{"heartbeat empty group id", func(e env) int16 {
			return e.h.handle(hbReq("", e.follower, e.gen)).(*kmsg.HeartbeatResponse).ErrorCode
		}, kerr.InvalidGroupID},
		{"sync unknown group", func(e env) int16 {
			r, _ := e.h.sync(syncReq("other", e.follower, e.gen, nil))
			return r.ErrorCode
		}, kerr.UnknownMemberID},
		{"sync unknown member", func(e env) int16 {
			r, _ := e.h.sync(syncReq("g", "ghost", e.gen, nil))
			return r.ErrorCode
		}, kerr.UnknownMemberID},
		{"join known member of another group", func(e env) int16 {
			r, _ := e.h.join(joinReq(9, "g2", e.follower, ""))
			return r.ErrorCode
		}, kerr.UnknownMemberID},
		{"leave v3 unknown instance", func(e env) int16 {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version = 4
			req.Group = "g"
			req.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: str("nobody")}}
			return e.h.handle(req).(*kmsg.LeaveGroupResponse).Members[0].ErrorCode
		}, kerr.UnknownMemberID},
		{"leave v3 unknown group", func(e env) int16 {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version = 4
			req.Group = "nope"
			req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: e.follower}}
			return e.h.handle(req).(*kmsg.LeaveGroupResponse).Members[0].ErrorCode
		}, kerr.UnknownMemberID},
		{"delete groups empty id", func(e env) int16 {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Groups = []string{""}
			return e.h.handle(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
		}, kerr.InvalidGroupID},
		{"offset delete of a live group's unsubscribed topic", func(e env) int16 {
			e.h.commit(commitReq("g", e.follower, e.gen, "u", map[int32]int64{0: 1}))
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = "g"
			req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
			return e.h.handle(req).(*kmsg.OffsetDeleteResponse).Topics[0].Partitions[0].ErrorCode
		}, nil},
		{"offset fetch v8 empty group id", func(e env) int16 {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version = 8
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: ""}}
			return e.h.handle(req).(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode
		}, kerr.InvalidGroupID},
		{"find coordinator unknown key type", func(e env) int16 {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version = 3
			req.CoordinatorKey, req.CoordinatorType = "g", 9
			return e.h.handle(req).(*kmsg.FindCoordinatorResponse).ErrorCode
		}, kerr.InvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ids, gen := h.stableGroup("g", 2)
			got := tc.run(env{h, ids[0], ids[1], gen})
			wantCode(t, tc.name, got, tc.want)
		})
	}
}

func TestStaticFencingAndLeave(t *testing.T) {
	h := newHarness(t)
	_, w := h.join(joinReq(9, "g", "", "inst"))
	h.advance(3 * time.Second)
	r := mustReady(t, w, "join")
	// A join with a member ID that does not own the instance is fenced.
	jr, _ := h.join(joinReq(9, "g", "someone-else", "inst"))
	wantCode(t, "join fenced", jr.ErrorCode, kerr.FencedInstanceID)
	s, _ := h.sync(&kmsg.SyncGroupRequest{Version: 5, Group: "g", MemberID: "x", Generation: r.Generation, InstanceID: kmsg.StringPtr("inst")})
	wantCode(t, "sync fenced", s.ErrorCode, kerr.FencedInstanceID)
	// Leave by instance ID with the wrong member ID is fenced; with the
	// right one the member leaves.
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 4
	req.Group = "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "wrong", InstanceID: kmsg.StringPtr("inst")}}
	lr := h.handle(req).(*kmsg.LeaveGroupResponse)
	wantCode(t, "leave fenced", lr.Members[0].ErrorCode, kerr.FencedInstanceID)
	req.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: kmsg.StringPtr("inst")}}
	lr = h.handle(req).(*kmsg.LeaveGroupResponse)
	wantCode(t, "leave", lr.Members[0].ErrorCode, nil)
	if s := h.groupState("g"); s != "Empty" {
		t.Fatalf("state %s", s)
	}
}

func TestDescribeAuthorizedOperations(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("g", 1)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = []string{"g"}
	if r := h.handle(dg).(*kmsg.DescribeGroupsResponse); r.Groups[0].AuthorizedOperations != -2147483648 {
		t.Fatalf("not requested: %d", r.Groups[0].AuthorizedOperations)
	}
	dg.IncludeAuthorizedOperations = true
	if r := h.handle(dg).(*kmsg.DescribeGroupsResponse); r.Groups[0].AuthorizedOperations != 328 {
		t.Fatalf("requested: %d", r.Groups[0].AuthorizedOperations)
	}
}

func TestSyncResponseCarriesProtocol(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 1)
	req := syncReq("g", ids[0], gen, nil)
	req.ProtocolType, req.Protocol = nil, nil
	s, _ := h.sync(req)
	if s.ErrorCode != 0 || s.Protocol == nil || *s.Protocol != "range" || *s.ProtocolType != "consumer" {
		t.Fatalf("sync: %+v", s)
	}
}

func TestConsumerGroupOffsets(t *testing.T) {
	h := newHarness(t)
	a := &cmem{id: "a"}
	h.cgHeartbeat("g", a, []string{"t"})
	commit := func(member string, epoch int32) int16 {
		return h.commit(commitReq("g", member, epoch, "t", map[int32]int64{0: 3}))[0]
	}
	wantCode(t, "commit", commit("a", a.epoch), nil)
	wantCode(t, "commit unknown member", commit("zz", a.epoch), kerr.UnknownMemberID)
	wantCode(t, "commit future epoch", commit("a", a.epoch+1), kerr.StaleMemberEpoch)
	wantCode(t, "simple commit to a live consumer group", commit("", -1), kerr.UnknownMemberID)

	fetch := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", MemberID: &member, MemberEpoch: epoch}}
		return h.handle(req).(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode
	}
	wantCode(t, "fetch", fetch("a", a.epoch), nil)
	wantCode(t, "fetch unknown member", fetch("zz", a.epoch), kerr.UnknownMemberID)
	wantCode(t, "fetch stale epoch", fetch("a", a.epoch+5), kerr.StaleMemberEpoch)

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	wantCode(t, "delete live consumer group", h.handle(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, kerr.NonEmptyGroup)
	// Describe as classic: not a classic group.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 6
	dg.Groups = []string{"g"}
	wantCode(t, "describe consumer group as classic", h.handle(dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode, kerr.GroupIDNotFound)
	// After the member leaves, the group can be deleted; a classic group
	// can then take the ID over.
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version = 1
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "a", -1
	h.handle(leave)
	wantCode(t, "delete", h.handle(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, nil)
	h.stableGroup("g", 1)
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(o *Options) { o.Registerer = reg })
	h.topics.hw[tp{"t", 0}] = 10
	h.topics.ts[tp{"t", 0}] = h.clk.Now().Add(-30 * time.Second)
	ids, gen := h.stableGroup("g", 2)
	h.commit(commitReq("g", ids[0], gen, "t", map[int32]int64{0: 4}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if m.GetHistogram() != nil {
				v = float64(m.GetHistogram().GetSampleCount())
			}
			got[mf.GetName()] = v
		}
	}
	// Lag in seconds: the record at the committed offset is 30s old, plus
	// the 6s the test clock spent forming the group.
	want := map[string]float64{
		"weir_group_lag_records":                6,
		"weir_group_lag_seconds":                36,
		"weir_group_members":                    2,
		"weir_group_rebalances_total":           1,
		"weir_group_rebalance_duration_seconds": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	// Duplicate registration (two coordinators on one registry) is an
	// error, not a panic.
	if _, err := NewCoordinator(Options{Offsets: &memStore{}, Topics: h.topics, Registerer: reg}); err == nil {
		t.Fatal("second coordinator on the same registry registered")
	}
}
