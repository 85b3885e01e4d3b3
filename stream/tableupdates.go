package stream

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tableUpdates collapses the updates of an aggregate's table within a
// processing round (Kafka Streams' record cache): a key updated many times
// in a round gets one changelog record and one downstream update — its
// latest value — when the round ends (task.endBatch), not one per input
// record. The store itself is updated at once, so every record (and a query)
// sees the latest value.
//
// Invariant: between rounds it holds nothing. Commits (and transaction ends)
// happen only between rounds, so every committed input offset is covered by
// the changelog and outputs of the updates it caused, as without the
// collapsing; a crash before the round's outputs are acknowledged replays
// the round's input (at-least-once) or aborts its transaction (ExactlyOnce).
//
// A round is at most MaxPollRecords records; the Driver (streamtest) runs
// one record per round, so its outputs show every update.
type tableUpdates[K, V any] struct {
	t         *task
	node      int // the aggregate's node id: updates are flushed in node (topological) order
	changelog string
	next      func(Record[K, V]) error // nil: no downstream operator

	// staged: the updates of the record being processed, kept only if it
	// succeeds (commitStaged).
	staged []tableUpdate[K, V]
	// latest: the round's latest update per encoded key, in the order of
	// each key's first update in the round; index maps a key to its slot.
	latest []tableUpdate[K, V]
	index  map[string]int
}

type tableUpdate[K, V any] struct {
	key, value []byte
	updated    time.Time // the store's update time of the key (the changelog record's timestamp)
	rec        Record[K, V]
}

// roundFlusher is a task's view of a tableUpdates.
type roundFlusher interface {
	nodeID() int
	commitStaged()
	dropStaged()
	flush() error
}

func newTableUpdates[K, V any](t *task, node int, changelog string, children []any) *tableUpdates[K, V] {
	u := &tableUpdates[K, V]{t: t, node: node, changelog: changelog, index: map[string]int{}}
	if len(children) > 0 {
		u.next = fanout[K, V](children)
	}
	i, _ := slices.BinarySearchFunc(t.flushers, node, func(f roundFlusher, n int) int { return f.nodeID() - n })
	t.flushers = slices.Insert(t.flushers, i, roundFlusher(u))
	return u
}

func (u *tableUpdates[K, V]) nodeID() int { return u.node }

func (u *tableUpdates[K, V]) stage(key, value []byte, updated time.Time, rec Record[K, V]) {
	u.staged = append(u.staged, tableUpdate[K, V]{key: key, value: value, updated: updated, rec: rec})
}

func (u *tableUpdates[K, V]) commitStaged() {
	for _, s := range u.staged {
		if i, ok := u.index[string(s.key)]; ok {
			u.latest[i] = s
			continue
		}
		u.index[string(s.key)] = len(u.latest)
		u.latest = append(u.latest, s)
	}
	clear(u.staged)
	u.staged = u.staged[:0]
}

func (u *tableUpdates[K, V]) dropStaged() {
	clear(u.staged)
	u.staged = u.staged[:0]
}

// flush writes the round's latest update of each key to the changelog and
// passes it downstream. The changelog record is written whatever happens
// downstream (the store holds the value already); a downstream failure
// sends the update to the dead-letter topic, naming the record that caused
// it (its Origin), and the round goes on.
func (u *tableUpdates[K, V]) flush() error {
	if len(u.latest) == 0 {
		return nil
	}
	t := u.t
	for i := range u.latest {
		up := &u.latest[i]
		t.produce(&kgo.Record{Topic: u.changelog, Partition: t.id.partition, Key: up.key, Value: up.value,
			Timestamp: up.updated})
		if u.next == nil {
			continue
		}
		o := up.rec.Origin
		origin := &kgo.Record{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Key: up.key,
			Value: up.value, Timestamp: up.rec.Timestamp}
		if err := t.emitTimed(func() error { return u.next(up.rec) }, origin); err != nil {
			return err
		}
	}
	clear(u.latest)
	u.latest = u.latest[:0]
	clear(u.index)
	return nil
}
