package group

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func commitReq(group, member string, gen int32, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 9
	r.Group, r.MemberID, r.Generation = group, member, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset = p, o
		md := "md"
		pp.Metadata = &md
		t.Partitions = append(t.Partitions, pp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

func (h *harness) commit(req *kmsg.OffsetCommitRequest) []int16 {
	h.t.Helper()
	r := h.handle(req).(*kmsg.OffsetCommitResponse)
	var codes []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

// fetched returns group -> "topic/p" -> offset using OffsetFetch v8.
func (h *harness) fetched(groups ...string) map[string]map[tp]int64 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.RequireStable = true
	for _, g := range groups {
		req.Groups = append(req.Groups, kmsg.OffsetFetchRequestGroup{Group: g}) // all topics
	}
	r := h.handle(req).(*kmsg.OffsetFetchResponse)
	out := map[string]map[tp]int64{}
	for _, g := range r.Groups {
		if g.ErrorCode != 0 {
			h.t.Fatalf("fetch %s: %v", g.Group, kerr.ErrorForCode(g.ErrorCode))
		}
		m := map[tp]int64{}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				m[tp{t.Topic, p.Partition}] = p.Offset
			}
		}
		out[g.Group] = m
	}
	return out
}

func TestOffsetCommitValidation(t *testing.T) {
	h := newHarness(t)
	// Simple (standalone) commits.
	if c := h.commit(commitReq("simple", "", -1, "t", map[int32]int64{0: 5})); c[0] != 0 {
		t.Fatalf("simple commit: %v", kerr.ErrorForCode(c[0]))
	}
	c := h.commit(commitReq("nogroup", "m", 3, "t", map[int32]int64{0: 5}))
	wantCode(t, "commit to unknown group with generation", c[0], kerr.IllegalGeneration)
	c = h.commit(commitReq("simple", "", -1, "missing", map[int32]int64{0: 1}))
	wantCode(t, "unknown topic", c[0], kerr.UnknownTopicOrPartition)
	c = h.commit(commitReq("simple", "", -1, "t", map[int32]int64{9: 1}))
	wantCode(t, "unknown partition", c[0], kerr.UnknownTopicOrPartition)
	big := commitReq("simple", "", -1, "t", map[int32]int64{1: 1})
	md := strings.Repeat("x", 5000)
	big.Topics[0].Partitions[0].Metadata = &md
	c = h.commit(big)
	wantCode(t, "metadata too large", c[0], kerr.OffsetMetadataTooLarge)

	ids, gen := h.stableGroup("g", 2)
	c = h.commit(commitReq("g", ids[1], gen, "t", map[int32]int64{0: 10}))
	wantCode(t, "member commit", c[0], nil)
	c = h.commit(commitReq("g", ids[1], gen+1, "t", map[int32]int64{0: 11}))
	wantCode(t, "bad generation", c[0], kerr.IllegalGeneration)
	c = h.commit(commitReq("g", "ghost", gen, "t", map[int32]int64{0: 11}))
	wantCode(t, "unknown member", c[0], kerr.UnknownMemberID)
	c = h.commit(commitReq("g", "", -1, "t", map[int32]int64{0: 11}))
	wantCode(t, "simple commit to a live group", c[0], kerr.UnknownMemberID)
	// Commits during PreparingRebalance with the old generation are
	// allowed (eager consumers commit before rejoining) ...
	_, wl := h.join(joinReq(9, "g", ids[0], ""))
	c = h.commit(commitReq("g", ids[1], gen, "t", map[int32]int64{0: 12}))
	wantCode(t, "commit while preparing", c[0], nil)
	// ... but not during CompletingRebalance.
	h.join(joinReq(9, "g", ids[1], ""))
	mustReady(t, wl, "rejoin")
	c = h.commit(commitReq("g", ids[1], gen+1, "t", map[int32]int64{0: 13}))
	wantCode(t, "commit while completing", c[0], kerr.RebalanceInProgress)

	got := h.fetched("g", "simple", "unknown")
	if got["g"][tp{"t", 0}] != 12 || got["simple"][tp{"t", 0}] != 5 || len(got["unknown"]) != 0 {
		t.Fatalf("fetched %v", got)
	}
}

func TestOffsetFetchVersions(t *testing.T) {
	h := newHarness(t)
	h.commit(commitReq("g", "", -1, "t", map[int32]int64{0: 7, 1: 8}))
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = "g"
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 2}}}
	r := h.handle(req).(*kmsg.OffsetFetchResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch v7: %+v", r)
	}
	if p := r.Topics[0].Partitions; p[0].Offset != 7 || *p[0].Metadata != "md" || p[1].Offset != -1 {
		t.Fatalf("fetch v7 partitions: %+v", p)
	}
	// v8 multi-group with an explicit topic list.
	req = kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{1}}}},
		{Group: "other"},
	}
	r = h.handle(req).(*kmsg.OffsetFetchResponse)
	if len(r.Groups) != 2 || r.Groups[0].Topics[0].Partitions[0].Offset != 8 || len(r.Groups[1].Topics) != 0 {
		t.Fatalf("fetch v8: %+v", r.Groups)
	}
	// v10 uses topic IDs.
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Version = 10
	c.Group, c.Generation = "g", -1
	c.Topics = []kmsg.OffsetCommitRequestTopic{{TopicID: topicIDOf("u"), Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 3, LeaderEpoch: -1}}},
		{TopicID: topicIDOf("nope"), Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}}}}
	cr := h.handle(c).(*kmsg.OffsetCommitResponse)
	wantCode(t, "v10 commit", cr.Topics[0].Partitions[0].ErrorCode, nil)
	wantCode(t, "v10 unknown id", cr.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicID)
	if got := h.fetched("g")["g"][tp{"u", 1}]; got != 3 {
		t.Fatalf("v10 commit fetched %d", got)
	}
}

func TestOffsetsSurviveRestartAndCrash(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	h.commit(commitReq("g", ids[0], gen, "t", map[int32]int64{0: 100, 1: 101}))
	h.commit(commitReq("s", "", -1, "u", map[int32]int64{1: 7}))
	h.commit(commitReq("s", "", -1, "u", map[int32]int64{1: 8})) // overwrite

	// Clean restart on the same log: offsets and the Stable group come
	// back; members keep heartbeating without noticing.
	h.restart(h.st)
	got := h.fetched("g", "s")
	if got["g"][tp{"t", 0}] != 100 || got["g"][tp{"t", 1}] != 101 || got["s"][tp{"u", 1}] != 8 {
		t.Fatalf("after restart: %v", got)
	}
	if s := h.groupState("g"); s != "Stable" {
		t.Fatalf("restored state %s", s)
	}
	r := h.handle(hbReq("g", ids[1], gen)).(*kmsg.HeartbeatResponse)
	wantCode(t, "heartbeat after restart", r.ErrorCode, nil)

	// Crash: only durable appends survive. Every acknowledged commit was
	// durable, so all offsets are there.
	h.restart(h.st.crash())
	got = h.fetched("g", "s")
	if got["g"][tp{"t", 0}] != 100 || got["s"][tp{"u", 1}] != 8 {
		t.Fatalf("after crash: %v", got)
	}
}

func TestCommitFailureIsNotVisible(t *testing.T) {
	h := newHarness(t)
	h.commit(commitReq("s", "", -1, "t", map[int32]int64{0: 1}))
	h.st.mu.Lock()
	h.st.fail = errors.New("disk on fire")
	h.st.mu.Unlock()
	c := h.commit(commitReq("s", "", -1, "t", map[int32]int64{0: 2}))
	wantCode(t, "failed append", c[0], kerr.NotCoordinator)
	if got := h.fetched("s")["s"][tp{"t", 0}]; got != 1 {
		t.Fatalf("failed commit visible: %d", got)
	}
	h.st.mu.Lock()
	h.st.fail = nil
	h.st.mu.Unlock()
	h.restart(h.st.crash())
	if got := h.fetched("s")["s"][tp{"t", 0}]; got != 1 {
		t.Fatalf("after crash: %d", got)
	}
}

func TestCommitNotVisibleBeforeAppendReturns(t *testing.T) {
	h := newHarness(t)
	h.st.block = make(chan struct{})
	done := make(chan []int16)
	go func() { done <- h.commit(commitReq("s", "", -1, "t", map[int32]int64{0: 9})) }()
	// While the append is blocked, the offset is not visible and the
	// commit is not acknowledged. (Other requests still run: the loop
	// does not wait on the log.) Poll the loop a bounded number of times
	// until the commit is queued.
	var queued bool
	for range 1000 {
		_ = h.c.do(h.ctx(), func() {
			if g := h.c.groups["s"]; g != nil && g.pendingWrites > 0 {
				queued = true
			}
		})
		if queued {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !queued {
		t.Fatal("commit never queued")
	}
	if got := h.fetched("s")["s"]; len(got) != 0 {
		t.Fatalf("offset visible before its append returned: %v", got)
	}
	select {
	case <-done:
		t.Fatal("commit acknowledged before its append returned")
	default:
	}
	crashed := h.st.crash() // a crash now: nothing of it survives
	close(h.st.block)
	if c := <-done; c[0] != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(c[0]))
	}
	h.st.block = nil
	if got := h.fetched("s")["s"][tp{"t", 0}]; got != 9 {
		t.Fatalf("after append: %d", got)
	}
	h.restart(crashed)
	if got := h.fetched("s")["s"]; len(got) != 0 {
		t.Fatalf("crash before durable append: offsets %v", got)
	}
}

func TestDeleteGroupsAndOffsetDelete(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 1)
	h.commit(commitReq("g", ids[0], gen, "t", map[int32]int64{0: 1}))
	h.commit(commitReq("s", "", -1, "t", map[int32]int64{0: 1, 1: 2}))
	h.commit(commitReq("s", "", -1, "u", map[int32]int64{0: 3}))

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	del.Groups = []string{"g", "s", "nope"}
	r := h.handle(del).(*kmsg.DeleteGroupsResponse)
	wantCode(t, "delete live group", r.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "delete simple group", r.Groups[1].ErrorCode, nil)
	wantCode(t, "delete unknown", r.Groups[2].ErrorCode, kerr.GroupIDNotFound)
	if got := h.fetched("s")["s"]; len(got) != 0 {
		t.Fatalf("deleted group still has offsets %v", got)
	}

	// OffsetDelete: a subscribed topic of a live consumer group is refused.
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	h.c.do(h.ctx(), func() {
		// Give the member a subscription to "t".
		m := h.c.groups["g"].members[ids[0]]
		md := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
		m.protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md.AppendTo(nil)}}
	})
	or := h.handle(od).(*kmsg.OffsetDeleteResponse)
	wantCode(t, "offset delete subscribed", or.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	od.Group = "gone"
	or = h.handle(od).(*kmsg.OffsetDeleteResponse)
	wantCode(t, "offset delete unknown group", or.ErrorCode, kerr.GroupIDNotFound)

	// After the member leaves, the offsets can be deleted.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version = 1
	lv.Group, lv.MemberID = "g", ids[0]
	h.handle(lv)
	od.Group = "g"
	or = h.handle(od).(*kmsg.OffsetDeleteResponse)
	wantCode(t, "offset delete", or.Topics[0].Partitions[0].ErrorCode, nil)
	if got := h.fetched("g")["g"]; len(got) != 0 {
		t.Fatalf("offsets after OffsetDelete: %v", got)
	}
	// Tombstones replay.
	h.commit(commitReq("s", "", -1, "t", map[int32]int64{3: 33}))
	h.restart(h.st.crash())
	got := h.fetched("g", "s")
	if len(got["g"]) != 0 || len(got["s"]) != 1 || got["s"][tp{"t", 3}] != 33 {
		t.Fatalf("after restart: %v", got)
	}
}

func TestOffsetRetention(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.OffsetsRetention = time.Hour
		o.RetentionCheckInterval = time.Minute
	})
	h.commit(commitReq("s", "", -1, "t", map[int32]int64{0: 1}))
	ids, gen := h.stableGroup("g", 1)
	h.commit(commitReq("g", ids[0], gen, "t", map[int32]int64{0: 1}))
	h.advance(30 * time.Minute)
	h.commit(commitReq("s", "", -1, "t", map[int32]int64{1: 1}))
	// The live group keeps its offsets however old.
	for range 6 {
		h.clk.Advance(9 * time.Second)
		h.handle(hbReq("g", ids[0], gen))
	}
	h.advance(31 * time.Minute)
	got := h.fetched("s", "g")
	if _, ok := got["s"][tp{"t", 0}]; ok {
		t.Fatalf("simple offset not expired: %v", got)
	}
	if _, ok := got["s"][tp{"t", 1}]; !ok {
		t.Fatalf("younger simple offset expired: %v", got)
	}
	if len(got["g"]) != 1 {
		t.Fatalf("live group's offsets expired: %v", got)
	}
	// Once the group has been empty for the retention, its offsets go.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version = 1
	lv.Group, lv.MemberID = "g", ids[0]
	h.handle(lv)
	h.advance(61 * time.Minute)
	got = h.fetched("s", "g")
	if len(got["g"]) != 0 || len(got["s"]) != 0 {
		t.Fatalf("offsets after retention: %v", got)
	}
	h.restart(h.st)
	got = h.fetched("s", "g")
	if len(got["g"]) != 0 || len(got["s"]) != 0 {
		t.Fatalf("expired offsets back after restart: %v", got)
	}
}

func TestLag(t *testing.T) {
	h := newHarness(t)
	h.commit(commitReq("s", "", -1, "t", map[int32]int64{0: 10, 1: 50}))
	h.topics.mu.Lock()
	h.topics.hw[tp{"t", 0}] = 25
	h.topics.hw[tp{"t", 1}] = 50
	h.topics.ts[tp{"t", 0}] = h.clk.Now().Add(-90 * time.Second)
	h.topics.mu.Unlock()
	lag, err := h.c.Lag(h.ctx(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(lag) != 2 || lag[0].Lag != 15 || lag[0].LagTime != 90*time.Second || lag[1].Lag != 0 || lag[1].LagTime != 0 {
		t.Fatalf("lag %+v", lag)
	}
	// A stopped consumer: lag in time keeps growing.
	h.clk.Advance(time.Minute)
	lag, _ = h.c.Lag(h.ctx(), "s")
	if lag[0].LagTime != 150*time.Second {
		t.Fatalf("lag time %v", lag[0].LagTime)
	}
}

func TestFindCoordinatorListDescribe(t *testing.T) {
	h := newHarness(t)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"a", "", "b"}
	r := h.handle(fc).(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 3 || r.Coordinators[0].NodeID != 1 || r.Coordinators[0].Port != 9092 || r.Coordinators[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("find coordinator v4: %+v", r.Coordinators)
	}
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 3
	fc.CoordinatorKey = "a"
	r = h.handle(fc).(*kmsg.FindCoordinatorResponse)
	if r.ErrorCode != 0 || r.Host != "127.0.0.1" || r.NodeID != 1 {
		t.Fatalf("find coordinator v3: %+v", r)
	}

	h.stableGroup("live", 2)
	h.commit(commitReq("simple", "", -1, "t", map[int32]int64{0: 1}))
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	lr := h.handle(lg).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 2 || lr.Groups[0].Group != "live" || lr.Groups[0].GroupState != "Stable" || lr.Groups[0].GroupType != "classic" {
		t.Fatalf("list: %+v", lr.Groups)
	}
	lg.StatesFilter = []string{"empty"}
	lr = h.handle(lg).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "simple" {
		t.Fatalf("list empty: %+v", lr.Groups)
	}
	lg.StatesFilter, lg.TypesFilter = nil, []string{"consumer"}
	lr = h.handle(lg).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 0 {
		t.Fatalf("list consumer type: %+v", lr.Groups)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = []string{"live", "missing"}
	dr := h.handle(dg).(*kmsg.DescribeGroupsResponse)
	if g := dr.Groups[0]; g.State != "Stable" || g.Protocol != "range" || len(g.Members) != 2 || len(g.Members[0].MemberAssignment) == 0 || g.Members[0].ClientID != "client" {
		t.Fatalf("describe live: %+v", g)
	}
	if g := dr.Groups[1]; g.State != "Dead" || g.ErrorCode != 0 {
		t.Fatalf("describe missing v5: %+v", g)
	}
	dg.Version = 6
	dr = h.handle(dg).(*kmsg.DescribeGroupsResponse)
	wantCode(t, "describe missing v6", dr.Groups[1].ErrorCode, kerr.GroupIDNotFound)
}
