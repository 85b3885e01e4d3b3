package stream

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// taskBalancerProtocol is the group protocol name of the task balancer.
// Every instance of an App runs the same balancer; the name is part of the
// contract between instances of different versions.
const taskBalancerProtocol = "weir-stream-tasks"

// taskBalancer is the App's kgo.GroupBalancer: it assigns topic-partitions
// by task, so every partition of one task (the same partition of every
// source topic of a sub-topology) goes to one member, which the
// co-partitioned processing of a task needs (Kafka Streams'
// StreamsPartitionAssignor does the same).
//
// Guarantees of Balance, for members that all subscribe to the App's topics:
//   - grouping: all partitions of a task are assigned to the same member;
//   - balance: members' task counts differ by at most one (once the
//     cooperative second round has run);
//   - spread: a task handed out goes, among the least loaded members, to
//     the one with the fewest tasks of its sub-topology;
//   - stickiness: a task stays with its previous owner (the member claiming
//     its partitions with the highest generation) as long as that keeps the
//     balance;
//   - cooperative (KIP-429): a task that moves is first assigned to nobody;
//     its previous owner revokes it (committing) and rejoins, and the next
//     rebalance assigns it to the new owner. A task whose partition any
//     other member still claims is never handed out, so no partition is
//     consumed by two members at once.
//
// Member metadata is a kmsg.ConsumerMemberMetadata (v3) whose UserData is a
// version byte (0) followed by the App's opaque per-member userData. Each
// member's assignment is a kmsg.ConsumerMemberAssignment whose UserData is
// the owners table (see encodeOwners): every member's userData with the
// partitions assigned to it in this generation, so each instance learns
// which member (endpoint) owns which task.
type taskBalancer struct {
	// taskOf maps a source partition to its task; topics it does not know
	// are balanced partition by partition.
	taskOf func(topic string, partition int32) (taskID, bool)
	// userData is this member's opaque data (nil: none).
	userData []byte
	// onOwners, if set, receives the owners table of every assignment this
	// member receives.
	onOwners func([]taskOwner)
}

// taskOwner is one member of an App's group as its assignment describes it:
// the opaque userData the member advertised and the partitions it owns.
type taskOwner struct {
	userData   []byte
	partitions map[string][]int32
}

func (a *App) newTaskBalancer() *taskBalancer {
	return &taskBalancer{taskOf: a.taskOf, userData: a.memberUserData, onOwners: func(o []taskOwner) {
		a.ownersMu.Lock()
		a.owners = o
		a.ownersMu.Unlock()
		if f := a.cfg.seams.onTaskOwners; f != nil {
			f(o)
		}
	}}
}

// ownerOf returns the userData of the member that owned partition p of
// topic at the latest assignment this instance received (found false if none
// did, e.g. during a cooperative handover or before the first assignment).
// Goroutine-safe.
func (a *App) ownerOf(topic string, p int32) (userData []byte, found bool) {
	a.ownersMu.Lock()
	defer a.ownersMu.Unlock()
	for _, o := range a.owners {
		if slices.Contains(o.partitions[topic], p) {
			return o.userData, true
		}
	}
	return nil, false
}

func (*taskBalancer) ProtocolName() string { return taskBalancerProtocol }
func (*taskBalancer) IsCooperative() bool  { return true }

// memberUserDataVersion prefixes the App's userData in member metadata.
const memberUserDataVersion = 0

func (tb *taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = slices.Sorted(slices.Values(interests))
	meta.Generation = generation
	for _, topic := range sortedKeys(current) {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic = topic
		op.Partitions = slices.Sorted(slices.Values(current[topic]))
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	meta.UserData = append([]byte{memberUserDataVersion}, tb.userData...)
	return meta.AppendTo(nil)
}

// decodeMemberUserData returns the App's userData from a member's metadata
// UserData.
func decodeMemberUserData(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil // a member without any (not a weir App, or an old one)
	}
	if b[0] != memberUserDataVersion {
		return nil, fmt.Errorf("%w: member user data version %d", errBadAssignment, b[0])
	}
	return b[1:], nil
}

// errBadAssignment is returned for group metadata or an assignment that does
// not decode.
var errBadAssignment = errors.New("stream: malformed group assignment")

func (tb *taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var ka kmsg.ConsumerMemberAssignment
	if err := ka.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadAssignment, err)
	}
	m := make(map[string][]int32, len(ka.Topics))
	for _, t := range ka.Topics {
		m[t.Topic] = t.Partitions
	}
	if tb.onOwners != nil && len(ka.UserData) > 0 {
		owners, err := decodeOwners(ka.UserData)
		if err != nil {
			return nil, err
		}
		tb.onOwners(owners)
	}
	return m, nil
}

func (tb *taskBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(tb, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// unit is what the balancer assigns: a task, or one partition of a topic no
// task reads (topic set).
type unit struct {
	task  taskID
	topic string
}

func compareUnits(x, y unit) int {
	return cmp.Or(cmp.Compare(x.topic, y.topic), compareTaskIDs(x.task, y.task))
}

// Balance implements kgo.ConsumerBalancerBalance.
func (tb *taskBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	type member struct {
		id       string
		userData []byte
		units    []unit
	}
	var members []*member
	var claims []map[topicPartition]int32 // per member: owned partition -> generation
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		ud, err := decodeMemberUserData(meta.UserData)
		if err != nil {
			cb.SetError(fmt.Errorf("member %s: %w", m.MemberID, err))
		}
		c := map[topicPartition]int32{}
		for _, op := range meta.OwnedPartitions {
			for _, p := range op.Partitions {
				c[topicPartition{op.Topic, p}] = meta.Generation
			}
		}
		members = append(members, &member{id: m.MemberID, userData: ud})
		claims = append(claims, c)
	})
	// Deterministic order: by member id (claims follow their member).
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(members[x].id, members[y].id) })
	sortedMembers := make([]*member, len(members))
	sortedClaims := make([]map[topicPartition]int32, len(members))
	for i, o := range order {
		sortedMembers[i], sortedClaims[i] = members[o], claims[o]
	}
	members, claims = sortedMembers, sortedClaims

	// The units and their partitions.
	parts := map[unit][]topicPartition{}
	for _, topic := range sortedKeys(topics) {
		for p := int32(0); p < topics[topic]; p++ {
			u := unit{topic: topic, task: taskID{partition: p}}
			if id, ok := tb.taskOf(topic, p); ok {
				u = unit{task: id}
			}
			parts[u] = append(parts[u], topicPartition{topic, p})
		}
	}
	units := slices.SortedFunc(func(yield func(unit) bool) {
		for u := range parts {
			if !yield(u) {
				return
			}
		}
	}, compareUnits)
	if len(members) == 0 {
		return &taskPlan{}
	}

	// prevOwner: the member claiming any of the unit's partitions with the
	// highest generation (ties: the first in member order); -1 if none.
	prevOwner := func(u unit) int {
		best, bestGen := -1, int32(0)
		for i, c := range claims {
			for _, tp := range parts[u] {
				if g, ok := c[tp]; ok && (best < 0 || g > bestGen) {
					best, bestGen = i, g
				}
			}
		}
		return best
	}
	floor, extra := len(units)/len(members), len(units)%len(members)
	owner := make(map[unit]int, len(units))
	var free []unit
	// Sticky pass: keep each unit with its previous owner up to the
	// balanced share (floor, or floor+1 for at most `extra` members).
	for _, u := range units {
		o := prevOwner(u)
		switch {
		case o >= 0 && len(members[o].units) < floor:
		case o >= 0 && len(members[o].units) == floor && extra > 0:
			extra--
		default:
			free = append(free, u)
			continue
		}
		members[o].units = append(members[o].units, u)
		owner[u] = o
	}
	// The rest go to the least loaded member; ties go to the member with
	// the fewest tasks of the same sub-topology (so each sub-topology's
	// tasks spread over the members), then to member order.
	sameSub := func(m *member, u unit) int {
		n := 0
		for _, o := range m.units {
			if o.topic == u.topic && o.task.sub == u.task.sub {
				n++
			}
		}
		return n
	}
	for _, u := range free {
		best := 0
		for i, m := range members {
			if d := len(m.units) - len(members[best].units); d < 0 || (d == 0 && sameSub(m, u) < sameSub(members[best], u)) {
				best = i
			}
		}
		members[best].units = append(members[best].units, u)
		owner[u] = best
	}
	// Cooperative: a unit any other member still claims is withheld this
	// generation; that member's plan lacks it, so it revokes and rejoins.
	plan := &taskPlan{}
	for i, m := range members {
		assigned := map[string][]int32{}
		for _, u := range m.units {
			if claimedByOther(claims, i, parts[u]) {
				continue
			}
			for _, tp := range parts[u] {
				assigned[tp.topic] = append(assigned[tp.topic], tp.partition)
			}
		}
		plan.members = append(plan.members, plannedMember{id: m.id, userData: m.userData, partitions: assigned})
	}
	return plan
}

func claimedByOther(claims []map[topicPartition]int32, self int, tps []topicPartition) bool {
	for i, c := range claims {
		if i == self {
			continue
		}
		for _, tp := range tps {
			if _, ok := c[tp]; ok {
				return true
			}
		}
	}
	return false
}

// taskPlan is a balance result; every member's assignment carries the
// owners table of the whole plan.
type taskPlan struct {
	members []plannedMember // sorted by id
}

type plannedMember struct {
	id         string
	userData   []byte
	partitions map[string][]int32
}

func (p *taskPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	owners := make([]taskOwner, len(p.members))
	for i, m := range p.members {
		owners[i] = taskOwner{userData: m.userData, partitions: m.partitions}
	}
	table := encodeOwners(owners)
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(p.members))
	for _, m := range p.members {
		ka := kmsg.NewConsumerMemberAssignment()
		ka.Topics = assignmentTopics(m.partitions)
		ka.UserData = table
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID = m.id
		sa.MemberAssignment = ka.AppendTo(nil)
		out = append(out, sa)
	}
	return out
}

func assignmentTopics(ps map[string][]int32) []kmsg.ConsumerMemberAssignmentTopic {
	var out []kmsg.ConsumerMemberAssignmentTopic
	for _, topic := range sortedKeys(ps) {
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic = topic
		t.Partitions = slices.Sorted(slices.Values(ps[topic]))
		out = append(out, t)
	}
	return out
}

// ownersVersion is the first byte of an encoded owners table.
const ownersVersion = 0

// encodeOwners encodes the owners table carried in every assignment:
//
//	version byte (0)
//	uvarint count of members, then per member:
//	  uvarint length, kmsg.ConsumerMemberAssignment (v0) bytes: Topics = the
//	  member's partitions, UserData = the member's userData
func encodeOwners(owners []taskOwner) []byte {
	b := []byte{ownersVersion}
	b = binary.AppendUvarint(b, uint64(len(owners)))
	for _, o := range owners {
		ka := kmsg.NewConsumerMemberAssignment()
		ka.Topics = assignmentTopics(o.partitions)
		ka.UserData = o.userData
		enc := ka.AppendTo(nil)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	return b
}

// decodeOwners decodes encodeOwners' output; malformed input gives
// errBadAssignment, never a panic.
func decodeOwners(b []byte) ([]taskOwner, error) {
	if len(b) == 0 || b[0] != ownersVersion {
		return nil, fmt.Errorf("%w: owners table: bad version", errBadAssignment)
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: owners table: bad member count", errBadAssignment)
	}
	b = b[k:]
	owners := make([]taskOwner, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: owners table: member %d: bad length", errBadAssignment, i)
		}
		var ka kmsg.ConsumerMemberAssignment
		if err := ka.ReadFrom(b[k : k+int(l)]); err != nil {
			return nil, fmt.Errorf("%w: owners table: member %d: %v", errBadAssignment, i, err)
		}
		b = b[k+int(l):]
		o := taskOwner{userData: ka.UserData, partitions: map[string][]int32{}}
		for _, t := range ka.Topics {
			o.partitions[t.Topic] = append(o.partitions[t.Topic], t.Partitions...)
		}
		owners = append(owners, o)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: owners table: %d trailing bytes", errBadAssignment, len(b))
	}
	return owners, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
