package stream

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Change is one update of a table's key as the table forwards it downstream
// (Changes): the value downstream last saw for the key (Old, if
// HasOld) and its value now (New, if HasNew). An insert has no Old, a
// deletion (a tombstone, or a key expired by its store's TTL) no New.
//
// Updates are collapsed (see Table): Old is the value forwarded with the
// previous update of the key, not necessarily the value just before the
// latest input record, so a consumer deriving deltas from Old and New
// (subtract Old, add New) stays exact whatever was collapsed.
type Change[V any] struct {
	Old, New       V
	HasOld, HasNew bool
}

// tableUpdates collapses the updates of an aggregate's table between
// commits (Kafka Streams' record cache): a key updated many times gets one
// changelog record and one downstream update — its latest value, with the
// value downstream saw before — when the task flushes its tables, not one
// per input record. The store itself is updated at once, so every record
// (and a query) sees the latest value.
//
// A task run by an App flushes its tables (flushTables):
//   - before every commit of its input offsets (at-least-once: App.commit,
//     periodic, on revocation and at shutdown) and before every transaction
//     commits (ExactlyOnce), ahead of the producer flush that precedes it;
//   - at the end of a round in which the collapsed updates of its tables
//     exceed their bound, an eighth of StoreCache (collapseBound; a round
//     adds at most MaxPollRecords records' updates beyond it).
//
// Invariant: every committed input offset is covered by the changelog
// records and outputs of the updates it caused, as without the collapsing:
// nothing is collapsed across a commit. A crash before a commit replays the
// input since the last one (at-least-once) or aborts its transaction
// (ExactlyOnce, where an abort also drops the collapsed updates: drop); the
// replay recomputes them from the restored store.
//
// A task not run by an App (the Driver, streamtest) flushes at the end of
// every round — one record per round — so its outputs show every update,
// like Kafka Streams' TopologyTestDriver, which commits after every record.
type tableUpdates[K, V any] struct {
	t         *task
	node      int    // the table's node id: tables flush in node (topological) order
	store     string // the store whose updates these are
	changelog string
	every     bool // EveryUpdate: forward each update at once, collapse nothing
	key       Codec[K]
	value     Codec[V]
	wantOld   func() bool              // whether a downstream consumer reads the old value (Changes)
	next      func(Record[K, V]) error // nil: no downstream operator

	// staged: the updates of the record being processed, kept only if it
	// succeeds (commitStaged).
	staged []tableUpdate[K, V]
	// latest: the collapsed update per encoded key since the last flush, in
	// the order of each key's first update; index maps a key to its slot.
	latest []tableUpdate[K, V]
	index  map[string]int
	size   int64 // bytes held by latest (keys, values and old values)
}

type tableUpdate[K, V any] struct {
	key, value []byte // value nil: the key was deleted
	// old is the key's value when downstream last saw it (the store's value
	// before the first update since the last flush); hadOld false: none.
	old     []byte
	hadOld  bool
	updated time.Time // the store's update time of the key (the changelog record's timestamp)
	rec     Record[K, V]
}

// tableFlusher is a task's view of a tableUpdates.
type tableFlusher interface {
	nodeID() int
	storeName() string
	commitStaged()
	dropStaged()
	// flush writes the collapsed updates to the changelog and downstream.
	flush() error
	// drop forgets the collapsed updates (their transaction aborted).
	drop()
	pending() int64
	// expired stages the deletion of a key the store's TTL removed.
	expired(key, old []byte, at time.Time) error
}

func newTableUpdates[K, V any](t *task, node int, st *taskStore, every bool, key Codec[K], value Codec[V],
	wantOld func() bool, children []any,
) *tableUpdates[K, V] {
	u := &tableUpdates[K, V]{t: t, node: node, store: st.spec.name, changelog: st.changelog, every: every,
		key: key, value: value, wantOld: wantOld, index: map[string]int{}}
	if len(children) > 0 {
		u.next = fanout[K, V](children)
	}
	t.addFlusher(u)
	return u
}

// addFlusher registers one of the task's flushers, in node order.
func (t *task) addFlusher(f tableFlusher) {
	i, _ := slices.BinarySearchFunc(t.flushers, f.nodeID(), func(f tableFlusher, n int) int { return f.nodeID() - n })
	t.flushers = slices.Insert(t.flushers, i, f)
}

func (u *tableUpdates[K, V]) nodeID() int       { return u.node }
func (u *tableUpdates[K, V]) storeName() string { return u.store }
func (u *tableUpdates[K, V]) pending() int64    { return u.size }

// update records a key's new value (nil: deleted) for the record being
// processed. old is the stored value it replaces (found false: none).
func (u *tableUpdates[K, V]) update(key, value, old []byte, found bool, updated time.Time, rec Record[K, V]) error {
	up := tableUpdate[K, V]{key: key, value: value, old: old, hadOld: found, updated: updated, rec: rec}
	if u.every {
		// Forwarded in the record's processing: its outputs are the
		// record's (pending until it succeeds).
		u.t.emit(u.changelog, u.t.id.partition, key, value, updated, nil)
		return u.forward(&up)
	}
	u.staged = append(u.staged, up)
	return nil
}

func (u *tableUpdates[K, V]) commitStaged() {
	for _, s := range u.staged {
		u.add(s)
	}
	clear(u.staged)
	u.staged = u.staged[:0]
}

// add collapses s into latest: the key keeps the old value of its first
// update since the last flush.
func (u *tableUpdates[K, V]) add(s tableUpdate[K, V]) {
	if i, ok := u.index[string(s.key)]; ok {
		prev := &u.latest[i]
		u.size += int64(len(s.value) - len(prev.value))
		s.old, s.hadOld = prev.old, prev.hadOld
		*prev = s
		return
	}
	u.index[string(s.key)] = len(u.latest)
	u.latest = append(u.latest, s)
	// The entry, its bytes, and the index's copy of the key with its map
	// slot.
	u.size += int64(unsafe.Sizeof(s)) + int64(2*len(s.key)+len(s.value)+len(s.old)) + 48
}

func (u *tableUpdates[K, V]) dropStaged() {
	clear(u.staged)
	u.staged = u.staged[:0]
}

func (u *tableUpdates[K, V]) drop() {
	clear(u.latest)
	u.latest = u.latest[:0]
	clear(u.index)
	u.size = 0
}

// expired stages the deletion of key, whose stored value was old, removed by
// the store's TTL at stream time at. It joins the collapsed updates (or, for
// EveryUpdate, is forwarded at once as its own unit of work).
func (u *tableUpdates[K, V]) expired(key, old []byte, at time.Time) error {
	k, err := u.key.Decode(key)
	if err != nil {
		return fmt.Errorf("store %s: decode expired key: %w", u.store, err)
	}
	// No input record caused it: a failure downstream names the changelog.
	up := tableUpdate[K, V]{key: key, old: old, hadOld: true, updated: at,
		rec: Record[K, V]{Key: k, Timestamp: at, keyEnc: carry(u.key, carries(u.key), key),
			Origin: Origin{Topic: u.changelog, Partition: u.t.id.partition, Offset: -1}}}
	if !u.every {
		u.add(up)
		return nil
	}
	return u.send(&up)
}

// flush writes the collapsed latest update of each key to the changelog and
// passes it downstream, then forgets them. The changelog record is written
// whatever happens downstream (the store holds the value already); a
// downstream failure sends the update to the dead-letter topic, naming the
// record that caused it (its Origin), and the flush goes on.
//
// A key inserted and deleted since the last flush (no old value, no new
// one) is neither in the changelog nor downstream: for both it never
// existed.
func (u *tableUpdates[K, V]) flush() error {
	if len(u.latest) == 0 {
		return nil
	}
	for i := range u.latest {
		up := &u.latest[i]
		if up.value == nil && !up.hadOld {
			continue
		}
		if err := u.send(up); err != nil {
			return err
		}
	}
	u.drop()
	return nil
}

// send writes one update to the changelog and downstream, outside any
// record's processing.
func (u *tableUpdates[K, V]) send(up *tableUpdate[K, V]) error {
	t := u.t
	t.produce(&kgo.Record{Topic: u.changelog, Partition: t.id.partition, Key: up.key, Value: up.value,
		Timestamp: up.updated})
	if u.next == nil {
		return nil
	}
	o := up.rec.Origin
	origin := &kgo.Record{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Key: up.key,
		Value: up.value, Timestamp: up.rec.Timestamp}
	return t.emitTimed(func() error { return u.forward(up) }, origin)
}

// forward passes an update downstream: a deletion as a tombstone record,
// with the old value if a consumer wants it (see Changes).
func (u *tableUpdates[K, V]) forward(up *tableUpdate[K, V]) error {
	if u.next == nil {
		return nil
	}
	r := up.rec
	r.Tombstone = up.value == nil
	if up.hadOld && u.wantOld() {
		old := r.Value
		if !bytes.Equal(up.old, up.value) {
			var err error
			if old, err = u.value.Decode(up.old); err != nil {
				return fmt.Errorf("store %s: decode old value: %w", u.store, err)
			}
		}
		r.old = &old
	}
	return u.next(r)
}

// tableFor returns the task's collapsing buffer of the named store (nil if
// the store has none: a topic's table, or a store of another operator).
func (t *task) tableFor(store string) tableFlusher {
	for _, f := range t.flushers {
		if f.storeName() == store {
			return f
		}
	}
	return nil
}

// tablesPending is the size of the task's collapsed table updates.
func (t *task) tablesPending() int64 {
	var n int64
	for _, f := range t.flushers {
		n += f.pending()
	}
	return n
}

// flushTables flushes the collapsed updates of every table of the task, in
// node order (an update one table forwards may update a table after it,
// which is flushed next).
func (t *task) flushTables() error {
	for _, f := range t.flushers {
		if err := f.flush(); err != nil {
			return err
		}
	}
	return nil
}

// flushTablesEachRound reports whether the task flushes its tables at the
// end of every round: when no App commits it (the Driver), in a bounded run
// (RunBounded: its phases follow what each round wrote, and a window or
// timer closed at the end of the input must have seen every update), or
// when its collapsed updates exceed their bound, collapseBound.
func (t *task) flushTablesEachRound() bool {
	return !t.tablesAtCommit || t.app.bounded != nil || t.tablesPending() > collapseBound(t.app.cfg.storeCache)
}

// collapseBound is the memory a task's collapsed table updates may hold
// (bytes, as tableUpdates counts them): an eighth of the store cache budget
// (StoreCache), 1.25 MiB by default — a few thousand keys. Keys updated
// again and again (counts per category, totals per customer) collapse whole
// within it; a stream of distinct keys, which nothing collapses, is flushed
// every few thousand keys instead of once per commit: holding more cost
// about a fifth of the at-least-once App's CPU per event in the keyed-count
// benchmark (100k distinct keys, same run: 0.37/0.38 of the hand loop with
// 10 MiB, 0.47/0.44 with about 0.3 MiB; noisy).
func collapseBound(storeCache int64) int64 { return storeCache / 8 }

// flushTablesForCommit flushes the tables of tasks before their progress is
// committed (App.commit, and a transaction's commit): the updates go to the
// producer, ahead of the flush that acknowledges every record before the
// commit. Called between rounds (loop goroutine, or a group callback while
// the loop waits for a poll), so no task is running: the tasks flush in
// parallel, on at most workers goroutines (a task is used by one goroutine
// at a time; the producer is safe for concurrent use). Under at-least-once
// the store writes the flush caused downstream are written to the task's
// store at once (as a round's end does); under ExactlyOnce they stay in the
// open transaction.
func flushTablesForCommit(tasks []*task, applyState bool) error {
	var pending []*task
	for _, t := range tasks {
		if t.tablesPending() > 0 {
			pending = append(pending, t)
		}
	}
	flush := func(t *task) error {
		if err := t.flushTables(); err != nil {
			return err
		}
		if applyState {
			if err := t.flushState(); err != nil {
				return err
			}
			t.noteCached()
		}
		return nil
	}
	switch len(pending) {
	case 0:
		return nil
	case 1:
		return flush(pending[0])
	}
	workers := pending[0].app.cfg.workers
	sem := make(chan struct{}, workers)
	errs := make([]error, len(pending))
	var wg sync.WaitGroup
	for i, t := range pending {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = flush(t)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
