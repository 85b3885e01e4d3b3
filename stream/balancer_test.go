package stream

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testTaskOf: topics "a" and "b" form sub-topology 0 (co-partitioned), "c"
// sub-topology 1; any other topic is no source.
func testTaskOf(topic string, p int32) (taskID, bool) {
	switch topic {
	case "a", "b":
		return taskID{0, p}, true
	case "c":
		return taskID{1, p}, true
	}
	return taskID{}, false
}

var testTopics = map[string]int32{"a": 4, "b": 4, "c": 2}

// simMember is a group member in a balancer simulation: what it owns and
// advertises.
type simMember struct {
	id       string
	userData []byte
	owned    map[string][]int32
	owners   []taskOwner // the owners table of its last assignment
}

// balanceOnce runs one join/sync round: every member joins with what it owns
// (at generation gen), the leader balances, every member parses its
// assignment. It returns the assignment per member id.
func balanceOnce(t *testing.T, members []*simMember, gen int32, topics map[string]int32) map[string]map[string][]int32 {
	t.Helper()
	var join []kmsg.JoinGroupResponseMember
	interests := slices.Sorted(maps.Keys(topics))
	for _, m := range members {
		tb := &taskBalancer{taskOf: testTaskOf, userData: m.userData}
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.ProtocolMetadata = tb.JoinGroupMetadata(interests, m.owned, gen)
		join = append(join, jm)
	}
	leader := &taskBalancer{taskOf: testTaskOf}
	gmb, _, err := leader.MemberBalancer(join)
	if err != nil {
		t.Fatal(err)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]int32{}
	for _, sa := range into.IntoSyncAssignment() {
		var m *simMember
		for _, c := range members {
			if c.id == sa.MemberID {
				m = c
			}
		}
		if m == nil {
			t.Fatalf("assignment for unknown member %s", sa.MemberID)
		}
		tb := &taskBalancer{taskOf: testTaskOf, onOwners: func(o []taskOwner) { m.owners = o }}
		asg, err := tb.ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		out[sa.MemberID] = asg
	}
	return out
}

// checkRound asserts the invariants of one round: no partition goes to two
// members, no member is given a partition another member still owns
// (cooperative safety), and a task's partitions are never split.
func checkRound(t *testing.T, members []*simMember, asg map[string]map[string][]int32) {
	t.Helper()
	owner := map[topicPartition]string{}
	taskOwner := map[taskID]string{}
	for id, ps := range asg {
		for topic, parts := range ps {
			for _, p := range parts {
				tp := topicPartition{topic, p}
				if o, ok := owner[tp]; ok {
					t.Fatalf("%s-%d assigned to %s and %s", tp.topic, tp.partition, o, id)
				}
				owner[tp] = id
				if tid, ok := testTaskOf(topic, p); ok {
					if o, ok := taskOwner[tid]; ok && o != id {
						t.Fatalf("task %s split between %s and %s", tid, o, id)
					}
					taskOwner[tid] = id
				}
			}
		}
	}
	for _, m := range members {
		for topic, parts := range m.owned {
			for _, p := range parts {
				if o, ok := owner[topicPartition{topic, p}]; ok && o != m.id {
					t.Fatalf("%s-%d given to %s while %s still owns it", topic, p, o, m.id)
				}
			}
		}
	}
}

// settle runs rounds until the assignment is stable (each member then owns
// exactly its assignment: the cooperative protocol's revoke-then-rejoin).
// It returns the number of rounds and the tasks each member lost or gained
// in total.
func settle(t *testing.T, members []*simMember, gen *int32, topics map[string]int32) (rounds int) {
	t.Helper()
	for rounds = 1; rounds <= 5; rounds++ {
		*gen++
		asg := balanceOnce(t, members, *gen, topics)
		checkRound(t, members, asg)
		changed := false
		for _, m := range members {
			if !equalAssignment(m.owned, asg[m.id]) {
				changed = true
			}
			m.owned = asg[m.id]
		}
		if !changed {
			return rounds
		}
	}
	t.Fatal("assignment did not settle in 5 rounds")
	return 0
}

func equalAssignment(x, y map[string][]int32) bool {
	norm := func(m map[string][]int32) map[string][]int32 {
		out := map[string][]int32{}
		for k, v := range m {
			if len(v) > 0 {
				out[k] = slices.Sorted(slices.Values(v))
			}
		}
		return out
	}
	return maps.EqualFunc(norm(x), norm(y), slices.Equal[[]int32])
}

func tasksOf(m *simMember) map[taskID]bool {
	out := map[taskID]bool{}
	for topic, ps := range m.owned {
		for _, p := range ps {
			id, _ := testTaskOf(topic, p)
			out[id] = true
		}
	}
	return out
}

func checkBalanced(t *testing.T, members []*simMember, totalTasks int) {
	t.Helper()
	lo, hi, sum := totalTasks, 0, 0
	for _, m := range members {
		n := len(tasksOf(m))
		lo, hi, sum = min(lo, n), max(hi, n), sum+n
	}
	if sum != totalTasks || hi-lo > 1 {
		for _, m := range members {
			t.Logf("%s owns %v", m.id, m.owned)
		}
		t.Fatalf("tasks assigned %d (want %d), spread %d..%d", sum, totalTasks, lo, hi)
	}
}

func TestTaskBalancerGroupsAndBalances(t *testing.T) {
	members := []*simMember{{id: "m1"}, {id: "m2"}, {id: "m3"}}
	var gen int32
	if r := settle(t, members, &gen, testTopics); r != 1 {
		// Nothing is owned at first: one round assigns everything
		// (the round that confirms stability counts as the first).
		t.Logf("settled in %d rounds", r)
	}
	checkBalanced(t, members, 6) // tasks 0_0..0_3 and 1_0..1_1
	for _, m := range members {
		for topic, ps := range m.owned {
			if topic != "a" && topic != "b" {
				continue
			}
			other := map[string]string{"a": "b", "b": "a"}[topic]
			for _, p := range ps {
				if !slices.Contains(m.owned[other], p) {
					t.Fatalf("%s owns %s-%d but not %s-%d: co-partitioned task split", m.id, topic, p, other, p)
				}
			}
		}
	}
}

// A joining member takes only what it needs, in two cooperative rounds: the
// first revokes from the previous owners (assigning the moved tasks to
// nobody), the second hands them over. Tasks that stay never move.
func TestTaskBalancerStickyCooperativeJoin(t *testing.T) {
	m1, m2 := &simMember{id: "m1"}, &simMember{id: "m2"}
	var gen int32
	settle(t, []*simMember{m1, m2}, &gen, testTopics)
	before := map[string]map[taskID]bool{"m1": tasksOf(m1), "m2": tasksOf(m2)}

	m3 := &simMember{id: "m3"}
	members := []*simMember{m1, m2, m3}
	// Round 1 by hand: m3 gets nothing yet, m1 and m2 keep subsets.
	gen++
	asg := balanceOnce(t, members, gen, testTopics)
	checkRound(t, members, asg)
	if len(asg["m3"]) != 0 {
		t.Fatalf("joining member got %v in the first round, want nothing (the tasks are still owned)", asg["m3"])
	}
	for _, m := range members {
		m.owned = asg[m.id]
	}
	revoked := 0
	for _, m := range []*simMember{m1, m2} {
		now := tasksOf(m)
		for id := range now {
			if !before[m.id][id] {
				t.Fatalf("%s gained task %s during a revoke round", m.id, id)
			}
		}
		revoked += len(before[m.id]) - len(now)
	}
	if revoked != 2 {
		t.Fatalf("%d tasks revoked for the newcomer, want 2 (6 tasks over 3 members)", revoked)
	}
	settle(t, members, &gen, testTopics)
	checkBalanced(t, members, 6)
	for _, m := range []*simMember{m1, m2} {
		for id := range tasksOf(m) {
			if !before[m.id][id] {
				t.Fatalf("%s gained task %s when a member joined", m.id, id)
			}
		}
	}
}

// When a member leaves, its tasks are spread over the others and nobody
// else's tasks move.
func TestTaskBalancerStickyLeave(t *testing.T) {
	m1, m2, m3 := &simMember{id: "m1"}, &simMember{id: "m2"}, &simMember{id: "m3"}
	var gen int32
	settle(t, []*simMember{m1, m2, m3}, &gen, testTopics)
	before := map[string]map[taskID]bool{"m1": tasksOf(m1), "m2": tasksOf(m2)}
	if r := settle(t, []*simMember{m1, m2}, &gen, testTopics); r > 2 {
		t.Fatalf("a leave took %d rounds, want at most 2 (nothing to revoke)", r)
	}
	checkBalanced(t, []*simMember{m1, m2}, 6)
	for _, m := range []*simMember{m1, m2} {
		for id := range before[m.id] {
			if !tasksOf(m)[id] {
				t.Fatalf("%s lost task %s when another member left", m.id, id)
			}
		}
	}
}

// A member that rejoins with a stale claim on a partition another member now
// owns never causes a double assignment.
func TestTaskBalancerConflictingClaims(t *testing.T) {
	m1 := &simMember{id: "m1", owned: map[string][]int32{"a": {0}, "b": {0}}}
	m2 := &simMember{id: "m2", owned: map[string][]int32{"a": {0}, "b": {0}, "c": {1}}}
	members := []*simMember{m1, m2}
	asg := balanceOnce(t, members, 5, testTopics)
	checkRound(t, members, asg)
	for id, a := range asg {
		if slices.Contains(a["a"], 0) {
			t.Fatalf("task 0_0 given to %s while both members claim it", id)
		}
	}
	var gen int32 = 5
	for _, m := range members {
		m.owned = asg[m.id]
	}
	settle(t, members, &gen, testTopics)
	checkBalanced(t, members, 6)
}

// Unknown topics (no task) are balanced partition by partition.
func TestTaskBalancerUnknownTopic(t *testing.T) {
	members := []*simMember{{id: "m1"}, {id: "m2"}}
	var gen int32
	topics := map[string]int32{"a": 2, "b": 2, "x": 3}
	settle(t, members, &gen, topics)
	got := 0
	for _, m := range members {
		got += len(m.owned["x"])
	}
	if got != 3 {
		t.Fatalf("x: %d partitions assigned, want 3", got)
	}
}

// Every assignment carries the owners table: each member's advertised
// userData with its partitions.
func TestTaskBalancerOwnersTable(t *testing.T) {
	members := []*simMember{
		{id: "m1", userData: []byte("host1:8080")},
		{id: "m2", userData: []byte("host2:8080")},
		{id: "m3"},
	}
	var gen int32
	settle(t, members, &gen, testTopics)
	for _, m := range members {
		if len(m.owners) != len(members) {
			t.Fatalf("%s: owners table has %d members, want %d", m.id, len(m.owners), len(members))
		}
		for _, o := range m.owners {
			var match *simMember
			for _, c := range members {
				if bytes.Equal(c.userData, o.userData) && equalAssignment(c.owned, o.partitions) {
					match = c
				}
			}
			if match == nil {
				t.Fatalf("%s: owners entry %q %v matches no member", m.id, o.userData, o.partitions)
			}
		}
	}
}

func TestTaskBalancerRejectsMalformed(t *testing.T) {
	tb := &taskBalancer{taskOf: testTaskOf, onOwners: func([]taskOwner) {}}
	for _, b := range [][]byte{nil, {0}, {0, 0, 0, 0, 0, 1}} {
		if _, err := tb.ParseSyncAssignment(b); err == nil {
			t.Errorf("ParseSyncAssignment(%x) succeeded", b)
		}
	}
	ka := kmsg.NewConsumerMemberAssignment()
	ka.UserData = []byte{9, 9}
	if _, err := tb.ParseSyncAssignment(ka.AppendTo(nil)); err == nil {
		t.Error("assignment with a bad owners table accepted")
	}
	if _, err := decodeMemberUserData([]byte{7, 'x'}); err == nil {
		t.Error("member user data of an unknown version accepted")
	}
	jm := kmsg.NewJoinGroupResponseMember()
	jm.MemberID = "m1"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"a"}
	meta.UserData = []byte{7}
	jm.ProtocolMetadata = meta.AppendTo(nil)
	gmb, _, err := tb.MemberBalancer([]kmsg.JoinGroupResponseMember{jm})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(testTopics); err == nil {
		t.Error("balance with a member of unknown user data version succeeded")
	}
}

func FuzzDecodeOwners(f *testing.F) {
	f.Add(encodeOwners([]taskOwner{{userData: []byte("h:1"), partitions: map[string][]int32{"a": {0, 1}}}, {}}))
	f.Add([]byte{0, 1, 3, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		owners, err := decodeOwners(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		again, err := decodeOwners(encodeOwners(owners))
		if err != nil {
			t.Fatalf("re-encoded owners do not decode: %v", err)
		}
		if len(again) != len(owners) {
			t.Fatalf("%d owners, then %d", len(owners), len(again))
		}
		for i := range owners {
			if !bytes.Equal(again[i].userData, owners[i].userData) {
				t.Fatalf("owner %d: user data %q, then %q", i, owners[i].userData, again[i].userData)
			}
		}
	})
}

func FuzzParseSyncAssignment(f *testing.F) {
	ka := kmsg.NewConsumerMemberAssignment()
	ka.UserData = encodeOwners([]taskOwner{{userData: []byte("x")}})
	f.Add(ka.AppendTo(nil))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		tb := &taskBalancer{taskOf: testTaskOf, onOwners: func([]taskOwner) {}}
		_, _ = tb.ParseSyncAssignment(b) // must not panic
	})
}

// Example of the task string form (used in logs, metrics, state dirs).
func TestTaskIDString(t *testing.T) {
	if s := fmt.Sprint(taskID{1, 12}); s != "1_12" {
		t.Fatalf("taskID = %s", s)
	}
}

// TestTaskBalancerRandomMembership drives random joins and leaves (topics of
// random sizes) and checks after every change: each round is safe (no
// partition given to two members, none given while another member owns it,
// no task split), the group settles within three rounds, the result is
// balanced, and a member that stays keeps every task it had unless it had
// more than its new share.
func TestTaskBalancerRandomMembership(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	for trial := range 20 {
		topics := map[string]int32{"c": int32(1 + rng.IntN(6))}
		n := int32(1 + rng.IntN(8))
		topics["a"], topics["b"] = n, n
		total := int(n + topics["c"])
		var members []*simMember
		var gen int32
		next := 0
		for step := range 12 {
			if len(members) <= 1 || (len(members) < 6 && rng.IntN(2) == 0) {
				members = append(members, &simMember{id: fmt.Sprintf("m%02d", next)})
				next++
			} else {
				i := rng.IntN(len(members))
				members = slices.Delete(members, i, i+1)
			}
			before := map[string]map[taskID]bool{}
			for _, m := range members {
				before[m.id] = tasksOf(m)
			}
			if r := settle(t, members, &gen, topics); r > 3 {
				t.Fatalf("trial %d step %d: settled in %d rounds", trial, step, r)
			}
			checkBalanced(t, members, total)
			// Stickiness: a member at or below the floor share loses
			// nothing, no member both loses and gains, and the tasks
			// taken from members that stay are the fewest the balance
			// needs (the members holding most keep the extra tasks).
			floor, extra := total/len(members), total%len(members)
			var held []int
			lost := 0
			for _, m := range members {
				now := tasksOf(m)
				held = append(held, len(before[m.id]))
				l, g := 0, 0
				for id := range before[m.id] {
					if !now[id] {
						l++
					}
				}
				for id := range now {
					if !before[m.id][id] {
						g++
					}
				}
				if l > 0 && (g > 0 || len(before[m.id]) <= floor) {
					t.Fatalf("trial %d step %d: %s held %d (floor %d), lost %d and gained %d",
						trial, step, m.id, len(before[m.id]), floor, l, g)
				}
				lost += l
			}
			slices.SortFunc(held, func(x, y int) int { return y - x })
			minimal := 0
			for i, h := range held {
				quota := floor
				if i < extra {
					quota++
				}
				minimal += max(0, h-quota)
			}
			if lost != minimal {
				t.Fatalf("trial %d step %d: %d tasks taken from staying members, the balance needs %d", trial, step, lost, minimal)
			}
		}
	}
}

// Member metadata from the wire never panics the leader: it is rejected or
// balanced.
func FuzzTaskBalancerMetadata(f *testing.F) {
	tb := &taskBalancer{taskOf: testTaskOf, userData: []byte("h:1")}
	f.Add(tb.JoinGroupMetadata([]string{"a", "b", "c"}, map[string][]int32{"a": {0}, "b": {0}}, 3), []byte{0, 1})
	f.Add([]byte{0, 3, 0, 0, 0, 1}, []byte{})
	f.Fuzz(func(t *testing.T, m1, m2 []byte) {
		var members []kmsg.JoinGroupResponseMember
		for i, meta := range [][]byte{m1, m2} {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID = fmt.Sprint("m", i)
			jm.ProtocolMetadata = slices.Clone(meta)
			members = append(members, jm)
		}
		gmb, _, err := tb.MemberBalancer(members)
		if err != nil {
			return
		}
		into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(testTopics)
		if err != nil {
			return
		}
		seen := map[topicPartition]bool{}
		for _, sa := range into.IntoSyncAssignment() {
			asg, err := tb.ParseSyncAssignment(sa.MemberAssignment)
			if err != nil {
				t.Fatalf("own assignment does not parse: %v", err)
			}
			for topic, ps := range asg {
				for _, p := range ps {
					tp := topicPartition{topic, p}
					if seen[tp] {
						t.Fatalf("%s-%d assigned twice", topic, p)
					}
					seen[tp] = true
				}
			}
		}
	})
}

// Tasks freed by a leaving member go where they spread each sub-topology's
// tasks over the members.
func TestTaskBalancerSpreadsSubTopologies(t *testing.T) {
	topics := map[string]int32{"a": 3, "b": 3, "c": 3}
	members := []*simMember{
		{id: "m1", owned: map[string][]int32{"a": {0, 1}, "b": {0, 1}}}, // tasks 0_0, 0_1
		{id: "m2", owned: map[string][]int32{"c": {0, 1}}},              // tasks 1_0, 1_1
	}
	// m3 (tasks 0_2 and 1_2) left: 0_2 goes to m2, 1_2 to m1, so that
	// neither holds all three tasks of a sub-topology.
	var gen int32 = 4
	settle(t, members, &gen, topics)
	for _, m := range members {
		per := map[int]int{}
		for id := range tasksOf(m) {
			per[id.sub]++
		}
		if per[0] > 2 || per[1] > 2 {
			t.Fatalf("%s holds %v tasks per sub-topology, want them spread", m.id, per)
		}
	}
}
