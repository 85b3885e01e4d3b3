package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A group is either classic (JoinGroup/SyncGroup) or consumer (KIP-848
// ConsumerGroupHeartbeat); an Empty group of one kind converts to the other
// on the first join of the other protocol, as Kafka does. Every group keeps
// its committed offsets. Owned by the loop.
type group struct {
	c    *Coordinator
	id   string
	kind groupKind

	// incarnation changes when the group is deleted: a write queued before
	// a delete must not resurrect state when it completes.
	incarnation uint64

	offsets map[tp]committed
	// pendingWrites counts queued log writes for this group; the group is
	// not forgotten while any is in flight.
	pendingWrites int

	// Classic protocol state (classic.go).
	state        state
	stateSince   time.Time
	protocolType string
	protocol     string // selected protocol; "" unless CompletingRebalance/Stable
	generation   int32
	leader       string
	members      map[string]*member
	pending      map[string]time.Time // member IDs handed out with MEMBER_ID_REQUIRED -> expiry
	instances    map[string]string    // static instance ID -> member ID

	joinDeadline     time.Time     // PreparingRebalance: when the join phase ends
	initialRemaining time.Duration // initial delay budget left (0 when not in the initial delay)
	newSinceDelay    bool          // a member joined during the current initial delay window
	syncDeadline     time.Time     // CompletingRebalance: when members that did not sync are removed
	rebalanceStart   time.Time

	// Consumer protocol state (consumer.go).
	cg *consumerGroup
}

type groupKind int8

const (
	kindClassic groupKind = iota
	kindConsumer
)

func (k groupKind) String() string {
	if k == kindConsumer {
		return "consumer"
	}
	return "classic"
}

// state is the classic group state (and, for consumer groups, the mapped
// state reported by ListGroups).
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s state) String() string { return stateNames[s] }

type tp struct {
	topic     string
	partition int32
}

// committed is a committed offset as stored in its OffsetCommitValue.
// logOffset is the position of its record in the offsets log: when a
// transaction commits, its offset replaces a committed one only if it was
// written later (as Kafka does).
type committed struct {
	logOffset   int64
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  time.Time
	expireTime  time.Time // v1-v4 explicit expiry; zero = by group emptiness
}

func (c *Coordinator) newGroup(id string, kind groupKind) *group {
	c.nextID++
	g := &group{
		c:           c,
		id:          id,
		kind:        kind,
		incarnation: c.nextID,
		offsets:     make(map[tp]committed),
		members:     make(map[string]*member),
		pending:     make(map[string]time.Time),
		instances:   make(map[string]string),
		stateSince:  c.opts.Now(),
	}
	if kind == kindConsumer {
		g.cg = newConsumerGroup(g)
	}
	c.groups[id] = g
	return g
}

// fireTimers applies this group's passed deadlines; it reports whether
// anything happened.
func (g *group) fireTimers(now time.Time) bool {
	if g.kind == kindConsumer {
		return g.cg.fireTimers(now)
	}
	return g.classicFireTimers(now)
}

func (g *group) nextDeadline() time.Time {
	if g.kind == kindConsumer {
		return g.cg.nextDeadline()
	}
	return g.classicNextDeadline()
}

// isEmpty reports whether the group has no members.
func (g *group) isEmpty() bool {
	if g.kind == kindConsumer {
		return len(g.cg.members) == 0
	}
	return g.state == stateEmpty || g.state == stateDead
}

// removable: nothing left worth keeping in memory.
func (g *group) removable() bool {
	if g.pendingWrites > 0 || len(g.offsets) > 0 {
		return false
	}
	if g.kind == kindConsumer {
		return len(g.cg.members) == 0 && len(g.cg.static) == 0
	}
	return g.state == stateDead || (g.state == stateEmpty && len(g.pending) == 0 && g.protocolType == "")
}

// stateName is the state for DescribeGroups / ListGroups.
func (g *group) stateName() string {
	if g.kind == kindConsumer {
		return g.cg.stateName()
	}
	return g.state.String()
}

// typeProtocol is the protocol type ListGroups reports.
func (g *group) typeProtocol() string {
	if g.kind == kindConsumer {
		return "consumer"
	}
	return g.protocolType
}

// subscribedTopics are the topics the group's members consume (for
// OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC and for lag).
func (g *group) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	if g.kind == kindConsumer {
		for _, ts := range g.cg.effectiveSubscriptions() {
			for _, t := range ts {
				out[t] = true
			}
		}
		return out
	}
	if g.protocolType != "consumer" || g.protocol == "" {
		return out
	}
	for _, m := range g.members {
		meta := m.metadataFor(g.protocol)
		var md kmsg.ConsumerMemberMetadata
		if md.ReadFrom(meta) == nil {
			for _, t := range md.Topics {
				out[t] = true
			}
		}
		var as kmsg.ConsumerMemberAssignment
		if as.ReadFrom(m.assignment) == nil {
			for _, t := range as.Topics {
				out[t.Topic] = true
			}
		}
	}
	return out
}

// failWaiters answers every parked request of the group with
// COORDINATOR_NOT_AVAILABLE (shutdown) so clients retry elsewhere.
func (g *group) failWaiters() {
	for _, m := range g.members {
		if m.joinWait != nil {
			m.joinWait <- g.joinError(m.joinVersion, m.id, errNotAvailable)
			m.joinWait = nil
		}
		if m.syncWait != nil {
			m.syncWait <- syncError(errNotAvailable)
			m.syncWait = nil
		}
	}
}
