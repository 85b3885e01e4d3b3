package stream

import (
	"bytes"
	"slices"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
)

// storeChangelog collapses the changelog writes of a store between flushes,
// as tableUpdates does for a table and Kafka Streams' caching window store
// does for its windows: a key written many times between two flushes gets
// one changelog record, its latest value or a tombstone, written by the
// flush; a key created and deleted between two flushes, whose creation never
// reached the changelog, gets none. The store itself is written at once
// (every record, scan and query sees the latest state); only its changelog
// records wait. Nothing goes downstream: the store's operator emits its
// results itself.
//
// It is one of the task's flushers (tableFlusher), so it is flushed when
// tables are: before every commit of input offsets (at-least-once) and
// before every transaction commits, inside it (ExactlyOnce); at the end of a
// round in which the task's collapsed updates exceed collapseBound; at the
// end of every round of a task no App commits (the Driver) or of a bounded
// run — after its operator's time-driven work of the round (endOperators
// runs a timed operator before a flusher of the same node). An abort drops
// what it holds (drop), with the transaction's store writes.
//
// Invariant: every committed input offset is covered by changelog records
// that, replayed in order, give each key of the store its value when the
// offset's record was handled (or later): nothing is collapsed across a
// commit, and a key whose last flushed record is a live value gets a
// tombstone when it is deleted.
//
// Order within a flush: a flush writes its records in phases given by the
// store's phase function (keys of one phase in the order of their first
// write since the last flush), so that a store whose keys depend on one
// another (a window and its close-index entry) keeps, in every prefix of
// the changelog a crash may leave, what its operator's invariants require;
// see window_agg.go.
type storeChangelog struct {
	t         *task
	node      int
	store     string
	changelog string
	// phase returns the flush phase (0 to changelogPhases-1) of a write of
	// key (deleted: a tombstone), or -1 if the key is not logged at all (a
	// restore derives it from other keys); nil: every write is of phase 0.
	phase func(key []byte, deleted bool) int

	// staged: the writes of the record being processed, kept only if it
	// succeeds (commitStaged).
	staged []changelogWrite
	// latest: the collapsed write per key since the last flush, in the order
	// of each key's first write. A key's slot is found from the note on
	// its store cache entry (state.Txn.Note: slot+1), or, for a key whose
	// phase depends on whether it is deleted (or with the cache disabled:
	// its notes do not outlive a round, state.DB.Caching),
	// from index, which maps a key (a string sharing the bytes of the
	// write's key, which its writer no longer modifies) to its slot.
	//
	// A note is lost when the cache drops the entry: the key's next write
	// then takes a new slot, and a flush writes both, in slot order, which
	// is write order — the phases of such a key's writes are all the same
	// — so the later record has the last word. A slot's logged stays right
	// too: a key created again (created) was deleted in between, and that
	// deletion is in an earlier slot, a tombstone if anything was logged.
	latest []changelogWrite
	index  map[string]int
	size   int64 // bytes held by latest, as collapseBound counts them
}

// changelogPhases is the number of flush phases.
const changelogPhases = 4

type changelogWrite struct {
	key, value []byte // value nil: deleted
	ts         int64  // the write's time: its changelog record's timestamp (ms)
	// logged: the changelog may hold a live value of the key from before
	// the last flush, so a deletion needs its tombstone.
	logged bool
}

// changelogWriteSize is what collapseBound counts for one collapsed key
// beyond its bytes: the entry and its index slot; changelogNotedSize for
// one found by its note (no index slot).
const (
	changelogWriteSize = changelogNotedSize + 48
	changelogNotedSize = int64(unsafe.Sizeof(changelogWrite{}))
)

// newStoreChangelog registers the collapsed changelog of store st for the
// operator of node, as one of the task's flushers.
func newStoreChangelog(t *task, node int, st *taskStore, phase func([]byte, bool) int) *storeChangelog {
	c := &storeChangelog{t: t, node: node, store: st.spec.name, changelog: st.changelog, phase: phase,
		index: map[string]int{}}
	t.addFlusher(c)
	return c
}

func (c *storeChangelog) nodeID() int       { return c.node }
func (c *storeChangelog) storeName() string { return c.store }
func (c *storeChangelog) pending() int64    { return c.size }

// write records a write of the record being processed: value nil deletes
// key. created says the key did not exist in the store before this write
// (then no changelog record can hold a live value of it, unless one is
// collapsed here already). The changelog keeps key and value: the caller
// must not modify them afterwards.
func (c *storeChangelog) write(key, value []byte, ts int64, created bool) {
	if c.phase != nil && c.phase(key, value == nil) < 0 {
		return
	}
	c.staged = append(c.staged, changelogWrite{key: key, value: value, ts: ts, logged: !created})
}

// writeNow records a write done outside any record's processing (a
// window's close, an early firing, the operator's watermark mark): its
// store write is applied already.
func (c *storeChangelog) writeNow(key, value []byte, ts int64, created bool) {
	if c.phase != nil && c.phase(key, value == nil) < 0 {
		return
	}
	c.add(changelogWrite{key: key, value: value, ts: ts, logged: !created})
}

func (c *storeChangelog) commitStaged() {
	for _, w := range c.staged {
		c.add(w)
	}
	clear(c.staged)
	c.staged = c.staged[:0]
}

func (c *storeChangelog) dropStaged() {
	clear(c.staged)
	c.staged = c.staged[:0]
}

// add collapses w into latest: the key keeps its slot and whether it was
// logged before its first write since the last flush.
func (c *storeChangelog) add(w changelogWrite) {
	if n := len(c.latest); n > 0 && sameSlice(c.latest[n-1].key, w.key) {
		// The key of the last write (a window's creation, then its
		// value): no index lookup.
		prev := &c.latest[n-1]
		c.size += int64(len(w.value) - len(prev.value))
		w.logged = prev.logged
		*prev = w
		return
	}
	if note := c.note(w.key); note != nil {
		if i := int(*note) - 1; i >= 0 && i < len(c.latest) && bytes.Equal(c.latest[i].key, w.key) {
			prev := &c.latest[i]
			c.size += int64(len(w.value) - len(prev.value))
			w.logged = prev.logged
			*prev = w
			return
		}
		*note = uint32(len(c.latest) + 1)
		c.latest = append(c.latest, w)
		c.size += changelogNotedSize + int64(len(w.key)+len(w.value))
		return
	}
	if i, ok := c.index[unsafe.String(unsafe.SliceData(w.key), len(w.key))]; ok {
		prev := &c.latest[i]
		c.size += int64(len(w.value) - len(prev.value))
		w.logged = prev.logged
		// The index's string shares prev.key's bytes: keep them.
		w.key = prev.key
		*prev = w
		return
	}
	c.index[unsafe.String(unsafe.SliceData(w.key), len(w.key))] = len(c.latest)
	c.latest = append(c.latest, w)
	c.size += changelogWriteSize + int64(len(w.key)+len(w.value))
}

// note returns key's note in the store cache (see latest), or nil if the
// key's slot is kept in index.
func (c *storeChangelog) note(key []byte) *uint32 {
	txn := c.t.txn
	if txn == nil || !c.t.db.Caching() || c.phase != nil && c.phase(key, true) != c.phase(key, false) {
		return nil
	}
	n, err := txn.Note(c.store, key)
	if err != nil {
		return nil
	}
	return n
}

// sameSlice reports whether a and b are the same bytes (not only equal).
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

func (c *storeChangelog) drop() {
	clear(c.latest)
	c.latest = c.latest[:0]
	clear(c.index)
	c.size = 0
}

// expired records the deletion of a key the store's TTL removed.
func (c *storeChangelog) expired(key, _ []byte, at time.Time) error {
	c.add(changelogWrite{key: key, ts: at.UnixMilli(), logged: true})
	return nil
}

// flush writes the collapsed writes to the changelog, phase by phase, and
// forgets them. A deletion of a key not logged is written nowhere.
func (c *storeChangelog) flush() error {
	if len(c.latest) == 0 {
		return nil
	}
	t := c.t
	for p := range changelogPhases {
		for i := range c.latest {
			w := &c.latest[i]
			if w.value == nil && !w.logged {
				continue
			}
			if c.phase != nil && c.phase(w.key, w.value == nil) != p || c.phase == nil && p > 0 {
				continue
			}
			r := t.newRecord()
			*r = kgo.Record{Topic: c.changelog, Partition: t.id.partition, Key: w.key, Value: w.value,
				Timestamp: time.UnixMilli(w.ts)}
			t.produce(r)
		}
	}
	c.drop()
	return nil
}

// records is how many changelog records a flush would write now (tests).
func (c *storeChangelog) records() int {
	n := 0
	for _, w := range c.latest {
		if w.value != nil || w.logged {
			n++
		}
	}
	return n
}

// windowChangelogPhase is the flush phase of a window store's write (see
// window_agg.go's invariants): a new index entry before the windows, a
// deleted one after them, the watermark mark last.
func windowChangelogPhase(key []byte, deleted bool) int {
	if len(key) == 0 {
		return 1
	}
	switch key[0] {
	case timekey.TagIndex, tagRetained:
		if deleted {
			return 2
		}
		return 0
	case tagMark:
		return 3
	}
	return 1
}

// derivesCloseIndex reports whether a windowed store's close index ('c'
// entries) is kept out of its changelog and derived from its windows by a
// restore (applyStoreChangelog): when the store can hold no retained
// window ('r': Retain, LateUpdates, sliding windows). Per window, its 'c'
// entries are exactly its 'w' entries' (a window is open from its creation
// to its close, which deletes both). In pane layout (window_pane.go) a 'w'
// entry is a pane, and the restore sets the entry of every window holding
// it: a superset of the open windows' entries whose extra entries are of
// windows that closed while a later pane of the key outlived them — all at
// or below the store's mark, which the operator deletes unread
// (windowOp.closedBy). In the row form of the pane layout
// (window_pane_row.go) a row's one entry follows the row's next window
// (applyRowChangelog).
func (s *storeSpec) derivesCloseIndex() bool {
	return s.win != nil && s.win.retain == 0 && s.win.late.kind != lateUpdates
}

// indexedByDB reports whether a windowed store's close index is derived
// by its database (state.Derived, closeIndex) from its windows or rows, in
// Pebble only: a store of time windows (tumbling, hopping, calendar) not in
// pane layout, or in the row form of the pane layout (window_pane_row.go),
// whose index a restore derives (derivesCloseIndex: every store in row
// form, the pane layout having no Retain). Its
// operator writes and deletes the windows alone — the open windows cost the
// store cache one entry each, not two — and finds those not yet in Pebble
// in its notes, as before; its changelog holds no index records (nor did
// it before, derivesCloseIndex), and a restore writes none (the database
// derives them when it writes the windows).
func (s *storeSpec) indexedByDB() bool {
	return s.derivesCloseIndex() && s.win.kind == "time" && (s.win.pane == 0 || s.win.rows)
}

// closeIndex is the close index the database derives for a store indexed
// by it (indexedByDB): from its windows, or in row form from its rows
// (rowCloseIndex).
func (s *storeSpec) closeIndex() state.DerivedIndex {
	if s.win.rows {
		return rowCloseIndex(s.win.tw.Size.Milliseconds())
	}
	return windowCloseIndex
}

// windowCloseIndex derives a window's close index entry from its window
// key: 'w' | key | end | start gives 'c' | end | key | start (the same
// bytes rearranged: timekey's layouts), with value indexValue.
var windowCloseIndex = state.DerivedIndex{
	Of: func(dst, wk []byte, _ int64) []byte {
		if len(wk) < 1+2*timekey.TimeSize+1 || wk[0] != timekey.TagWindow {
			return dst // not a window (the mark)
		}
		n := len(wk)
		dst = append(dst, timekey.TagIndex)
		dst = append(dst, wk[n-2*timekey.TimeSize:n-timekey.TimeSize]...)
		dst = append(dst, wk[1:n-2*timekey.TimeSize]...)
		return append(dst, wk[n-timekey.TimeSize:]...)
	},
	Holds: func(key []byte) bool { return len(key) > 0 && key[0] == timekey.TagIndex },
	Value: indexValue,
}

// windowChangelogPhaseDerived is windowChangelogPhase for a store whose
// close index a restore derives: its index entries are not logged.
func windowChangelogPhaseDerived(key []byte, deleted bool) int {
	if len(key) > 0 && key[0] == timekey.TagIndex {
		return -1
	}
	return windowChangelogPhase(key, deleted)
}

// paneChangelogPhaseDerived is paneChangelogPhase for a store in pane
// layout whose close index a restore derives: its index entries are not
// logged.
func paneChangelogPhaseDerived(key []byte, deleted bool) int {
	if len(key) > 0 && key[0] == timekey.TagIndex {
		return -1
	}
	return paneChangelogPhase(key, deleted)
}

// applyStoreChangelog applies one changelog record of the store spec
// describes (a restore, a standby): the record itself, and for a store
// whose close index is derived (derivesCloseIndex) the index entry of a
// window record — set with the window, deleted with it, at the window's
// time. Applied in order, a prefix of the changelog then gives every window
// its index entry. A changelog written before the index was derived holds
// the index records too; they set what the derivation sets. A store whose
// database derives its index (indexedByDB) gets neither: the database
// writes a window's entry with it.
func applyStoreChangelog(txn *state.Txn, spec *storeSpec, r *kgo.Record) error {
	if spec.win != nil && spec.win.rows {
		return applyRowChangelog(txn, spec, r)
	}
	if spec.indexedByDB() && len(r.Key) > 0 && r.Key[0] == timekey.TagIndex {
		return nil // an index record of an older changelog: the database derives it
	}
	if err := applyChangelog(txn, spec.name, r); err != nil {
		return err
	}
	if !spec.derivesCloseIndex() || spec.indexedByDB() || len(r.Key) == 0 || r.Key[0] != timekey.TagWindow {
		return nil
	}
	key, start, end, err := timekey.ParseWindowKey(r.Key)
	if err != nil {
		return &state.CorruptionError{Store: spec.name, Key: slices.Clone(r.Key), Reason: err.Error()}
	}
	if spec.win.pane > 0 {
		// A pane: the entries of the windows holding it. Deleted, its last
		// window closed, and so had every window holding it (windows close
		// in end order).
		for _, w := range spec.win.tw.AssignTo(nil, start) {
			ik := timekey.IndexKey(nil, key, w.Start, w.End)
			if r.Value == nil {
				err = txn.Delete(spec.name, ik)
			} else {
				_, err = txn.Put(spec.name, ik, indexValue, w.End-1)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	ik := timekey.IndexKey(nil, key, start, end)
	if r.Value == nil {
		return txn.Delete(spec.name, ik)
	}
	_, err = txn.Put(spec.name, ik, indexValue, r.Timestamp.UnixMilli())
	return err
}
