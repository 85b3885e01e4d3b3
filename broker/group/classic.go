package group

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).
//
// Behavior, following Kafka's GroupCoordinator:
//   - Empty -> PreparingRebalance on the first join; the join phase of a
//     group that was Empty lasts group.initial.rebalance.delay.ms, extended
//     by the same delay while new members keep arriving, up to the
//     rebalance timeout. Otherwise it lasts until every known member has
//     rejoined or the rebalance timeout (the largest of the members') ends;
//     members that did not rejoin are removed.
//   - PreparingRebalance -> CompletingRebalance: generation+1, the protocol
//     every member supports with the most first-preference votes is
//     selected, the leader gets every member's metadata.
//   - CompletingRebalance -> Stable when the leader's SyncGroup arrives;
//     members that have not sent SyncGroup within the rebalance timeout are
//     removed (and a rebalance starts).
//   - A member whose session timeout passes without a heartbeat is removed;
//     members waiting in JoinGroup or SyncGroup are kept alive.
//   - JoinGroup v4+ without a member ID gets MEMBER_ID_REQUIRED and a
//     pending member ID valid for one session timeout.
//   - Static members (group.instance.id, KIP-345): a join with a known
//     instance ID replaces the old member ID without a rebalance when the
//     group is Stable and the selected protocol is unchanged; the old member
//     ID is fenced (FENCED_INSTANCE_ID).

// Versions: JoinGroup v0-9, SyncGroup v0-5, Heartbeat v0-4, LeaveGroup
// v0-5.
//   - JoinGroup v1 RebalanceTimeoutMillis (v0: the session timeout); v4
//     MEMBER_ID_REQUIRED; v5 InstanceID (static members); v7 ProtocolType
//     in the response; v8 Reason (not used); v9 SkipAssignment for a static
//     leader that rejoins.
//   - SyncGroup v3 InstanceID; v5 ProtocolType/Protocol checked against
//     the group's (INCONSISTENT_GROUP_PROTOCOL) and answered.
//   - Heartbeat v3 InstanceID.
//   - LeaveGroup v3 a batch of members by member or instance ID, answered
//     per member; v5 Reason (not used).

func init() {
	regAPI(kmsg.JoinGroup, 0, 9, (*Coordinator).joinGroup)
	regAPI(kmsg.SyncGroup, 0, 5, (*Coordinator).syncGroup)
	regAPI(kmsg.Heartbeat, 0, 4, (*Coordinator).heartbeat)
	regAPI(kmsg.LeaveGroup, 0, 5, (*Coordinator).leaveGroup)
}

var (
	errNotAvailable = kerr.CoordinatorNotAvailable
)

// member is a classic group member.
type member struct {
	id, instanceID       string
	clientID, clientHost string
	protocolType         string
	protocols            []kmsg.JoinGroupRequestProtocol
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	assignment           []byte

	deadline time.Time // session expiry

	joinWait    chan *kmsg.JoinGroupResponse // non-nil while parked in JoinGroup
	joinVersion int16
	syncWait    chan *kmsg.SyncGroupResponse // non-nil while parked in SyncGroup
	synced      bool                         // sent SyncGroup in this generation
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Metadata, b[i].Metadata) {
			return false
		}
	}
	return true
}

func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if clientID == "" {
		clientID = "member"
	}
	return clientID + "-" + hex.EncodeToString(b[:4]) + "-" + hex.EncodeToString(b[4:6]) + "-" +
		hex.EncodeToString(b[6:8]) + "-" + hex.EncodeToString(b[8:10]) + "-" + hex.EncodeToString(b[10:])
}

// requestClient carries the client identity of a request; the broker may
// put it in the context (WithClient).
// requestClient identifies the requester: client ID, host ("/<ip>") and
// authenticated principal ("User:<name>"; "" when the broker set none).
type requestClient struct{ id, host, principal string }

type clientKey struct{}

// WithClient returns a context that tells the coordinator the client ID
// and host of the request (shown by DescribeGroups).
func WithClient(ctx context.Context, clientID, host string) context.Context {
	return context.WithValue(ctx, clientKey{}, requestClient{id: clientID, host: host})
}

type principalKey struct{}

// WithPrincipal returns a context that tells the coordinator the
// authenticated principal of the request, in Kafka's form "User:<name>".
// A KIP-848 member's regular-expression subscription is resolved to the
// topics its principal may describe (Options.TopicDescribable).
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

func clientOf(ctx context.Context) requestClient {
	rc, _ := ctx.Value(clientKey{}).(requestClient)
	rc.principal, _ = ctx.Value(principalKey{}).(string)
	return rc
}

// ---- JoinGroup ----

func (g *group) joinError(version int16, memberID string, err *kerr.Error) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.ErrorCode = errCode(err)
	r.Generation = -1
	r.MemberID = memberID
	empty := ""
	r.Protocol = &empty
	return r
}

func (c *Coordinator) joinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	var wait chan *kmsg.JoinGroupResponse
	var immediate *kmsg.JoinGroupResponse
	cl := clientOf(ctx)
	err := c.do(ctx, func() {
		immediate, wait = c.joinGroupLocked(req, cl)
	})
	if err != nil {
		return nil, err
	}
	if immediate != nil {
		return immediate, nil
	}
	select {
	case r := <-wait:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.stopping():
		return nil, ErrClosed
	}
}

// joinGroupLocked returns either an immediate response or a channel the
// loop answers when the join phase completes. Loop only.
func (c *Coordinator) joinGroupLocked(req *kmsg.JoinGroupRequest, cl requestClient) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	errResp := func(err *kerr.Error) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
		return (*group)(nil).joinError(req.Version, req.MemberID, err), nil
	}
	if req.Group == "" {
		return errResp(kerr.InvalidGroupID)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < c.opts.MinSessionTimeout || session > c.opts.MaxSessionTimeout {
		return errResp(kerr.InvalidSessionTimeout)
	}
	rebalance := session
	if req.Version >= 1 && req.RebalanceTimeoutMillis > 0 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	instanceID := ""
	if req.InstanceID != nil {
		instanceID = *req.InstanceID
	}

	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return errResp(kerr.UnknownMemberID)
		}
		g = c.newGroup(req.Group, kindClassic)
	}
	if g.kind == kindConsumer {
		if !g.isEmpty() {
			return errResp(kerr.InconsistentGroupProtocol)
		}
		g.convertTo(kindClassic)
	}
	if g.state == stateDead {
		return errResp(kerr.CoordinatorNotAvailable)
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		return errResp(kerr.InconsistentGroupProtocol)
	}
	now := c.opts.Now()
	nm := &member{
		instanceID:       instanceID,
		clientID:         cl.id,
		clientHost:       cl.host,
		protocolType:     req.ProtocolType,
		protocols:        req.Protocols,
		sessionTimeout:   session,
		rebalanceTimeout: rebalance,
		joinVersion:      req.Version,
	}

	if req.MemberID == "" {
		// Unknown member.
		newID := newMemberID(cl.id)
		if instanceID != "" {
			if oldID, ok := g.instances[instanceID]; ok {
				if old := g.members[oldID]; old != nil {
					return g.replaceStatic(old, newID, nm, now)
				}
			}
			nm.id = newID
			return nil, g.addAndRebalance(nm, now, "static member joined")
		}
		if req.Version >= 4 {
			g.pending[newID] = now.Add(session)
			return g.joinError(req.Version, newID, kerr.MemberIDRequired), nil
		}
		nm.id = newID
		return nil, g.addAndRebalance(nm, now, "member joined")
	}

	// Known member ID.
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		nm.id = req.MemberID
		return nil, g.addAndRebalance(nm, now, "pending member joined")
	}
	m := g.members[req.MemberID]
	if instanceID != "" {
		if cur, ok := g.instances[instanceID]; ok && cur != req.MemberID {
			return errResp(kerr.FencedInstanceID)
		}
	}
	if m == nil {
		return errResp(kerr.UnknownMemberID)
	}
	switch g.state {
	case stateEmpty:
		return errResp(kerr.UnknownMemberID)
	case statePreparingRebalance:
		g.updateMember(m, nm, now)
		wait := g.park(m)
		g.maybeCompleteJoin(now)
		return nil, wait
	case stateCompletingRebalance:
		if sameProtocols(m.protocols, nm.protocols) {
			// Lost the join response: answer with the current generation.
			m.deadline = now.Add(m.sessionTimeout)
			return g.joinResponse(m, req.Version, false), nil
		}
		g.updateMember(m, nm, now)
		wait := g.park(m)
		g.prepareRebalance(now, "member changed protocols")
		return nil, wait
	case stateStable:
		if m.id == g.leader || !sameProtocols(m.protocols, nm.protocols) {
			g.updateMember(m, nm, now)
			wait := g.park(m)
			g.prepareRebalance(now, "leader rejoined or member changed protocols")
			return nil, wait
		}
		m.deadline = now.Add(m.sessionTimeout)
		return g.joinResponse(m, req.Version, false), nil
	}
	return errResp(kerr.UnknownMemberID)
}

// park makes m wait for the end of the join phase, answering a previous
// parked join of the same member (the client gave up on it).
func (g *group) park(m *member) chan *kmsg.JoinGroupResponse {
	if m.joinWait != nil {
		m.joinWait <- g.joinError(m.joinVersion, m.id, kerr.RebalanceInProgress)
	}
	m.joinWait = make(chan *kmsg.JoinGroupResponse, 1)
	return m.joinWait
}

func (g *group) updateMember(m, nm *member, now time.Time) {
	m.protocols = nm.protocols
	m.protocolType = nm.protocolType
	m.sessionTimeout = nm.sessionTimeout
	m.rebalanceTimeout = nm.rebalanceTimeout
	m.joinVersion = nm.joinVersion
	if nm.clientID != "" {
		m.clientID, m.clientHost = nm.clientID, nm.clientHost
	}
	m.deadline = now.Add(m.sessionTimeout)
}

func (g *group) addAndRebalance(m *member, now time.Time, reason string) chan *kmsg.JoinGroupResponse {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	if m.instanceID != "" {
		g.instances[m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
	m.deadline = now.Add(m.sessionTimeout)
	wait := g.park(m)
	if g.state == statePreparingRebalance && g.initialRemaining > 0 {
		g.newSinceDelay = true
	}
	g.prepareRebalance(now, reason)
	g.maybeCompleteJoin(now)
	return wait
}

// replaceStatic handles a static member rejoining with a new member ID.
func (g *group) replaceStatic(old *member, newID string, nm *member, now time.Time) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	oldID := old.id
	// Fence the old member's parked requests.
	if old.joinWait != nil {
		old.joinWait <- g.joinError(old.joinVersion, oldID, kerr.FencedInstanceID)
		old.joinWait = nil
	}
	if old.syncWait != nil {
		old.syncWait <- syncError(kerr.FencedInstanceID)
		old.syncWait = nil
	}
	delete(g.members, oldID)
	old.id = newID
	g.members[newID] = old
	g.instances[old.instanceID] = newID
	wasLeader := g.leader == oldID
	if wasLeader {
		g.leader = newID
	}
	g.updateMember(old, nm, now)
	switch g.state {
	case stateStable:
		// As Kafka: only a change of the selected protocol forces a
		// rebalance (cooperative clients' metadata carries their owned
		// partitions, which a restarted instance no longer has).
		if g.selectProtocol() == g.protocol {
			g.c.persistGroup(g)
			skip := wasLeader && nm.joinVersion >= 9
			r := g.joinResponse(old, nm.joinVersion, skip)
			if !skip {
				// Kafka answers with the leader as it was before the
				// replacement, so a rejoining static leader does not try
				// to assign (it would need the members list).
				if wasLeader {
					r.LeaderID = oldID
				}
				r.Members = nil
			}
			return r, nil
		}
		wait := g.park(old)
		g.prepareRebalance(now, "static member rejoined with different protocols")
		return nil, wait
	case stateCompletingRebalance:
		wait := g.park(old)
		g.prepareRebalance(now, "static member rejoined during sync")
		return nil, wait
	default: // PreparingRebalance
		wait := g.park(old)
		g.maybeCompleteJoin(now)
		return nil, wait
	}
}

func metadataOf(ps []kmsg.JoinGroupRequestProtocol, name string) []byte {
	for _, p := range ps {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

// supportsProtocols: Kafka's rule — an empty group accepts any non-empty
// protocol type with at least one protocol; otherwise the type must match
// and one of the protocols must be supported by every current member.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if metadataOf(m.protocols, p.Name) == nil && !hasProtocol(m.protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func hasProtocol(ps []kmsg.JoinGroupRequestProtocol, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol all members support with the most
// first-choice votes (ties: the earliest in the leader's preference).
func (g *group) selectProtocol() string {
	var candidates []string
	var ref *member
	if g.leader != "" {
		ref = g.members[g.leader]
	}
	if ref == nil {
		for _, m := range g.members {
			if ref == nil || m.id < ref.id {
				ref = m
			}
		}
	}
	if ref == nil {
		return ""
	}
	for _, p := range ref.protocols {
		all := true
		for _, m := range g.members {
			if !hasProtocol(m.protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if containsStr(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, cand := range candidates {
		if votes[cand] > votes[best] {
			best = cand
		}
	}
	return best
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// prepareRebalance moves the group to PreparingRebalance (no-op if there).
func (g *group) prepareRebalance(now time.Time, reason string) {
	if g.state == statePreparingRebalance {
		return
	}
	if g.state == stateCompletingRebalance {
		// Members waiting in SyncGroup must rejoin.
		for _, m := range g.members {
			m.assignment = nil
			if m.syncWait != nil {
				m.syncWait <- syncError(kerr.RebalanceInProgress)
				m.syncWait = nil
			}
		}
	}
	wasEmpty := g.state == stateEmpty
	g.setState(statePreparingRebalance, now)
	g.rebalanceStart = now
	g.c.met.rebalanceStarted(g.id)
	if wasEmpty && g.c.opts.InitialRebalanceDelay > 0 {
		delay := min(g.c.opts.InitialRebalanceDelay, g.maxRebalanceTimeout())
		g.initialRemaining = max(g.maxRebalanceTimeout()-delay, 0)
		if g.initialRemaining == 0 {
			g.initialRemaining = -1 // in the delay, no extension left
		}
		g.newSinceDelay = false
		g.joinDeadline = now.Add(delay)
	} else {
		g.initialRemaining = 0
		g.joinDeadline = now.Add(g.maxRebalanceTimeout())
	}
	g.c.logger.Debug("preparing rebalance", "group", g.id, "generation", g.generation, "reason", reason)
}

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

func (g *group) setState(s state, now time.Time) {
	g.state = s
	g.stateSince = now
}

// maybeCompleteJoin completes the join phase once every member has
// rejoined and no member ID handed out with MEMBER_ID_REQUIRED is still
// expected; the initial delay always runs to its end.
func (g *group) maybeCompleteJoin(now time.Time) {
	if g.state != statePreparingRebalance || g.initialRemaining != 0 {
		return
	}
	if len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.joinWait == nil {
			return
		}
	}
	g.completeJoin(now)
}

// completeJoin ends the join phase: members that did not rejoin are
// removed, the generation advances.
func (g *group) completeJoin(now time.Time) {
	for id, m := range g.members {
		if m.joinWait == nil {
			g.removeMemberRaw(id)
		}
	}
	g.initialRemaining = 0
	g.joinDeadline = time.Time{}
	g.generation++
	if len(g.members) == 0 {
		g.protocol = ""
		g.leader = ""
		g.setState(stateEmpty, now)
		g.c.met.rebalanceEnded(g.id, now.Sub(g.rebalanceStart))
		g.c.persistGroup(g)
		return
	}
	if _, ok := g.members[g.leader]; !ok {
		g.leader = ""
		for id := range g.members {
			if g.leader == "" || id < g.leader {
				g.leader = id
			}
		}
	}
	g.protocol = g.selectProtocol()
	g.setState(stateCompletingRebalance, now)
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	for _, m := range g.members {
		m.synced = false
		m.deadline = now.Add(m.sessionTimeout)
		m.joinWait <- g.joinResponse(m, m.joinVersion, false)
		m.joinWait = nil
	}
}

// joinResponse is the successful JoinGroup answer for m in the current
// generation; the leader gets the members (unless skipAssignment).
func (g *group) joinResponse(m *member, version int16, skipAssignment bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	pt, proto := g.protocolType, g.protocol
	r.ProtocolType = &pt
	r.Protocol = &proto
	r.LeaderID = g.leader
	r.MemberID = m.id
	r.SkipAssignment = skipAssignment
	if m.id == g.leader {
		for _, o := range g.sortedMembers() {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID = o.id
			if o.instanceID != "" {
				iid := o.instanceID
				jm.InstanceID = &iid
			}
			jm.ProtocolMetadata = o.metadataFor(g.protocol)
			r.Members = append(r.Members, jm)
		}
	}
	return r
}

func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sortBy(out, func(m *member) string { return m.id })
	return out
}

// removeMemberRaw deletes a member without any state transition.
func (g *group) removeMemberRaw(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	if m.instanceID != "" && g.instances[m.instanceID] == id {
		delete(g.instances, m.instanceID)
	}
	if m.joinWait != nil {
		m.joinWait <- g.joinError(m.joinVersion, id, kerr.UnknownMemberID)
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- syncError(kerr.UnknownMemberID)
		m.syncWait = nil
	}
	if g.leader == id {
		g.leader = ""
	}
}

// removeMember removes a member that left or expired and moves the group
// on (a rebalance, or the end of the current join phase).
func (g *group) removeMember(id string, now time.Time, reason string) {
	g.removeMemberRaw(id)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance(now, reason)
		g.maybeCompleteJoin(now)
	case statePreparingRebalance:
		g.maybeCompleteJoin(now)
	}
	if len(g.members) == 0 && g.state == statePreparingRebalance && g.initialRemaining == 0 && len(g.pending) == 0 {
		g.completeJoin(now)
	}
}

// ---- timers ----

func (g *group) classicFireTimers(now time.Time) bool {
	fired := false
	for id, exp := range g.pending {
		if !now.Before(exp) {
			delete(g.pending, id)
			fired = true
			g.maybeCompleteJoin(now)
		}
	}
	for id, m := range g.members {
		if m.joinWait != nil || m.syncWait != nil || now.Before(m.deadline) {
			continue
		}
		if g.state == stateEmpty || g.state == stateDead {
			continue
		}
		fired = true
		g.c.logger.Info("member session expired", "group", g.id, "member", id)
		g.removeMember(id, now, "session timeout")
	}
	if g.state == statePreparingRebalance && !g.joinDeadline.IsZero() && !now.Before(g.joinDeadline) {
		fired = true
		if g.initialRemaining > 0 && g.newSinceDelay {
			delay := min(g.c.opts.InitialRebalanceDelay, g.initialRemaining)
			g.initialRemaining -= delay
			if g.initialRemaining == 0 {
				g.initialRemaining = -1
			}
			g.newSinceDelay = false
			// Relative to the deadline that fired, not to now: a late
			// tick (or a test advancing time in one step) sees the same
			// schedule as timely ones.
			g.joinDeadline = g.joinDeadline.Add(delay)
		} else {
			g.completeJoin(now)
		}
	}
	if g.state == stateCompletingRebalance && !g.syncDeadline.IsZero() && !now.Before(g.syncDeadline) {
		fired = true
		g.syncDeadline = time.Time{}
		var late []string
		for id, m := range g.members {
			if !m.synced {
				late = append(late, id)
			}
		}
		for _, id := range late {
			g.removeMemberRaw(id)
		}
		if len(late) > 0 {
			g.prepareRebalance(now, "members did not sync within the rebalance timeout")
			g.maybeCompleteJoin(now)
			if len(g.members) == 0 {
				g.completeJoin(now)
			}
		}
	}
	return fired
}

func (g *group) classicNextDeadline() time.Time {
	var next time.Time
	for _, exp := range g.pending {
		next = earliest(next, exp)
	}
	if g.state != stateEmpty && g.state != stateDead {
		for _, m := range g.members {
			if m.joinWait == nil && m.syncWait == nil {
				next = earliest(next, m.deadline)
			}
		}
	}
	if g.state == statePreparingRebalance {
		next = earliest(next, g.joinDeadline)
	}
	if g.state == stateCompletingRebalance {
		next = earliest(next, g.syncDeadline)
	}
	return next
}

// ---- SyncGroup ----

func syncError(err *kerr.Error) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = errCode(err)
	return r
}

// syncOK is a successful SyncGroup answer carrying the group's protocol
// (v5+) and m's assignment.
func (g *group) syncOK(m *member) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberAssignment = m.assignment
	return r
}

func (c *Coordinator) syncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	var immediate *kmsg.SyncGroupResponse
	var wait chan *kmsg.SyncGroupResponse
	err := c.do(ctx, func() { immediate, wait = c.syncGroupLocked(req) })
	if err != nil {
		return nil, err
	}
	if immediate == nil {
		select {
		case immediate = <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.stopping():
			return nil, ErrClosed
		}
	}
	return immediate, nil
}

func (c *Coordinator) syncGroupLocked(req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, chan *kmsg.SyncGroupResponse) {
	if req.Group == "" {
		return syncError(kerr.InvalidGroupID), nil
	}
	g := c.groups[req.Group]
	if g == nil || g.kind != kindClassic {
		return syncError(kerr.UnknownMemberID), nil
	}
	if g.state == stateDead {
		return syncError(kerr.CoordinatorNotAvailable), nil
	}
	m, kerrv := g.validateMember(req.MemberID, req.InstanceID)
	if kerrv != nil {
		return syncError(kerrv), nil
	}
	if req.Generation != g.generation {
		return syncError(kerr.IllegalGeneration), nil
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol) {
		return syncError(kerr.InconsistentGroupProtocol), nil
	}
	now := c.opts.Now()
	switch g.state {
	case stateEmpty:
		return syncError(kerr.UnknownMemberID), nil
	case statePreparingRebalance:
		return syncError(kerr.RebalanceInProgress), nil
	case stateStable:
		m.deadline = now.Add(m.sessionTimeout)
		return g.syncOK(m), nil
	}
	// CompletingRebalance.
	m.synced = true
	m.deadline = now.Add(m.sessionTimeout)
	if m.syncWait != nil {
		m.syncWait <- syncError(kerr.RebalanceInProgress)
	}
	m.syncWait = make(chan *kmsg.SyncGroupResponse, 1)
	wait := m.syncWait
	if m.id == g.leader {
		assigned := map[string][]byte{}
		for _, a := range req.GroupAssignment {
			assigned[a.MemberID] = a.MemberAssignment
		}
		for id, o := range g.members {
			o.assignment = assigned[id]
		}
		g.setState(stateStable, now)
		g.syncDeadline = time.Time{}
		c.met.rebalanceEnded(g.id, now.Sub(g.rebalanceStart))
		c.persistGroup(g)
		for _, o := range g.members {
			if o.syncWait != nil {
				o.syncWait <- g.syncOK(o)
				o.syncWait = nil
			}
		}
	}
	return nil, wait
}

// validateMember checks a member ID / instance ID pair against the group.
func (g *group) validateMember(memberID string, instanceID *string) (*member, *kerr.Error) {
	if instanceID != nil && *instanceID != "" {
		cur, ok := g.instances[*instanceID]
		if ok && cur != memberID {
			return nil, kerr.FencedInstanceID
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID
	}
	return m, nil
}

// ---- Heartbeat ----

func (c *Coordinator) heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	r := kmsg.NewPtrHeartbeatResponse()
	err := c.do(ctx, func() { r.ErrorCode = errCode(c.heartbeatLocked(req)) })
	return r, err
}

func (c *Coordinator) heartbeatLocked(req *kmsg.HeartbeatRequest) *kerr.Error {
	if req.Group == "" {
		return kerr.InvalidGroupID
	}
	g := c.groups[req.Group]
	if g == nil || g.kind != kindClassic {
		return kerr.UnknownMemberID
	}
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable
	}
	m, kerrv := g.validateMember(req.MemberID, req.InstanceID)
	if kerrv != nil {
		return kerrv
	}
	if g.state == stateEmpty {
		return kerr.UnknownMemberID
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	m.deadline = c.opts.Now().Add(m.sessionTimeout)
	if g.state == statePreparingRebalance {
		return kerr.RebalanceInProgress
	}
	return nil
}

// ---- LeaveGroup ----

func (c *Coordinator) leaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	r := kmsg.NewPtrLeaveGroupResponse()
	err := c.do(ctx, func() {
		if req.Group == "" {
			r.ErrorCode = kerr.InvalidGroupID.Code
			return
		}
		g := c.groups[req.Group]
		if req.Version < 3 {
			if g == nil || g.kind != kindClassic {
				r.ErrorCode = kerr.UnknownMemberID.Code
				return
			}
			r.ErrorCode = errCode(g.leave(req.MemberID, nil))
			return
		}
		for _, lm := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
			if g == nil || g.kind != kindClassic {
				rm.ErrorCode = kerr.UnknownMemberID.Code
			} else {
				rm.ErrorCode = errCode(g.leave(lm.MemberID, lm.InstanceID))
			}
			r.Members = append(r.Members, rm)
		}
	})
	return r, err
}

func (g *group) leave(memberID string, instanceID *string) *kerr.Error {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable
	}
	now := g.c.opts.Now()
	if instanceID != nil && *instanceID != "" {
		cur, ok := g.instances[*instanceID]
		if !ok {
			return kerr.UnknownMemberID
		}
		if memberID != "" && memberID != cur {
			return kerr.FencedInstanceID
		}
		memberID = cur
	} else if _, ok := g.pending[memberID]; ok {
		delete(g.pending, memberID)
		g.maybeCompleteJoin(now)
		return nil
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID
	}
	g.removeMember(memberID, now, "member left")
	return nil
}

// convertTo switches an empty group's protocol kind, keeping its offsets.
func (g *group) convertTo(kind groupKind) {
	g.kind = kind
	g.members = make(map[string]*member)
	g.pending = make(map[string]time.Time)
	g.instances = make(map[string]string)
	g.state = stateEmpty
	g.protocolType, g.protocol, g.leader = "", "", ""
	if kind == kindConsumer {
		g.cg = newConsumerGroup(g)
		g.cg.epoch = g.generation
	} else {
		if g.cg != nil {
			g.generation = g.cg.epoch
		}
		g.cg = nil
	}
}
