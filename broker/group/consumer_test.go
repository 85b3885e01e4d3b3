package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cmem is a simulated KIP-848 client: it owns what the coordinator last
// assigned and acknowledges revocations on its next heartbeat.
type cmem struct {
	id    string
	epoch int32
	owned map[tp]bool
}

func (h *harness) cgHeartbeat(group string, m *cmem, topics []string) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = group, m.id, m.epoch
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = topics
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else {
		byTopic := map[string][]int32{}
		for p := range m.owned {
			byTopic[p.topic] = append(byTopic[p.topic], p.partition)
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for t, ps := range byTopic {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicIDOf(t), Partitions: ps})
		}
	}
	r := h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		return r
	}
	m.epoch = r.MemberEpoch
	if r.Assignment != nil {
		m.owned = map[tp]bool{}
		for _, t := range r.Assignment.Topics {
			name, _ := h.topics.TopicName(t.TopicID)
			for _, p := range t.Partitions {
				m.owned[tp{name, p}] = true
			}
		}
	}
	return r
}

// checkNoDoubleOwnership fails if two members own one partition.
func checkNoDoubleOwnership(t *testing.T, ms []*cmem) {
	t.Helper()
	seen := map[tp]string{}
	for _, m := range ms {
		for p := range m.owned {
			if o, ok := seen[p]; ok {
				t.Fatalf("%v owned by %s and %s", p, o, m.id)
			}
			seen[p] = m.id
		}
	}
}

func TestConsumerGroupJoinRevokeBeforeAssign(t *testing.T) {
	h := newHarness(t)
	h.topics.parts = map[string]int32{"t": 6}
	a := &cmem{id: "a"}
	r := h.cgHeartbeat("g", a, []string{"t"})
	wantCode(t, "join a", r.ErrorCode, nil)
	if len(a.owned) != 6 || a.epoch != 1 || r.HeartbeatIntervalMillis != 1000 {
		t.Fatalf("a: epoch %d owned %v", a.epoch, a.owned)
	}
	b := &cmem{id: "b"}
	rb := h.cgHeartbeat("g", b, []string{"t"})
	if rb.HeartbeatIntervalMillis != 200 {
		t.Fatalf("converging member's heartbeat interval %d, want 200", rb.HeartbeatIntervalMillis)
	}
	if len(b.owned) != 0 {
		t.Fatalf("b got partitions still owned by a: %v", b.owned)
	}
	checkNoDoubleOwnership(t, []*cmem{a, b})
	// a is told to keep 3 (revoke 3) and stays at its epoch.
	h.cgHeartbeat("g", a, nil)
	if len(a.owned) != 3 || a.epoch != 1 {
		t.Fatalf("a after revocation request: epoch %d owned %d", a.epoch, len(a.owned))
	}
	if s := h.groupState("g"); s != "Reconciling" {
		t.Fatalf("state %s", s)
	}
	// a acknowledges (its owned set no longer has them): epoch advances.
	h.cgHeartbeat("g", a, nil)
	if a.epoch != 2 {
		t.Fatalf("a epoch %d after ack", a.epoch)
	}
	h.cgHeartbeat("g", b, nil)
	if len(b.owned) != 3 || b.epoch != 2 {
		t.Fatalf("b: epoch %d owned %v", b.epoch, b.owned)
	}
	checkNoDoubleOwnership(t, []*cmem{a, b})
	if s := h.groupState("g"); s != "Stable" {
		t.Fatalf("state %s", s)
	}
	// Stale epoch is fenced; unknown member too.
	stale := &cmem{id: "a", epoch: 7, owned: a.owned}
	r = h.cgHeartbeat("g", stale, nil)
	wantCode(t, "stale epoch", r.ErrorCode, kerr.FencedMemberEpoch)
	r = h.cgHeartbeat("g", &cmem{id: "zz", epoch: 3}, nil)
	wantCode(t, "unknown member", r.ErrorCode, kerr.UnknownMemberID)
	// Previous epoch with a subset of the assignment is tolerated (lost
	// response).
	prev := &cmem{id: "a", epoch: 1, owned: a.owned}
	r = h.cgHeartbeat("g", prev, nil)
	wantCode(t, "previous epoch", r.ErrorCode, nil)

	// Leave: b's partitions go back to a without any revocation.
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version = 1
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "b", -1
	lr := h.handle(leave).(*kmsg.ConsumerGroupHeartbeatResponse)
	if lr.ErrorCode != 0 || lr.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", lr)
	}
	h.cgHeartbeat("g", a, nil)
	if len(a.owned) != 6 {
		t.Fatalf("a after b left: %d", len(a.owned))
	}
}

func TestConsumerGroupValidationAndClassicConflict(t *testing.T) {
	h := newHarness(t)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID = "g", "m"
	r := h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	wantCode(t, "join without rebalance timeout", r.ErrorCode, kerr.InvalidRequest)
	req.RebalanceTimeoutMillis = 1000
	r = h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	wantCode(t, "join without subscription", r.ErrorCode, kerr.InvalidRequest)
	req.MemberID = ""
	req.SubscribedTopicNames = []string{"t"}
	r = h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	wantCode(t, "v1 without member id", r.ErrorCode, kerr.InvalidRequest)

	h.stableGroup("classic", 1)
	req.MemberID, req.Group = "m", "classic"
	r = h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	wantCode(t, "join a live classic group", r.ErrorCode, kerr.GroupIDNotFound)
	// A classic join to a live consumer group is refused too.
	req.Group = "cg"
	r = h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	wantCode(t, "join cg", r.ErrorCode, nil)
	jr, _ := h.join(joinReq(9, "cg", "", ""))
	wantCode(t, "classic join of consumer group", jr.ErrorCode, kerr.InconsistentGroupProtocol)

	// Describe both kinds.
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"cg", "classic", "none"}
	dr := h.handle(d).(*kmsg.ConsumerGroupDescribeResponse)
	if g := dr.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 1 || g.AssignorName != "uniform" || len(g.Members[0].Assignment.TopicPartitions) != 1 {
		t.Fatalf("describe cg: %+v", g)
	}
	wantCode(t, "describe classic as consumer", dr.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "describe none", dr.Groups[2].ErrorCode, kerr.GroupIDNotFound)
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	lg.TypesFilter = []string{"consumer"}
	lr := h.handle(lg).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "cg" || lr.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("list consumer groups: %+v", lr.Groups)
	}
}

func TestConsumerGroupSessionAndStatic(t *testing.T) {
	h := newHarness(t)
	h.topics.parts = map[string]int32{"t": 4}
	join := func(id, inst string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "g", id, 0
		req.RebalanceTimeoutMillis = 5000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if inst != "" {
			req.InstanceID = &inst
		}
		return h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	r := join("s1", "inst")
	if r.ErrorCode != 0 || len(r.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("join: %+v", r)
	}
	epoch := r.MemberEpoch
	r = join("s2", "inst")
	wantCode(t, "second live instance", r.ErrorCode, kerr.UnreleasedInstanceID)
	// Temporary static leave, rejoin with a new member ID: same
	// assignment, no epoch bump.
	lv := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	lv.Version = 1
	lv.Group, lv.MemberID, lv.MemberEpoch = "g", "s1", -2
	inst := "inst"
	lv.InstanceID = &inst
	h.handle(lv)
	h.clk.Advance(10 * time.Second)
	r = join("s2", "inst")
	if r.ErrorCode != 0 || r.MemberEpoch != epoch || len(r.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("static rejoin: %+v", r)
	}
	// Session timeout removes the member.
	h.advance(46 * time.Second)
	if s := h.groupState("g"); s != "Empty" && s != "none" {
		t.Fatalf("state after session timeout: %s", s)
	}
}

func TestConsumerGroupRevocationTimeoutFences(t *testing.T) {
	h := newHarness(t)
	h.topics.parts = map[string]int32{"t": 4}
	a, b := &cmem{id: "a"}, &cmem{id: "b"}
	h.cgHeartbeat("g", a, []string{"t"})
	h.cgHeartbeat("g", b, []string{"t"})
	// a is asked to revoke but never acknowledges (it keeps reporting
	// all four partitions).
	h.clk.Advance(time.Second)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "g", "a", a.epoch
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicIDOf("t"), Partitions: []int32{0, 1, 2, 3}}}
	h.handle(req)
	h.handle(req)
	h.advance(31 * time.Second) // rebalance timeout 30s
	r := h.cgHeartbeat("g", a, nil)
	wantCode(t, "fenced a", r.ErrorCode, kerr.UnknownMemberID)
	h.cgHeartbeat("g", b, nil)
	if len(b.owned) != 4 {
		t.Fatalf("b owns %d after a was fenced", len(b.owned))
	}
}

// TestConsumerGroupRandomChurn drives random joins, leaves and heartbeats
// and checks that no partition is ever owned twice and that the group
// converges to a balanced assignment.
func TestConsumerGroupRandomChurn(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			h := newHarness(t)
			h.topics.parts = map[string]int32{"t": 12, "u": 5}
			var live []*cmem
			next := 0
			for step := range 200 {
				switch op := rng.IntN(10); {
				case op < 2 && len(live) < 6:
					m := &cmem{id: fmt.Sprintf("m%d", next)}
					next++
					h.cgHeartbeat("g", m, []string{"t", "u"})
					live = append(live, m)
				case op < 3 && len(live) > 0:
					i := rng.IntN(len(live))
					req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
					req.Version = 1
					req.Group, req.MemberID, req.MemberEpoch = "g", live[i].id, -1
					h.handle(req)
					live = append(live[:i], live[i+1:]...)
				default:
					if len(live) > 0 {
						m := live[rng.IntN(len(live))]
						if r := h.cgHeartbeat("g", m, nil); r.ErrorCode != 0 {
							t.Fatalf("step %d: heartbeat %s: %v", step, m.id, kerr.ErrorForCode(r.ErrorCode))
						}
					}
				}
				checkNoDoubleOwnership(t, live)
			}
			// Converge: everyone heartbeats a few rounds.
			for range 4 {
				for _, m := range live {
					h.cgHeartbeat("g", m, nil)
				}
			}
			checkNoDoubleOwnership(t, live)
			if len(live) > 0 {
				total, lo, hi := 0, 1<<30, 0
				for _, m := range live {
					n := len(m.owned)
					total += n
					lo, hi = min(lo, n), max(hi, n)
				}
				if total != 17 || hi-lo > 1 {
					t.Fatalf("not converged: total %d, loads %d..%d", total, lo, hi)
				}
				if s := h.groupState("g"); s != "Stable" {
					t.Fatalf("state %s", s)
				}
			}
		})
	}
}

func TestAssignUniformSticky(t *testing.T) {
	parts := func(t string) (int32, bool) { return map[string]int32{"t": 48}[t], t == "t" }
	var members []assignInput
	for i := range 4 {
		members = append(members, assignInput{id: fmt.Sprintf("m%d", i), subscribed: []string{"t"}})
	}
	a := assignUniform(members, parts)
	for id, ps := range a {
		if len(ps) != 12 {
			t.Fatalf("%s has %d", id, len(ps))
		}
	}
	// Add a fifth: only the partitions the newcomer needs move.
	prev := a
	members = members[:0]
	for i := range 5 {
		id := fmt.Sprintf("m%d", i)
		members = append(members, assignInput{id: id, subscribed: []string{"t"}, previous: prev[id]})
	}
	b := assignUniform(members, parts)
	moved := 0
	for id, ps := range b {
		for p := range ps {
			if !prev[id][p] {
				moved++
			}
		}
		if len(ps) < 9 || len(ps) > 10 {
			t.Fatalf("%s has %d after join", id, len(ps))
		}
	}
	if moved != 9 && moved != 10 {
		t.Fatalf("moved %d partitions, want 9 or 10 (only the newcomer's)", moved)
	}
	// Remove one: only its partitions move.
	prev = b
	members = members[:0]
	for i := 1; i < 5; i++ {
		id := fmt.Sprintf("m%d", i)
		members = append(members, assignInput{id: id, subscribed: []string{"t"}, previous: prev[id]})
	}
	c := assignUniform(members, parts)
	moved = 0
	for id, ps := range c {
		for p := range ps {
			if !prev[id][p] {
				moved++
			}
		}
		if len(ps) != 12 {
			t.Fatalf("%s has %d after leave", id, len(ps))
		}
	}
	if moved != len(prev["m0"]) {
		t.Fatalf("moved %d, want %d (the leaver's)", moved, len(prev["m0"]))
	}
	// Heterogeneous subscriptions: only subscribers get a topic.
	hp := func(t string) (int32, bool) { n, ok := map[string]int32{"x": 3, "y": 3}[t]; return n, ok }
	d := assignUniform([]assignInput{{id: "a", subscribed: []string{"x"}}, {id: "b", subscribed: []string{"x", "y"}}}, hp)
	for p := range d["a"] {
		if p.topic != "x" {
			t.Fatalf("a got %v", p)
		}
	}
	if len(d["a"])+len(d["b"]) != 6 || len(d["a"]) != 3 {
		t.Fatalf("heterogeneous: a %v b %v", d["a"], d["b"])
	}
}

func TestConsumerGroupRegexSubscription(t *testing.T) {
	h := newHarness(t)
	h.topics.parts = map[string]int32{"orders": 2, "other": 1, "t": 4, "bo": 1, "__consumer_offsets": 1}
	hb := func(id string, epoch int32, regex *string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "g", id, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 1000
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		req.SubscribedTopicRegex = regex
		return h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	count := func(r *kmsg.ConsumerGroupHeartbeatResponse) int {
		n := 0
		if r.Assignment != nil {
			for _, t := range r.Assignment.Topics {
				n += len(t.Partitions)
			}
		}
		return n
	}
	r := hb("m", 0, kmsg.StringPtr("(bad"))
	wantCode(t, "invalid regex", r.ErrorCode, kerr.InvalidRegularExpression)
	r = hb("m", 0, kmsg.StringPtr("o.*|__.*"))
	wantCode(t, "regex join", r.ErrorCode, nil)
	// Whole names, as Kafka's matcher().matches(): "bo" is not matched;
	// internal topics are not excluded by the coordinator.
	if n := count(r); n != 4 {
		t.Fatalf("regex matched %d partitions, want 4 (orders, other, __consumer_offsets)", n)
	}
	epoch := r.MemberEpoch
	// A new matching topic joins the subscription on the next heartbeat.
	h.topics.mu.Lock()
	h.topics.parts["ops"] = 2
	h.topics.mu.Unlock()
	r = hb("m", epoch, nil)
	if r.ErrorCode != 0 || count(r) != 6 || r.MemberEpoch <= epoch {
		t.Fatalf("after creating ops: %+v (count %d)", r, count(r))
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"g"}
	dr := h.handle(d).(*kmsg.ConsumerGroupDescribeResponse)
	if m := dr.Groups[0].Members[0]; m.SubscribedTopicRegex == nil || *m.SubscribedTopicRegex != "o.*|__.*" {
		t.Fatalf("describe regex: %+v", m)
	}
}

// KIP-848 membership survives a coordinator restart: members keep their
// IDs, epochs and partitions and are not fenced.
func TestConsumerGroupSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	h.topics.parts = map[string]int32{"t": 6}
	a, b := &cmem{id: "a"}, &cmem{id: "b"}
	h.cgHeartbeat("g", a, []string{"t"})
	h.cgHeartbeat("g", b, []string{"t"})
	for range 3 {
		h.cgHeartbeat("g", a, nil)
		h.cgHeartbeat("g", b, nil)
	}
	if len(a.owned) != 3 || len(b.owned) != 3 {
		t.Fatalf("before restart: a %v b %v", a.owned, b.owned)
	}
	aOwned, bOwned := maps.Clone(a.owned), maps.Clone(b.owned)
	h.restart(h.st)
	for range 3 {
		for _, m := range []*cmem{a, b} {
			if r := h.cgHeartbeat("g", m, nil); r.ErrorCode != 0 {
				t.Fatalf("%s after restart: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	if !maps.Equal(a.owned, aOwned) || !maps.Equal(b.owned, bOwned) {
		t.Fatalf("partitions moved across the restart: a %v -> %v, b %v -> %v", aOwned, a.owned, bOwned, b.owned)
	}
	if s := h.groupState("g"); s != "Stable" {
		t.Fatalf("state %s", s)
	}
	// A member that left before the restart stays gone.
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version = 1
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "b", -1
	h.handle(leave)
	h.restart(h.st)
	if r := h.cgHeartbeat("g", b, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("left member after restart: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	for range 3 {
		h.cgHeartbeat("g", a, nil)
	}
	if len(a.owned) != 6 {
		t.Fatalf("a owns %d after b left and a restart", len(a.owned))
	}
}

// A regular-expression subscription resolves to the matching topics its
// member's principal may describe (Options.TopicDescribable, given the
// principal of each heartbeat), and the principal is kept across a
// coordinator restart: a target computed after the restart, before the
// member heartbeats again, still leaves out what it may not describe.
func TestConsumerRegexFilteredByPrincipal(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.TopicDescribable = func(principal, host, topic string) bool {
			if host != "10.0.0.7" {
				t.Errorf("host %q, want the member's address without the slash", host)
			}
			return principal == "User:eve" || topic == "orders"
		}
	})
	h.topics.parts = map[string]int32{"orders": 2, "other": 1}
	hb := func(principal, id string, epoch int32, regex *string, names ...string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "g", id, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 1000
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		req.SubscribedTopicRegex, req.SubscribedTopicNames = regex, names
		ctx := WithPrincipal(WithClient(h.ctx(), "c", "/10.0.0.7"), principal)
		resp, err := h.c.Handle(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("%s heartbeat: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
		return r
	}
	// target is the topics of a member's target assignment.
	target := func(id string) map[string]bool {
		out := map[string]bool{}
		if err := h.c.do(h.ctx(), func() {
			for p := range h.c.groups["g"].cg.target[id] {
				out[p.topic] = true
			}
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}

	r := hb("User:dave", "dave", 0, kmsg.StringPtr("o.*"))
	if got := target("dave"); !maps.Equal(got, map[string]bool{"orders": true}) {
		t.Fatalf("dave's target %v, want orders only (other: not describable)", got)
	}
	hb("User:dave", "dave", r.MemberEpoch, nil)

	// After a restart eve joins (subscribing to orders by name), which
	// recomputes the target before dave heartbeats: only dave's regex
	// could bring in other, and his principal still may not describe it.
	h.restart(h.st)
	hb("User:eve", "eve", 0, nil, "orders")
	if got := target("dave"); got["other"] || !got["orders"] {
		t.Fatalf("after a restart dave's target %v, want orders without other", got)
	}
}
