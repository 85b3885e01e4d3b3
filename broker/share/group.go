package share

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupHeartbeat: v1 (v0 was Kafka 4.0's early access, removed in 4.1)
//
// Behavior:
// * The member ID is the client's (KIP-1082): empty is INVALID_REQUEST.
//   Epoch 0 joins (or rejoins, keeping the ID) and must name its
//   subscribed topics; -1 leaves: the member's acquired records are
//   released and its share sessions closed. Any other epoch must be the
//   member's current one (FENCED_MEMBER_EPOCH), of a known member
//   (UNKNOWN_MEMBER_ID).
// * There is no revocation protocol (KIP-932): the group epoch moves on
//   every membership or subscription change or change of a subscribed
//   topic's partitions, the assignment is recomputed at once, and a member
//   whose assignment changed gets it with the new epoch.
// * Assignment: every partition of every subscribed topic goes to at
//   least one subscriber; with more subscribers than partitions a
//   partition is shared by several members (records are still delivered
//   to one member at a time, by acquisition). Internal topics are never
//   assigned.
// * A share-partition's state is initialised when it is first assigned:
//   its start offset is the log end (share.auto.offset.reset=latest, the
//   default) or the log start (earliest).
// * A member not heard from for the session timeout is removed as if it
//   left. group.share.max.size members per group: GROUP_MAX_SIZE_REACHED.

func init() {
	regAPI(kmsg.ShareGroupHeartbeat, 1, 1, (*Coordinator).handleHeartbeat)
	regAPI(kmsg.ShareGroupDescribe, 1, 1, (*Coordinator).handleDescribe)
}

// group is one share group. Guarded by Coordinator.mu.
type group struct {
	id          string
	epoch       int32 // group epoch
	assignEpoch int32 // epoch of the current assignment
	members     map[string]*member
	// shapes is the partition count of every subscribed topic at the last
	// assignment: a change (topic created, deleted, grown) reassigns.
	shapes map[string]int32
}

type member struct {
	id       string
	epoch    int32
	rack     *string
	clientID string
	host     string
	topics   []string // subscribed, sorted
	assigned map[string][]int32
	deadline time.Time
	sent     bool // the member was sent its current assignment
}

func (g *group) state() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

func (c *Coordinator) handleHeartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(err *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode = err.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, nil
	}
	switch {
	case req.GroupID == "":
		return fail(kerr.InvalidGroupID, "the group ID must not be empty")
	case req.MemberID == "":
		return fail(kerr.InvalidRequest, "the member ID must be set by the client (KIP-1082)")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest, "share group members have no static membership: epoch must be >= -1")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest, "a joining member must name its subscribed topics")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	g := c.groups[req.GroupID]
	var m *member
	if g != nil {
		m = g.members[req.MemberID]
	}
	resp.MemberID = &req.MemberID
	if req.MemberEpoch == -1 {
		if m != nil {
			c.removeMember(g, m)
		}
		resp.MemberEpoch = -1
		return resp, nil
	}
	if req.MemberEpoch > 0 {
		if m == nil {
			return fail(kerr.UnknownMemberID, "")
		}
		if req.MemberEpoch != m.epoch {
			return fail(kerr.FencedMemberEpoch, "")
		}
	}
	if g == nil {
		g = &group{id: req.GroupID, members: map[string]*member{}, shapes: map[string]int32{}}
		c.groups[g.id] = g
	}
	bump := false
	if m == nil {
		if len(g.members) >= c.opts.MaxSize {
			return fail(kerr.GroupMaxSizeReached, "")
		}
		m = &member{id: req.MemberID}
		g.members[m.id] = m
		bump = true
		c.met.joins.Inc()
	}
	if req.MemberEpoch == 0 {
		m.sent = false // a rejoining member has lost what it was sent
	}
	cl := clientOf(ctx)
	m.clientID, m.host = cl.id, cl.host
	if req.RackID != nil {
		m.rack = req.RackID
	}
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		sort.Strings(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics = topics
			bump = true
		}
	}
	set := c.settings(g.id)
	m.deadline = now.Add(set.sessionTimeout)
	if bump || c.shapeChanged(g) {
		g.epoch++ // one epoch per heartbeat that changes the group
	}
	if g.assignEpoch != g.epoch {
		c.assign(g)
	}
	if !m.sent || m.epoch != g.assignEpoch {
		m.epoch = g.assignEpoch
		m.sent = true
		a := &kmsg.ShareGroupHeartbeatResponseAssignment{}
		for _, t := range sortedKeys(m.assigned) {
			id, ok := c.opts.Topics.TopicID(t)
			if !ok {
				continue
			}
			a.TopicPartitions = append(a.TopicPartitions, kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{TopicID: id, Partitions: slices.Clone(m.assigned[t])})
		}
		resp.Assignment = a
	}
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(set.heartbeat.Milliseconds())
	return resp, nil
}

// removeMember removes m from g: its records are released and its share
// sessions closed. Lock must be held.
func (c *Coordinator) removeMember(g *group, m *member) {
	delete(g.members, m.id)
	g.epoch++
	c.closeSession(sessKey{g.id, m.id})
	if len(g.members) > 0 {
		c.assign(g)
	} else {
		g.assignEpoch = g.epoch
	}
}

// subscribed is the set of topics any member subscribes to that exist and
// are not internal, with their partition counts.
func (c *Coordinator) subscribed(g *group) map[string]int32 {
	out := map[string]int32{}
	for _, m := range g.members {
		for _, t := range m.topics {
			if _, ok := out[t]; ok || c.opts.Topics.Internal(t) {
				continue
			}
			if n, ok := c.opts.Topics.Partitions(t); ok && n > 0 {
				out[t] = n
			}
		}
	}
	return out
}

func (c *Coordinator) shapeChanged(g *group) bool {
	now := c.subscribed(g)
	if len(now) != len(g.shapes) {
		return true
	}
	for t, n := range now {
		if g.shapes[t] != n {
			return true
		}
	}
	return false
}

// assign recomputes g's assignment at its epoch: for each topic, its
// partitions are dealt round-robin over its subscribers (sorted by ID),
// the starting member rotating from topic to topic; when a topic has
// fewer partitions than subscribers, each subscriber gets one, partitions
// repeating. Newly assigned share-partitions are initialised. Lock must be
// held.
func (c *Coordinator) assign(g *group) {
	shapes := c.subscribed(g)
	g.shapes = shapes
	ids := sortedKeys(g.members)
	for _, id := range ids {
		g.members[id].assigned = map[string][]int32{}
	}
	rot := 0
	for _, t := range sortedKeys(shapes) {
		var subs []*member
		for _, id := range ids {
			if slices.Contains(g.members[id].topics, t) {
				subs = append(subs, g.members[id])
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := int(shapes[t])
		if n >= len(subs) {
			for p := 0; p < n; p++ {
				m := subs[(p+rot)%len(subs)]
				m.assigned[t] = append(m.assigned[t], int32(p))
			}
		} else {
			for i, m := range subs {
				m.assigned[t] = append(m.assigned[t], int32((i+rot)%n))
			}
		}
		rot++
		id, ok := c.opts.Topics.TopicID(t)
		if !ok {
			continue
		}
		for p := int32(0); p < int32(n); p++ {
			c.initPartition(g.id, t, id, p)
		}
	}
	for _, m := range g.members {
		for t := range m.assigned {
			slices.Sort(m.assigned[t])
		}
	}
	g.assignEpoch = g.epoch
	c.met.assignments.Inc()
}

// initPartition creates the share-partition of (group, topic, p) if it has
// none, starting at the log end or start per share.auto.offset.reset, and
// queues its state. Lock must be held.
func (c *Coordinator) initPartition(groupID, topic string, id [16]byte, p int32) *sharePartition {
	k := partKey{groupID, id, p}
	if sp := c.parts[k]; sp != nil {
		return sp
	}
	l, ok := c.opts.Topics.Log(topic, p)
	if !ok {
		return nil
	}
	sp := &sharePartition{key: k, topic: topic, start: l.HighWatermark()}
	if c.settings(groupID).earliest {
		sp.start = l.LogStartOffset()
	}
	c.parts[k] = sp
	c.persist(snapshots(map[*sharePartition]bool{sp: true}))
	return sp
}

func (c *Coordinator) handleDescribe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID = id
		rg.AuthorizedOperations = -2147483648 // not requested
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = 1<<3 | 1<<6 | 1<<8 // READ, DELETE, DESCRIBE (KIP-430; weir has no group ACLs here)
		}
		g := c.groups[id]
		switch {
		case id == "":
			rg.ErrorCode = kerr.InvalidGroupID.Code
		case g == nil && !c.knownGroup(id):
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "share group " + id + " does not exist"
			rg.ErrorMessage = &msg
		default:
			rg.GroupState = "Empty"
			rg.Assignor = "simple"
			if g != nil {
				rg.GroupState = g.state()
				rg.GroupEpoch, rg.AssignmentEpoch = g.epoch, g.assignEpoch
				for _, mid := range sortedKeys(g.members) {
					m := g.members[mid]
					rm := kmsg.NewShareGroupDescribeResponseGroupMember()
					rm.MemberID, rm.MemberEpoch, rm.RackID = m.id, m.epoch, m.rack
					rm.ClientID, rm.ClientHost = m.clientID, m.host
					rm.SubscribedTopicNames = slices.Clone(m.topics)
					for _, t := range sortedKeys(m.assigned) {
						tid, _ := c.opts.Topics.TopicID(t)
						rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions,
							kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{TopicID: tid, Topic: t, Partitions: slices.Clone(m.assigned[t])})
					}
					rg.Members = append(rg.Members, rm)
				}
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// knownGroup reports a share group with durable state but no live members
// (after a restart, or once every member left). Lock must be held.
func (c *Coordinator) knownGroup(id string) bool {
	if _, ok := c.groups[id]; ok {
		return true
	}
	for k := range c.parts {
		if k.group == id {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
