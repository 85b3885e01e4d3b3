package group

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe).
//
// Behavior, following Kafka's GroupMetadataManager / CurrentAssignmentBuilder:
//   - The group epoch increases when membership or subscriptions change,
//     or when a subscribed topic's partition count changes; the target
//     assignment is then recomputed by the uniform sticky assignor
//     (assign.go) and carries that epoch.
//   - Each member converges to its target on its own heartbeats:
//     partitions it must give up are revoked first (the member stays at its
//     epoch, state UNREVOKED, and is sent only the partitions it keeps);
//     once a heartbeat reports they are no longer owned, the member moves to
//     the target epoch and receives the new partitions that are free. A
//     partition still owned by another member is withheld (state
//     UNRELEASED) until that member has released it.
//   - Members that do not heartbeat within the session timeout, or do not
//     revoke within their rebalance timeout, are removed (fenced).
//   - Epoch 0 joins (v1: the client generates the member ID), -1 leaves,
//     -2 is a static member leaving temporarily: its assignment is kept for
//     the session timeout and a rejoin with the same instance ID takes it
//     over without a rebalance. A second live member with the same
//     instance ID gets UNRELEASED_INSTANCE_ID.
//   - A heartbeat with a stale epoch is FENCED_MEMBER_EPOCH, except the
//     previous epoch when the owned partitions are a subset of the current
//     assignment (the previous response was lost).
//   - While a member converges (revoking, or waiting for released
//     partitions) its heartbeat interval is ConsumerReconcileInterval
//     (default 200ms) instead of group.consumer.heartbeat.interval.ms, so a
//     moved partition is paused for a few round trips, not for intervals.
//   - A regular-expression subscription (v1, RE2 syntax as Kafka's RE2/J)
//     matches whole topic names, internal topics included, as Kafka's
//     coordinator resolves it (clients skip internal topics themselves when
//     they resolve a regex); topics created or deleted later change the
//     subscription (checked on every heartbeat). Only the topics the
//     member's principal may DESCRIBE are subscribed (Kafka filters the
//     resolution with the authorizer); an ACL change is seen on the next
//     heartbeat.
//     It needs Topics to implement TopicLister; otherwise, and for an
//     invalid expression, INVALID_REGULAR_EXPRESSION.

// Versions: ConsumerGroupHeartbeat v0-1, ConsumerGroupDescribe v0-1.
//   - ConsumerGroupHeartbeat v1 SubscribedTopicRegex, and the client
//     generates the member ID (an empty one is INVALID_REQUEST).
//   - ConsumerGroupDescribe v1 MemberType (always 1, consumer: a KIP-848
//     group has no classic members here).

func init() {
	regAPI(kmsg.ConsumerGroupHeartbeat, 0, 1, (*Coordinator).consumerHeartbeat)
	regAPI(kmsg.ConsumerGroupDescribe, 0, 1, (*Coordinator).consumerDescribe)
}

type memberState int8

const (
	mStable memberState = iota
	mUnrevoked
	mUnreleased
)

type cmember struct {
	id, instanceID, rackID string
	clientID, clientHost   string
	principal              string // of its last heartbeat; resolves its regex
	epoch, prevEpoch       int32
	state                  memberState
	subscribed             []string // topic names, sorted
	regex                  string   // SubscribedTopicRegex ("" none)
	re                     *regexp.Regexp
	rebalanceTimeout       time.Duration
	assigned               map[tp]bool
	revoking               map[tp]bool
	deadline               time.Time // session
	revokeDeadline         time.Time // zero unless revoking
	leftStatic             bool      // sent epoch -2; waiting for its instance to rejoin
}

type consumerGroup struct {
	g               *group
	epoch           int32
	assignmentEpoch int32
	members         map[string]*cmember
	static          map[string]string // instance ID -> member ID
	target          map[string]map[tp]bool
	owners          map[tp]string // partition -> member currently owning it (assigned or revoking)
	topicSig        string        // subscribed topics' partition counts at the last target

	persisted      map[string]string // member ID -> last record written (consumer_persist.go)
	persistedEpoch int32
}

func newConsumerGroup(g *group) *consumerGroup {
	return &consumerGroup{
		g:       g,
		members: map[string]*cmember{},
		static:  map[string]string{},
		target:  map[string]map[tp]bool{},
		owners:  map[tp]string{},

		persisted: map[string]string{},
	}
}

// compileRegex compiles a subscription's regular expression to match whole
// topic names, as Kafka's Pattern.matcher(topic).matches(): "orders" does
// not match "orders-v2" (clients that mean "anywhere" wrap it in ".*").
func compileRegex(s string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(s); err != nil {
		return nil, err // the error quotes the expression as sent
	}
	return regexp.Compile(`^(?:` + s + `)$`)
}

func (cg *consumerGroup) stateName() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.assignmentEpoch < cg.epoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != mStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (c *Coordinator) consumerHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, error) {
	var r *kmsg.ConsumerGroupHeartbeatResponse
	cl := clientOf(ctx)
	err := c.do(ctx, func() { r = c.consumerHeartbeatLocked(req, cl) })
	return r, err
}

func heartbeatError(err *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	r.ErrorCode = err.Code
	if msg != "" {
		r.ErrorMessage = &msg
	}
	return r
}

func (c *Coordinator) consumerHeartbeatLocked(req *kmsg.ConsumerGroupHeartbeatRequest, cl requestClient) *kmsg.ConsumerGroupHeartbeatResponse {
	// Request validation.
	switch {
	case req.Group == "":
		return heartbeatError(kerr.InvalidRequest, "GroupId can't be empty.")
	case req.Version >= 1 && req.MemberID == "":
		return heartbeatError(kerr.InvalidRequest, "MemberId can't be empty.")
	case req.MemberEpoch < -2:
		return heartbeatError(kerr.InvalidRequest, fmt.Sprintf("MemberEpoch %d is invalid.", req.MemberEpoch))
	case req.MemberEpoch == 0 && req.RebalanceTimeoutMillis == -1:
		return heartbeatError(kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
	case req.MemberEpoch == 0 && len(req.Topics) != 0:
		return heartbeatError(kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining.")
	case req.MemberEpoch == 0 && req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
		return heartbeatError(kerr.InvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
	case req.MemberEpoch != 0 && req.MemberID == "":
		return heartbeatError(kerr.InvalidRequest, "MemberId can't be empty.")
	}
	now := c.opts.Now()
	g := c.groups[req.Group]
	if req.MemberEpoch < 0 {
		return c.consumerLeave(g, req, now)
	}
	if g == nil {
		if req.MemberEpoch != 0 {
			return heartbeatError(kerr.UnknownMemberID, "")
		}
		g = c.newGroup(req.Group, kindConsumer)
	}
	if g.kind != kindConsumer {
		if !g.isEmpty() {
			return heartbeatError(kerr.GroupIDNotFound, "Group "+g.id+" is not a consumer group.")
		}
		g.convertTo(kindConsumer)
	}
	cg := g.cg
	var m *cmember
	joined := false
	bump := "" // the reason to bump the group epoch (once per heartbeat)
	if req.MemberEpoch == 0 {
		id := req.MemberID
		if id == "" {
			id = newUUID()
		}
		m = cg.members[id]
		if m == nil {
			iid := ""
			if req.InstanceID != nil {
				iid = *req.InstanceID
			}
			if iid != "" {
				if oldID, ok := cg.static[iid]; ok {
					old := cg.members[oldID]
					if old != nil && !old.leftStatic {
						return heartbeatError(kerr.UnreleasedInstanceID, "Static member "+iid+" is still in the group.")
					}
					if old != nil {
						m = cg.replaceStatic(old, id)
					}
				}
			}
			if m == nil {
				m = &cmember{id: id, instanceID: iid, assigned: map[tp]bool{}, revoking: map[tp]bool{}}
				cg.members[id] = m
				if iid != "" {
					cg.static[iid] = id
				}
				bump = "member joined"
			}
		}
		joined = true
		m.clientID, m.clientHost = cl.id, cl.host
	} else {
		m = cg.members[req.MemberID]
		if m == nil {
			return heartbeatError(kerr.UnknownMemberID, "")
		}
		if req.MemberEpoch != m.epoch {
			owned := c.ownedFromRequest(req.Topics)
			if !(req.MemberEpoch == m.prevEpoch && req.Topics != nil && subset(owned, m.assigned)) {
				return heartbeatError(kerr.FencedMemberEpoch, fmt.Sprintf("member epoch %d, expected %d", req.MemberEpoch, m.epoch))
			}
		}
	}
	m.leftStatic = false
	m.principal = cl.principal
	m.deadline = now.Add(c.opts.ConsumerSessionTimeout)
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		if *req.SubscribedTopicRegex == "" {
			m.regex, m.re = "", nil
		} else {
			if _, ok := c.opts.Topics.(TopicLister); !ok {
				return heartbeatError(kerr.InvalidRegularExpression, "regular expression subscriptions need a topic listing this broker does not provide")
			}
			re, err := compileRegex(*req.SubscribedTopicRegex)
			if err != nil {
				return heartbeatError(kerr.InvalidRegularExpression, err.Error())
			}
			m.regex, m.re = *req.SubscribedTopicRegex, re
		}
		bump = cmp.Or(bump, "subscription changed")
	}
	if req.SubscribedTopicNames != nil {
		subs := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(subs)
		subs = slices.Compact(subs)
		if !slices.Equal(subs, m.subscribed) {
			m.subscribed = subs
			bump = cmp.Or(bump, "subscription changed")
		}
	}
	subs := cg.effectiveSubscriptions()
	if sig := cg.topicSignature(subs); sig != cg.topicSig {
		bump = cmp.Or(bump, "topic metadata changed")
	}
	if bump != "" {
		cg.bump(bump)
	}
	if cg.assignmentEpoch < cg.epoch {
		cg.computeTarget(subs)
	}
	var owned map[tp]bool
	if req.Topics != nil {
		owned = c.ownedFromRequest(req.Topics)
	}
	before := maps.Clone(m.assigned)
	cg.reconcile(m, owned, now)

	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	id := m.id
	r.MemberID = &id
	r.MemberEpoch = m.epoch
	interval := c.opts.ConsumerHeartbeatInterval
	if m.state != mStable || m.epoch != cg.assignmentEpoch {
		// Converging: ask for the next heartbeat sooner, so a revocation
		// is acknowledged and released partitions are handed over within
		// a fraction of a second instead of a full interval (clients use
		// the interval of each response).
		interval = min(interval, c.opts.ConsumerReconcileInterval)
	}
	r.HeartbeatIntervalMillis = int32(interval / time.Millisecond)
	if joined || !maps.Equal(before, m.assigned) || (owned != nil && !maps.Equal(owned, m.assigned)) {
		r.Assignment = c.assignmentOf(m.assigned)
	}
	cg.persist(m)
	return r
}

// consumerLeave handles epoch -1 (leave) and -2 (static temporary leave).
func (c *Coordinator) consumerLeave(g *group, req *kmsg.ConsumerGroupHeartbeatRequest, now time.Time) *kmsg.ConsumerGroupHeartbeatResponse {
	if g == nil || g.kind != kindConsumer {
		return heartbeatError(kerr.UnknownMemberID, "")
	}
	cg := g.cg
	m := cg.members[req.MemberID]
	if m == nil && req.InstanceID != nil {
		if id, ok := cg.static[*req.InstanceID]; ok {
			m = cg.members[id]
		}
	}
	if m == nil {
		return heartbeatError(kerr.UnknownMemberID, "")
	}
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	id := m.id
	r.MemberID = &id
	r.MemberEpoch = req.MemberEpoch
	if req.MemberEpoch == -2 && m.instanceID != "" {
		// Keep the assignment for the session timeout.
		m.leftStatic = true
		m.deadline = now.Add(c.opts.ConsumerSessionTimeout)
		return r
	}
	cg.remove(m, "member left")
	cg.persist(nil)
	return r
}

// replaceStatic hands a temporarily-left static member's state to a new
// member ID without changing the group epoch.
func (cg *consumerGroup) replaceStatic(old *cmember, newID string) *cmember {
	delete(cg.members, old.id)
	oldID := old.id
	old.id = newID
	old.leftStatic = false
	cg.members[newID] = old
	cg.static[old.instanceID] = newID
	if t, ok := cg.target[oldID]; ok {
		delete(cg.target, oldID)
		cg.target[newID] = t
	}
	for p, o := range cg.owners {
		if o == oldID {
			cg.owners[p] = newID
		}
	}
	return old
}

// remove deletes a member, releases its partitions and bumps the epoch.
func (cg *consumerGroup) remove(m *cmember, reason string) {
	delete(cg.members, m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
	delete(cg.target, m.id)
	for p, o := range cg.owners {
		if o == m.id {
			delete(cg.owners, p)
		}
	}
	cg.bump(reason)
	if len(cg.members) == 0 {
		cg.g.stateSince = cg.g.c.opts.Now()
	}
}

func (cg *consumerGroup) bump(reason string) {
	if cg.epoch == cg.assignmentEpoch {
		cg.g.c.met.rebalanceStarted(cg.g.id)
		cg.g.rebalanceStart = cg.g.c.opts.Now()
	}
	cg.epoch++
	cg.g.c.logger.Debug("consumer group epoch bumped", "group", cg.g.id, "epoch", cg.epoch, "reason", reason)
}

// effectiveSubscriptions resolves every member's subscription: its topic
// names plus the topics its regular expression matches (internal topics
// included, as in Kafka) that its principal may describe.
func (cg *consumerGroup) effectiveSubscriptions() map[string][]string {
	var names []string
	if tl, ok := cg.g.c.opts.Topics.(TopicLister); ok {
		for _, m := range cg.members {
			if m.re != nil {
				names = tl.TopicNames()
				break
			}
		}
	}
	out := make(map[string][]string, len(cg.members))
	for id, m := range cg.members {
		if m.re == nil {
			out[id] = m.subscribed
			continue
		}
		subs := slices.Clone(m.subscribed)
		for _, t := range names {
			if m.re.MatchString(t) && cg.describable(m, t) {
				subs = append(subs, t)
			}
		}
		slices.Sort(subs)
		out[id] = slices.Compact(subs)
	}
	return out
}

// describable reports whether m's principal may describe topic
// (Options.TopicDescribable). A member whose principal is not known (one
// restored from a record written before principals were kept) is not
// filtered until its first heartbeat sets it, rather than losing its
// topics to a principal of "" meanwhile.
func (cg *consumerGroup) describable(m *cmember, topic string) bool {
	f := cg.g.c.opts.TopicDescribable
	return f == nil || m.principal == "" || f(m.principal, strings.TrimPrefix(m.clientHost, "/"), topic)
}

// topicSignature summarises the subscribed topics and their partition
// counts; a change (a topic created, deleted or grown) bumps the epoch.
func (cg *consumerGroup) topicSignature(subs map[string][]string) string {
	topics := map[string]bool{}
	for _, ts := range subs {
		for _, t := range ts {
			topics[t] = true
		}
	}
	var sb strings.Builder
	for _, t := range sortedKeys(topics) {
		n, _ := cg.g.c.opts.Topics.Partitions(t)
		fmt.Fprintf(&sb, "%s:%d,", t, n)
	}
	return sb.String()
}

func (cg *consumerGroup) computeTarget(subs map[string][]string) {
	if subs == nil {
		subs = cg.effectiveSubscriptions()
	}
	in := make([]assignInput, 0, len(cg.members))
	for _, m := range cg.members {
		in = append(in, assignInput{id: m.id, subscribed: subs[m.id], previous: cg.target[m.id]})
	}
	cg.target = assignUniform(in, cg.g.c.opts.Topics.Partitions)
	cg.assignmentEpoch = cg.epoch
	cg.topicSig = cg.topicSignature(subs)
}

// reconcile moves m one step towards its target assignment (see the
// package behavior above). owned is what the member reported (nil:
// unchanged/unknown).
func (cg *consumerGroup) reconcile(m *cmember, owned map[tp]bool, now time.Time) {
	if m.state == mUnrevoked {
		if owned == nil || intersects(owned, m.revoking) {
			return // still revoking
		}
		for p := range m.revoking {
			if cg.owners[p] == m.id {
				delete(cg.owners, p)
			}
		}
		m.revoking = map[tp]bool{}
		m.revokeDeadline = time.Time{}
		m.state = mStable
	}
	target := cg.target[m.id]
	if m.epoch == cg.assignmentEpoch && m.state == mStable && maps.Equal(m.assigned, target) {
		return
	}
	keep := map[tp]bool{}
	revoke := map[tp]bool{}
	for p := range m.assigned {
		if target[p] {
			keep[p] = true
		} else {
			revoke[p] = true
		}
	}
	if len(revoke) > 0 && (owned == nil || intersects(owned, revoke)) {
		m.assigned = keep
		m.revoking = revoke
		m.state = mUnrevoked
		m.revokeDeadline = now.Add(max(m.rebalanceTimeout, time.Second))
		return
	}
	for p := range revoke {
		if cg.owners[p] == m.id {
			delete(cg.owners, p)
		}
	}
	unreleased := false
	for p := range target {
		if keep[p] {
			continue
		}
		if o, ok := cg.owners[p]; ok && o != m.id {
			unreleased = true
			continue
		}
		keep[p] = true
		cg.owners[p] = m.id
	}
	m.assigned = keep
	if m.epoch != cg.assignmentEpoch {
		m.prevEpoch = m.epoch
		m.epoch = cg.assignmentEpoch
	}
	if unreleased {
		m.state = mUnreleased
	} else {
		m.state = mStable
		if cg.stateName() == "Stable" {
			cg.g.c.met.rebalanceEnded(cg.g.id, now.Sub(cg.g.rebalanceStart))
		}
	}
}

func (cg *consumerGroup) fireTimers(now time.Time) bool {
	fired := false
	for _, m := range cg.members {
		switch {
		case !now.Before(m.deadline):
			cg.g.c.logger.Info("consumer member session expired", "group", cg.g.id, "member", m.id)
			cg.remove(m, "session timeout")
			fired = true
		case m.state == mUnrevoked && !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			cg.g.c.logger.Info("consumer member did not revoke in time", "group", cg.g.id, "member", m.id)
			cg.remove(m, "rebalance timeout")
			fired = true
		}
	}
	if fired && cg.assignmentEpoch < cg.epoch {
		// Recompute now so the remaining members converge on their next
		// heartbeat.
		cg.computeTarget(nil)
	}
	if fired {
		cg.persist(nil)
	}
	return fired
}

func (cg *consumerGroup) nextDeadline() time.Time {
	var next time.Time
	for _, m := range cg.members {
		next = earliest(next, m.deadline)
		if m.state == mUnrevoked {
			next = earliest(next, m.revokeDeadline)
		}
	}
	return next
}

func (c *Coordinator) ownedFromRequest(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) map[tp]bool {
	out := map[tp]bool{}
	for _, t := range ts {
		name, ok := c.opts.Topics.TopicName(t.TopicID)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			out[tp{name, p}] = true
		}
	}
	return out
}

func (c *Coordinator) assignmentOf(parts map[tp]bool) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	byTopic := map[string][]int32{}
	for p := range parts {
		byTopic[p.topic] = append(byTopic[p.topic], p.partition)
	}
	for _, t := range sortedKeys(byTopic) {
		id, ok := c.opts.Topics.TopicID(t)
		if !ok {
			continue
		}
		ps := byTopic[t]
		slices.Sort(ps)
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID, at.Partitions = id, ps
		a.Topics = append(a.Topics, at)
	}
	return a
}

func (c *Coordinator) describeAssignment(parts map[tp]bool) kmsg.Assignment {
	var a kmsg.Assignment
	byTopic := map[string][]int32{}
	for p := range parts {
		byTopic[p.topic] = append(byTopic[p.topic], p.partition)
	}
	for _, t := range sortedKeys(byTopic) {
		ps := byTopic[t]
		slices.Sort(ps)
		at := kmsg.NewAssignmentTopicPartition()
		at.Topic, at.Partitions = t, ps
		at.TopicID, _ = c.opts.Topics.TopicID(t)
		a.TopicPartitions = append(a.TopicPartitions, at)
	}
	return a
}

func (c *Coordinator) consumerDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, error) {
	r := kmsg.NewPtrConsumerGroupDescribeResponse()
	err := c.do(ctx, func() {
		for _, id := range req.Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group = id
			g := c.groups[id]
			switch {
			case id == "":
				rg.ErrorCode = kerr.InvalidGroupID.Code
			case g == nil || (g.kind == kindClassic && g.state == stateDead):
				rg.ErrorCode = kerr.GroupIDNotFound.Code
				m := "Group " + id + " not found."
				rg.ErrorMessage = &m
			case g.kind != kindConsumer:
				rg.ErrorCode = kerr.GroupIDNotFound.Code
				m := "Group " + id + " is not a consumer group."
				rg.ErrorMessage = &m
			default:
				cg := g.cg
				rg.State = cg.stateName()
				rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = cg.epoch, cg.assignmentEpoch, "uniform"
				ids := sortedKeys(cg.members)
				for _, mid := range ids {
					m := cg.members[mid]
					rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
					rm.MemberID = m.id
					if m.instanceID != "" {
						iid := m.instanceID
						rm.InstanceID = &iid
					}
					if m.rackID != "" {
						rack := m.rackID
						rm.RackID = &rack
					}
					rm.MemberEpoch = m.epoch
					rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
					rm.SubscribedTopics = slices.Clone(m.subscribed)
					if m.regex != "" {
						re := m.regex
						rm.SubscribedTopicRegex = &re
					}
					rm.Assignment = c.describeAssignment(m.assigned)
					rm.TargetAssignment = c.describeAssignment(cg.target[m.id])
					rm.MemberType = 1
					rg.Members = append(rg.Members, rm)
				}
				if req.IncludeAuthorizedOperations {
					rg.AuthorizedOperations = groupOperations
				}
			}
			r.Groups = append(r.Groups, rg)
		}
	})
	return r, err
}

func subset(a, b map[tp]bool) bool {
	for p := range a {
		if !b[p] {
			return false
		}
	}
	return true
}

func intersects(a, b map[tp]bool) bool {
	for p := range a {
		if b[p] {
			return true
		}
	}
	return false
}

// newUUID is a random base64url UUID, the member ID format of Kafka.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
