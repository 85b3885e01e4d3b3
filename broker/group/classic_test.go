package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func syncReq(group, member string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = group, member, gen
	pt, p := "consumer", "range"
	r.ProtocolType, r.Protocol = &pt, &p
	for m, a := range assign {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	return r
}

func hbReq(group, member string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, member, gen
	return r
}

// joinNew does the v4+ two-step join and returns the pending join.
func (h *harness) joinNew(group string) (string, chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	imm, _ := h.join(joinReq(9, group, "", ""))
	wantCode(h.t, "first join", imm.ErrorCode, kerr.MemberIDRequired)
	if imm.MemberID == "" {
		h.t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	imm2, wait := h.join(joinReq(9, group, imm.MemberID, ""))
	if imm2 != nil {
		h.t.Fatalf("second join answered immediately: %+v", imm2)
	}
	return imm.MemberID, wait
}

// stableGroup builds a Stable group of n members (first is the leader).
func (h *harness) stableGroup(group string, n int) (ids []string, gen int32) {
	h.t.Helper()
	var waits []chan *kmsg.JoinGroupResponse
	for range n {
		id, w := h.joinNew(group)
		ids = append(ids, id)
		waits = append(waits, w)
	}
	h.advance(3 * time.Second) // initial delay
	h.advance(3 * time.Second) // extended once if more joined
	var leader string
	for i, w := range waits {
		r := mustReady(h.t, w, "join")
		wantCode(h.t, "join", r.ErrorCode, nil)
		gen = r.Generation
		leader = r.LeaderID
		if r.MemberID != ids[i] {
			h.t.Fatalf("member id %s, want %s", r.MemberID, ids[i])
		}
	}
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "a-" + id
	}
	var syncWaits []chan *kmsg.SyncGroupResponse
	for _, id := range ids {
		if id == leader {
			continue
		}
		imm, w := h.sync(syncReq(group, id, gen, nil))
		if imm != nil {
			h.t.Fatalf("follower sync answered before leader: %+v", imm)
		}
		syncWaits = append(syncWaits, w)
	}
	imm, w := h.sync(syncReq(group, leader, gen, assign))
	if imm != nil {
		h.t.Fatalf("leader sync immediate: %+v", imm)
	}
	syncWaits = append(syncWaits, w)
	for _, w := range syncWaits {
		r := mustReady(h.t, w, "sync")
		wantCode(h.t, "sync", r.ErrorCode, nil)
	}
	if s := h.groupState(group); s != "Stable" {
		h.t.Fatalf("state %s, want Stable", s)
	}
	// Put the leader first.
	for i, id := range ids {
		if id == leader {
			ids[0], ids[i] = ids[i], ids[0]
		}
	}
	return ids, gen
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t)
	r, _ := h.join(joinReq(9, "", "", ""))
	wantCode(t, "empty group", r.ErrorCode, kerr.InvalidGroupID)
	bad := joinReq(9, "g", "", "")
	bad.SessionTimeoutMillis = 1000
	r, _ = h.join(bad)
	wantCode(t, "session too small", r.ErrorCode, kerr.InvalidSessionTimeout)
	bad = joinReq(9, "g", "", "")
	bad.Protocols = nil
	r, _ = h.join(bad)
	wantCode(t, "no protocols", r.ErrorCode, kerr.InconsistentGroupProtocol)
	r, _ = h.join(joinReq(9, "g", "ghost", ""))
	wantCode(t, "unknown member on new group", r.ErrorCode, kerr.UnknownMemberID)
	// v3 has no MEMBER_ID_REQUIRED: the member is added directly.
	r, w := h.join(joinReq(3, "g3", "", ""))
	if r != nil {
		t.Fatalf("v3 join answered immediately: %+v", r)
	}
	h.advance(3 * time.Second)
	jr := mustReady(t, w, "v3 join")
	wantCode(t, "v3 join", jr.ErrorCode, nil)
	if jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 {
		t.Fatalf("v3 join: %+v", jr)
	}
}

func TestInitialRebalanceDelayExtends(t *testing.T) {
	h := newHarness(t)
	a, wa := h.joinNew("g")
	h.advance(2 * time.Second)
	b, wb := h.joinNew("g")
	h.advance(1 * time.Second) // t=3: delay extended because b joined
	if _, ok := ready(wa); ok {
		t.Fatal("join completed although a member joined during the delay")
	}
	h.advance(2 * time.Second) // t=5
	if _, ok := ready(wa); ok {
		t.Fatal("join completed before the extended delay")
	}
	h.advance(1 * time.Second) // t=6
	ra := mustReady(t, wa, "a")
	rb := mustReady(t, wb, "b")
	if ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("generations %d %d", ra.Generation, rb.Generation)
	}
	if ra.LeaderID != a || rb.LeaderID != a {
		t.Fatalf("leader %s/%s, want %s", ra.LeaderID, rb.LeaderID, a)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("leader got %d members, follower %d", len(ra.Members), len(rb.Members))
	}
	if *ra.Protocol != "range" {
		t.Fatalf("protocol %q", *ra.Protocol)
	}
	_ = b
	if s := h.groupState("g"); s != "CompletingRebalance" {
		t.Fatalf("state %s", s)
	}
}

func TestSyncHeartbeatErrors(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	leader, follower := ids[0], ids[1]

	r := h.handle(hbReq("g", follower, gen)).(*kmsg.HeartbeatResponse)
	wantCode(t, "heartbeat", r.ErrorCode, nil)
	r = h.handle(hbReq("g", follower, gen+1)).(*kmsg.HeartbeatResponse)
	wantCode(t, "bad generation", r.ErrorCode, kerr.IllegalGeneration)
	r = h.handle(hbReq("g", "ghost", gen)).(*kmsg.HeartbeatResponse)
	wantCode(t, "unknown member", r.ErrorCode, kerr.UnknownMemberID)
	r = h.handle(hbReq("nogroup", follower, gen)).(*kmsg.HeartbeatResponse)
	wantCode(t, "unknown group", r.ErrorCode, kerr.UnknownMemberID)

	// Stable sync returns the member's assignment again.
	s, _ := h.sync(syncReq("g", follower, gen, nil))
	if s == nil || s.ErrorCode != 0 || string(s.MemberAssignment) != "a-"+follower {
		t.Fatalf("stable sync: %+v", s)
	}
	s, _ = h.sync(syncReq("g", follower, gen-1, nil))
	wantCode(t, "sync bad generation", s.ErrorCode, kerr.IllegalGeneration)
	bad := syncReq("g", follower, gen, nil)
	p := "roundrobin"
	bad.Protocol = &p
	s, _ = h.sync(bad)
	wantCode(t, "sync protocol", s.ErrorCode, kerr.InconsistentGroupProtocol)

	// The leader rejoining starts a rebalance: heartbeats get
	// REBALANCE_IN_PROGRESS, syncs too.
	_, wl := h.join(joinReq(9, "g", leader, ""))
	if h.groupState("g") != "PreparingRebalance" {
		t.Fatal("leader rejoin did not start a rebalance")
	}
	r = h.handle(hbReq("g", follower, gen)).(*kmsg.HeartbeatResponse)
	wantCode(t, "heartbeat in rebalance", r.ErrorCode, kerr.RebalanceInProgress)
	s, _ = h.sync(syncReq("g", follower, gen, nil))
	wantCode(t, "sync in rebalance", s.ErrorCode, kerr.RebalanceInProgress)
	// Follower rejoins: all members joined, the join completes at once.
	_, wf := h.join(joinReq(9, "g", follower, ""))
	rl := mustReady(t, wl, "leader rejoin")
	rf := mustReady(t, wf, "follower rejoin")
	if rl.Generation != gen+1 || rf.Generation != gen+1 {
		t.Fatalf("generation %d/%d want %d", rl.Generation, rf.Generation, gen+1)
	}
	// Heartbeat while CompletingRebalance is fine (Kafka 2.x+).
	r = h.handle(hbReq("g", follower, gen+1)).(*kmsg.HeartbeatResponse)
	wantCode(t, "heartbeat completing", r.ErrorCode, nil)
	// Sync of the new generation from the follower, then a rejoin with new
	// protocols answers the parked sync with REBALANCE_IN_PROGRESS.
	_, ws := h.sync(syncReq("g", follower, gen+1, nil))
	h.join(joinReq(9, "g", leader, "", "roundrobin", "range"))
	sr := mustReady(t, ws, "parked sync")
	wantCode(t, "parked sync", sr.ErrorCode, kerr.RebalanceInProgress)
}

func TestSessionTimeoutRemovesMember(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	leader, follower := ids[0], ids[1]
	// Only the leader heartbeats.
	for range 3 {
		h.clk.Advance(4 * time.Second)
		r := h.handle(hbReq("g", leader, gen)).(*kmsg.HeartbeatResponse)
		if r.ErrorCode != 0 {
			wantCode(t, "leader heartbeat", r.ErrorCode, kerr.RebalanceInProgress)
		}
	}
	if h.groupState("g") != "PreparingRebalance" {
		t.Fatalf("state %s after follower expiry", h.groupState("g"))
	}
	r := h.handle(hbReq("g", follower, gen)).(*kmsg.HeartbeatResponse)
	wantCode(t, "expired follower", r.ErrorCode, kerr.UnknownMemberID)
	_, w := h.join(joinReq(9, "g", leader, ""))
	jr := mustReady(t, w, "rejoin")
	if jr.Generation != gen+1 || len(jr.Members) != 1 {
		t.Fatalf("rejoin after expiry: %+v", jr)
	}
}

func TestRebalanceTimeoutRemovesLaggards(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	leader, follower := ids[0], ids[1]
	_, wl := h.join(joinReq(9, "g", leader, ""))
	// The follower keeps heartbeating but never rejoins.
	for range 4 {
		h.clk.Advance(5 * time.Second)
		h.handle(hbReq("g", follower, gen))
	}
	h.advance(time.Millisecond)
	jr := mustReady(t, wl, "leader join after rebalance timeout")
	wantCode(t, "join", jr.ErrorCode, nil)
	if len(jr.Members) != 1 || jr.Generation != gen+1 {
		t.Fatalf("join: %+v", jr)
	}
	r := h.handle(hbReq("g", follower, gen)).(*kmsg.HeartbeatResponse)
	wantCode(t, "removed follower", r.ErrorCode, kerr.UnknownMemberID)
}

func TestSyncTimeoutRemovesMembersThatDidNotSync(t *testing.T) {
	h := newHarness(t)
	a, wa := h.joinNew("g")
	_, wb := h.joinNew("g")
	h.advance(3 * time.Second)
	h.advance(3 * time.Second)
	ra := mustReady(t, wa, "a")
	mustReady(t, wb, "b")
	leader := ra.LeaderID
	_ = a
	// Nobody syncs within the rebalance timeout (20s): both are removed.
	h.advance(20 * time.Second)
	if s := h.groupState("g"); s != "Empty" {
		t.Fatalf("state %s, want Empty", s)
	}
	r := h.handle(hbReq("g", leader, ra.Generation)).(*kmsg.HeartbeatResponse)
	wantCode(t, "removed", r.ErrorCode, kerr.UnknownMemberID)
}

func TestLeaveGroupBatched(t *testing.T) {
	h := newHarness(t)
	ids, _ := h.stableGroup("g", 2)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Group = "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[1]}, {MemberID: "ghost"}}
	r := h.handle(req).(*kmsg.LeaveGroupResponse)
	if len(r.Members) != 2 {
		t.Fatalf("members %+v", r.Members)
	}
	wantCode(t, "leave", r.Members[0].ErrorCode, nil)
	wantCode(t, "leave ghost", r.Members[1].ErrorCode, kerr.UnknownMemberID)
	if h.groupState("g") != "PreparingRebalance" {
		t.Fatal("leave did not start a rebalance")
	}
	old := kmsg.NewPtrLeaveGroupRequest()
	old.Version = 2
	old.Group, old.MemberID = "g", ids[0]
	lr := h.handle(old).(*kmsg.LeaveGroupResponse)
	wantCode(t, "v2 leave", lr.ErrorCode, nil)
	if s := h.groupState("g"); s != "Empty" {
		t.Fatalf("state after everyone left: %s", s)
	}
	lr = h.handle(old).(*kmsg.LeaveGroupResponse)
	wantCode(t, "leave again", lr.ErrorCode, kerr.UnknownMemberID)
}

func TestInconsistentProtocol(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("g", 1)
	r, _ := h.join(joinReq(9, "g", "", "", "roundrobin"))
	wantCode(t, "no common protocol", r.ErrorCode, kerr.InconsistentGroupProtocol)
	other := joinReq(9, "g", "", "")
	other.ProtocolType = "connect"
	r, _ = h.join(other)
	wantCode(t, "other protocol type", r.ErrorCode, kerr.InconsistentGroupProtocol)
}

func TestStaticMemberRestartWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	// Static leader + static follower.
	_, wa := h.join(joinReq(9, "g", "", "inst-a"))
	_, wb := h.join(joinReq(9, "g", "", "inst-b"))
	h.advance(3 * time.Second)
	h.advance(3 * time.Second)
	ra := mustReady(t, wa, "a")
	rb := mustReady(t, wb, "b")
	gen := ra.Generation
	var leader, follower = ra.MemberID, rb.MemberID
	if ra.LeaderID != leader {
		leader, follower = follower, leader
	}
	_, w1 := h.sync(syncReq("g", follower, gen, nil))
	_, w2 := h.sync(syncReq("g", leader, gen, map[string]string{leader: "L", follower: "F"}))
	mustReady(t, w1, "sync f")
	mustReady(t, w2, "sync l")
	finst := "inst-b"
	if follower == ra.MemberID {
		finst = "inst-a"
	}

	// The follower's process restarts: it joins with no member ID and
	// its instance ID, and is answered at once with the same generation.
	h.clk.Advance(5 * time.Second)
	r, _ := h.join(joinReq(9, "g", "", finst))
	if r == nil {
		t.Fatal("static rejoin parked: it should not rebalance")
	}
	wantCode(t, "static rejoin", r.ErrorCode, nil)
	if r.Generation != gen || r.MemberID == follower || r.MemberID == "" {
		t.Fatalf("static rejoin: gen %d (want %d) member %q (old %q)", r.Generation, gen, r.MemberID, follower)
	}
	if h.groupState("g") != "Stable" {
		t.Fatalf("state %s after static rejoin", h.groupState("g"))
	}
	s, _ := h.sync(syncReq("g", r.MemberID, gen, nil))
	if s == nil || string(s.MemberAssignment) != "F" {
		t.Fatalf("static member lost its assignment: %+v", s)
	}
	// The old member ID is fenced.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", follower, gen, &finst
	hr := h.handle(hb).(*kmsg.HeartbeatResponse)
	wantCode(t, "old member", hr.ErrorCode, kerr.FencedInstanceID)
	// A static member with a different protocol set forces a rebalance.
	r, w := h.join(joinReq(9, "g", "", finst, "roundrobin", "range"))
	if r != nil {
		// range is still selected (leader's preference): no rebalance.
		wantCode(t, "rejoin", r.ErrorCode, nil)
	} else {
		_ = w
	}
}

func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("g", 1)
	imm, _ := h.join(joinReq(9, "g", "", ""))
	wantCode(t, "join", imm.ErrorCode, kerr.MemberIDRequired)
	h.advance(11 * time.Second) // session 10s
	r, _ := h.join(joinReq(9, "g", imm.MemberID, ""))
	wantCode(t, "expired pending member", r.ErrorCode, kerr.UnknownMemberID)
}
