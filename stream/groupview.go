package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group view: which member of the App's consumer group owns which input
// partition, and where each member answers queries. Queryable state routes
// lookups with it and standby placement is computed from it.
//
// Each member advertises its query endpoint in the userData of its group
// subscription (memberInfo below). The view is read with DescribeGroups after
// every rebalance this instance takes part in, and periodically (a member
// whose assignment did not change gets no callback), so it lags the group by
// at most viewRefreshInterval.

// viewRefreshInterval bounds how stale the group view gets between
// rebalance callbacks.
const viewRefreshInterval = time.Second

// memberInfo is what an instance advertises to its group.
type memberInfo struct {
	// QueryEndpoint is host:port where the instance serves the query HTTP
	// API ("" when it serves none).
	QueryEndpoint string
}

// memberInfoVersion is the first byte of an encoded memberInfo.
const memberInfoVersion = 1

// errBadMemberInfo is returned (wrapped) for userData that does not decode.
var errBadMemberInfo = errors.New("stream: bad member info")

// encodeMemberInfo encodes m:
//
//	version u8 (=1) | len uvarint | query endpoint (UTF-8)
//
// Later versions may append fields; a decoder of version 1 ignores trailing
// bytes of a higher version.
func encodeMemberInfo(m memberInfo) []byte {
	b := []byte{memberInfoVersion}
	b = binary.AppendUvarint(b, uint64(len(m.QueryEndpoint)))
	return append(b, m.QueryEndpoint...)
}

func decodeMemberInfo(b []byte) (memberInfo, error) {
	if len(b) < 1 {
		return memberInfo{}, fmt.Errorf("%w: empty", errBadMemberInfo)
	}
	if b[0] < memberInfoVersion {
		return memberInfo{}, fmt.Errorf("%w: version %d", errBadMemberInfo, b[0])
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || w != uvarintLen(n) || n > uint64(len(b)-1-w) {
		return memberInfo{}, fmt.Errorf("%w: bad endpoint length", errBadMemberInfo)
	}
	rest := b[1+w:]
	if b[0] == memberInfoVersion && uint64(len(rest)) != n {
		return memberInfo{}, fmt.Errorf("%w: trailing bytes", errBadMemberInfo)
	}
	return memberInfo{QueryEndpoint: string(rest[:n])}, nil
}

// uvarintLen is the length of n's minimal uvarint encoding: decoders reject
// longer ones, so every accepted input has exactly one encoding.
func uvarintLen(n uint64) int { return len(binary.AppendUvarint(nil, n)) }

// advertisedUserData is the opaque per-member userData this instance hands to
// the task balancer (balancer.go), which carries it in its subscription.
func (a *App) advertisedUserData() []byte {
	return encodeMemberInfo(memberInfo{QueryEndpoint: a.queryEndpoint()})
}

// MemberQueryURL returns the base URL of the query HTTP API (QueryServer,
// AdvertisedQueryEndpoint) that a member of an App's group advertises in
// its subscription metadata (a JoinGroup's protocol metadata, as
// DescribeGroups returns it): "" if it serves none; an error if the
// metadata is not a stream App member's. Tools find a running App's
// query API with it (GET /v1/describe: App.Describe).
func MemberQueryURL(metadata []byte) (string, error) {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(metadata); err != nil {
		return "", fmt.Errorf("%w: %v", errBadMemberInfo, err)
	}
	ud, err := decodeMemberUserData(m.UserData)
	if err != nil {
		return "", err
	}
	if ud == nil {
		return "", fmt.Errorf("%w: no App user data (not a stream App member)", errBadMemberInfo)
	}
	info, err := decodeMemberInfo(ud)
	if err != nil || info.QueryEndpoint == "" {
		return "", err
	}
	return endpointURL(info.QueryEndpoint), nil
}

// appUserData returns the App's userData from a member's subscription, or
// nil if it carries none (another client, or one that does not decode).
func appUserData(m *kmsg.ConsumerMemberMetadata) []byte {
	ud, err := decodeMemberUserData(m.UserData)
	if err != nil {
		return nil
	}
	return ud
}

// viewMember is one member of the group as last described.
type viewMember struct {
	id       string
	info     memberInfo
	assigned []topicPartition
}

// groupView is an immutable snapshot of the group.
type groupView struct {
	// stable: the group was Stable when described; otherwise the view is
	// only a hint and owners may be missing.
	stable  bool
	self    string       // this instance's member id ("" if not in the group)
	members []viewMember // sorted by member id
	owner   map[topicPartition]int
}

// describedMember is one member as DescribeGroups gives it (nil: did not
// decode as the consumer protocol).
type describedMember struct {
	id       string
	meta     *kmsg.ConsumerMemberMetadata
	assigned *kmsg.ConsumerMemberAssignment
}

func describedMembers(g kadm.DescribedGroup) []describedMember {
	out := make([]describedMember, len(g.Members))
	for i, m := range g.Members {
		out[i].id = m.MemberID
		if md, ok := m.Join.AsConsumer(); ok {
			out[i].meta = md
		}
		if as, ok := m.Assigned.AsConsumer(); ok {
			out[i].assigned = as
		}
	}
	return out
}

// newGroupView builds a view of the described members. A member whose
// userData does not decode advertises no endpoint.
func newGroupView(stable bool, self string, members []describedMember, log func(msg string, args ...any)) *groupView {
	v := &groupView{stable: stable, self: self, owner: map[topicPartition]int{}}
	for _, m := range members {
		vm := viewMember{id: m.id}
		if m.meta != nil {
			if ud := appUserData(m.meta); ud != nil {
				info, err := decodeMemberInfo(ud)
				if err != nil {
					log("group member advertises undecodable info", "member", m.id, "err", err)
				}
				vm.info = info
			}
		}
		if m.assigned != nil {
			for _, t := range m.assigned.Topics {
				for _, p := range t.Partitions {
					vm.assigned = append(vm.assigned, topicPartition{t.Topic, p})
				}
			}
		}
		v.members = append(v.members, vm)
	}
	slices.SortFunc(v.members, func(x, y viewMember) int {
		switch {
		case x.id < y.id:
			return -1
		case x.id > y.id:
			return 1
		}
		return 0
	})
	for i, m := range v.members {
		for _, tp := range m.assigned {
			v.owner[tp] = i
		}
	}
	return v
}

// ownerOf returns the member owning tp, if any.
func (v *groupView) ownerOf(tp topicPartition) (viewMember, bool) {
	i, ok := v.owner[tp]
	if !ok {
		return viewMember{}, false
	}
	return v.members[i], true
}

// standbysOf returns the members that keep standby copies of tp's task: the
// n members following its owner in member-id order (wrapping around), never
// the owner itself. The placement is a pure function of the view, so every
// instance computes the same one.
func (v *groupView) standbysOf(tp topicPartition, n int) []string {
	i, ok := v.owner[tp]
	if !ok || n <= 0 {
		return nil
	}
	var out []string
	for k := 1; k <= n && k < len(v.members); k++ {
		out = append(out, v.members[(i+k)%len(v.members)].id)
	}
	return out
}

// viewTracker keeps the current group view of a running session.
//
// Goroutine-safe: current and invalidate are called from any goroutine; the
// refresh goroutine started by run is the only writer.
type viewTracker struct {
	a       *App
	mu      sync.Mutex
	view    *groupView // nil: unknown (not joined, or a rebalance since)
	refresh chan struct{}
	// onView is called by the refresh goroutine with every new view.
	onView func(*groupView)
}

func newViewTracker(a *App) *viewTracker {
	return &viewTracker{a: a, refresh: make(chan struct{}, 1)}
}

// current returns the latest view, or nil while it is unknown.
func (vt *viewTracker) current() *groupView {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	return vt.view
}

// invalidate forgets the view (a rebalance is under way) and asks for a
// refresh.
func (vt *viewTracker) invalidate() {
	vt.mu.Lock()
	vt.view = nil
	vt.mu.Unlock()
	vt.poke()
}

// poke asks for a refresh without forgetting the view.
func (vt *viewTracker) poke() {
	select {
	case vt.refresh <- struct{}{}:
	default:
	}
}

// run refreshes the view until ctx is done: at once, on every poke, and
// every viewRefreshInterval. A group not Stable is described again after a
// short backoff.
func (vt *viewTracker) run(ctx context.Context, cl *kgo.Client) {
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(viewRefreshInterval)
	defer tick.Stop()
	for {
		v, err := vt.describe(ctx, adm, cl)
		if ctx.Err() != nil {
			return
		}
		wait := viewRefreshInterval
		if err != nil {
			vt.a.cfg.logger.Debug("describe group failed", "err", err)
			wait = 100 * time.Millisecond
		} else if !v.stable {
			wait = 100 * time.Millisecond
		}
		if v != nil {
			vt.mu.Lock()
			vt.view = v
			vt.mu.Unlock()
			if vt.onView != nil {
				vt.onView(v)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-vt.refresh:
		case <-t.C:
		case <-tick.C:
		}
		t.Stop()
	}
}

func (vt *viewTracker) describe(ctx context.Context, adm *kadm.Client, cl *kgo.Client) (*groupView, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	gs, err := adm.DescribeGroups(ctx, vt.a.id)
	if err != nil {
		return nil, err
	}
	g, ok := gs[vt.a.id]
	if !ok {
		return nil, fmt.Errorf("group %s not described", vt.a.id)
	}
	if g.Err != nil {
		return nil, g.Err
	}
	self, _ := cl.GroupMetadata()
	return newGroupView(g.State == "Stable", self, describedMembers(g), vt.a.cfg.logger.Warn), nil
}
