package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// task runs one sub-topology for one partition: it consumes that partition
// of every source topic of the sub-topology (see taskID).
//
// Concurrency: a task is driven by one goroutine at a time (a worker during a
// processing round, or the group callbacks between rounds; the two never
// overlap because rebalances are blocked while a round runs). Only the
// produce promises run concurrently; they touch clMu-guarded fields.
type task struct {
	app *App
	id  taskID
	// entries maps a source topic to its source operator's input.
	entries map[string]func(*kgo.Record) error

	db     *state.DB // nil if the task has no stores
	stores []*taskStore

	// next maps a source topic to the offset to commit: one past the last
	// record of the task's partition fully handled (processed, or sent to
	// the DLQ); absent: nothing handled yet. committed holds the offsets
	// last committed; roundNext the value of next when the current round
	// began (restored if the round's transaction aborts).
	next      map[string]kgo.EpochOffset
	committed map[string]int64
	roundNext map[string]kgo.EpochOffset
	// streamTime is the largest event time (ms) seen by the task;
	// roundStart its value when the task joined the open transaction
	// (ExactlyOnce; restored if the transaction aborts).
	streamTime int64
	roundStart int64
	// et tracks the task's watermark (eventtime.go).
	et eventTime

	// txn holds the store writes not yet in the database: those of the
	// current round, or under ExactlyOnce of the open transaction, which
	// may span rounds (flushState writes them); within it, the writes of the record being
	// processed are applied only when the whole record succeeds, as are
	// its outputs (pending), so a retried or dead-lettered record leaves no
	// partial effects.
	txn *state.Txn
	// txnGen counts the ends of txn (committed to the database by
	// flushState, or discarded by abortRound): an operator keeping memory
	// of writes of the open txn (timers, process_timers.go) drops it when
	// txnGen moves.
	txnGen uint64
	// aborts counts abortRound calls: an operator keeping in-memory state
	// derived from the aborted rounds (the windowed operator's watermark)
	// takes it back when aborts moves; one seeing txnGen move tells a
	// commit from an abort by it (join_window.go).
	aborts  uint64
	pending []*kgo.Record
	slab    []kgo.Record  // unused records for emit
	free    []*kgo.Record // records the client is done with, for emit (see recycled)
	// outSlab is what is left of the slab outBytes cuts output bytes from.
	outSlab []byte

	// flushers collapse the updates of the task's aggregate tables between
	// flushes, in node (topological) order; see tableUpdates. timed are
	// its time-driven operators, in node order (timed.go).
	flushers []tableFlusher
	timed    []timedOperator
	// tablesAtCommit: an App runs the task and flushes its tables before
	// each commit (else every round ends with a flush: the Driver).
	tablesAtCommit bool

	m taskMetrics
	// promise is onProduced, bound once (a method value made per produced
	// record would be an allocation per record).
	promise func(*kgo.Record, error)

	clMu sync.Mutex
	// recycled holds records whose produce promise has run (the client
	// no longer uses a record after its promise), when the App's producer
	// is the client (App.recycleRecords); emit takes them back in bulk.
	recycled []*kgo.Record
	// clEnd maps a changelog topic to one past the offset of the last
	// acknowledged changelog record the task wrote (or restored up to).
	clEnd map[string]int64
	// lastCheckpoint is the checkpoint last written, at lastCheckpointAt
	// (processing clock).
	lastCheckpoint   state.Checkpoint
	lastCheckpointAt time.Time

	// Queries read Pebble, not the store cache. Committed writes (of a
	// commit, or an ExactlyOnce transaction) may sit in the cache until the
	// next checkpoint (checkpointDue); a query of the task then asks the
	// loop to flush them (awaitFlush, App.serveFlushes: after the next
	// commit or transaction end), so it still sees every commit.
	// flushMu guards the three fields.
	flushMu     sync.Mutex
	unflushed   bool          // committed writes in the cache, not in Pebble
	flushWanted bool          // a query waits for them
	flushDone   chan struct{} // closed by the next flush
}

// recordSlab is the number of output records emit allocates at once.
const recordSlab = 64

// outSlabSize is the size of the slabs outBytes cuts output keys and values
// from; a larger request gets an allocation of its own.
const (
	outSlabSize = 4096
	outSlabMax  = outSlabSize / 8
)

// maxRecycled bounds the records a task keeps for reuse (about the records
// in flight at once; beyond it they are left to the garbage collector).
const maxRecycled = 8192

// taskStore is a task's handle on one declared store.
type taskStore struct {
	t         *task
	spec      *storeSpec
	changelog string
}

func (a *App) newTask(id taskID) (*task, error) {
	t := &task{app: a, id: id, entries: map[string]func(*kgo.Record) error{},
		next: map[string]kgo.EpochOffset{}, committed: map[string]int64{},
		streamTime: math.MinInt64, clEnd: map[string]int64{}, m: a.metrics.forTask(id.String())}
	t.promise = t.onProduced
	built := map[int]any{}
	var build func(n *node) any
	build = func(n *node) any {
		if v, ok := built[n.id]; ok {
			return v
		}
		children := make([]any, len(n.children))
		for i, c := range n.children {
			children[i] = build(c)
		}
		v := n.build(t, children)
		built[n.id] = v
		return v
	}
	for _, src := range a.subs[id.sub].sources {
		t.entries[a.topicOf(src)] = build(src.node).(func(*kgo.Record) error)
	}
	if len(t.stores) > 0 {
		dir := a.taskDir(id)
		opts := []state.Option{state.CacheBytes(a.cfg.storeCache)}
		for _, s := range t.stores {
			opts = append(opts, storeOptions(s.spec)...)
		}
		db, err := state.Open(dir, a.cfg.logger.With("task", id.String()), opts...)
		if err != nil {
			// The local store is a cache of the changelogs: drop an
			// unopenable one and rebuild it.
			a.cfg.logger.Warn("local store unusable; deleting it, it will be restored from the changelogs",
				"task", id.String(), "dir", dir, "err", err)
			if rerr := os.RemoveAll(dir); rerr != nil {
				return nil, fmt.Errorf("task %s: %w (and removing it: %v)", id, err, rerr)
			}
			if db, err = state.Open(dir, a.cfg.logger.With("task", id.String()), opts...); err != nil {
				return nil, fmt.Errorf("task %s: %w", id, err)
			}
		}
		t.db = db
	}
	if err := t.initEventTime(); err != nil {
		t.close()
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return t, nil
}

// storeOptions declares a store to state.Open: its TTL, which sizes the
// store's TTL index buckets (a table's store has none: the exact index). A
// windowed store (a windowed aggregation's, a stream join's) has no TTL and
// no TTL index: its windows are deleted when the watermark passes them,
// found by its own close index — which the database derives for some
// (indexedByDB). A task and a standby of it open the same directory with
// the same declarations.
func storeOptions(spec *storeSpec) []state.Option {
	if spec.window != "" {
		if spec.indexedByDB() {
			return []state.Option{state.NoTTLIndex(spec.name), state.Derived(spec.name, spec.closeIndex())}
		}
		return []state.Option{state.NoTTLIndex(spec.name)}
	}
	if spec.table {
		return []state.Option{state.StoreTTL(spec.name, 0)}
	}
	return []state.Option{state.StoreTTL(spec.name, spec.ttl)}
}

// store returns the task's handle on the named store (called while the
// task's operators are instantiated).
func (t *task) store(name string) *taskStore {
	for _, s := range t.stores {
		if s.spec.name == name {
			return s
		}
	}
	spec := t.app.storeSpec(name)
	s := &taskStore{t: t, spec: spec, changelog: t.app.storeChangelog(spec)}
	t.stores = append(t.stores, s)
	return s
}

func (s *taskStore) get(key []byte) ([]byte, bool, error) {
	v, _, found, err := s.t.txn.Get(s.spec.name, key)
	return v, found, err
}

func (s *taskStore) put(key, value []byte, ts time.Time) error {
	updated, err := s.t.txn.Put(s.spec.name, key, value, ts.UnixMilli())
	if err != nil {
		return fmt.Errorf("store %s: %w", s.spec.name, err)
	}
	s.t.emit(s.changelog, s.t.id.partition, key, value, time.UnixMilli(updated), nil)
	return nil
}

// observe advances the task's stream time with a record's event time, and
// the watermark of the input the record came from.
func (t *task) observe(ts time.Time) {
	ms := ts.UnixMilli()
	if ms > t.streamTime {
		t.streamTime = ms
	}
	t.et.tracker.Observe(t.et.cur, ms)
}

// emit queues an output of the record being processed. partition -1 means
// "by key" (murmur2, Java-compatible).
func (t *task) emit(topic string, partition int32, key, value []byte, ts time.Time, headers []Header) {
	r := t.newRecord()
	*r = kgo.Record{Topic: topic, Partition: partition, Key: key, Value: value, Timestamp: ts}
	if len(headers) > 0 {
		r.Headers = make([]kgo.RecordHeader, len(headers))
		for i, h := range headers {
			r.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	t.pending = append(t.pending, r)
}

// produce hands a record to the client. Errors are collected by the App:
// a failed output is fatal, because its input must not be committed.
func (t *task) produce(r *kgo.Record) {
	t.app.producer(r, t.promise)
	t.app.metrics.recordsOut.Inc()
	t.m.out.Inc()
}

func (t *task) onProduced(r *kgo.Record, err error) {
	switch {
	case errors.Is(err, kgo.ErrAborting):
		// an aborted transaction's record (ExactlyOnce): redone, not lost
	case err != nil:
		t.app.fail(fmt.Errorf("task %s: produce to %s: %w", t.id, r.Topic, err))
	case r.Partition == t.id.partition && t.isChangelog(r.Topic):
		t.clMu.Lock()
		if r.Offset+1 > t.clEnd[r.Topic] {
			t.clEnd[r.Topic] = r.Offset + 1
		}
		t.clMu.Unlock()
	}
	t.recycle(r)
}

// outBytes returns an empty slice of capacity n for a sink to append an
// output key or value to: cut from a slab (one allocation per outSlabSize
// bytes), or its own allocation for more than outSlabMax bytes. The
// capacity is exactly n, so an append past it moves rather than writes
// over the next record's bytes. A slab is never reused: its bytes stay
// valid for as long as anything (the client, a test's producer) retains a
// record holding them, and the collector frees it after the last. The
// slice is never nil, even empty.
func (t *task) outBytes(n int) []byte {
	if n == 0 {
		// Not nil, as Encode's (an empty key or value is not a null one).
		return []byte{}
	}
	if n > outSlabMax {
		return make([]byte, 0, n)
	}
	if len(t.outSlab) < n {
		t.outSlab = make([]byte, outSlabSize)
	}
	b := t.outSlab[:0:n]
	t.outSlab = t.outSlab[n:]
	return b
}

// newRecord returns an unused record for emit: a recycled one, or one from a
// slab (one allocation per recordSlab records). A slab is never reused as a
// whole; its records are, one by one, once the client is done with them.
func (t *task) newRecord() *kgo.Record {
	if len(t.free) == 0 && t.app.recycleRecords.Load() {
		t.clMu.Lock()
		t.free, t.recycled = t.recycled, t.free[:0]
		t.clMu.Unlock()
	}
	if n := len(t.free); n > 0 {
		r := t.free[n-1]
		t.free = t.free[:n-1]
		return r
	}
	if len(t.slab) == 0 {
		t.slab = make([]kgo.Record, recordSlab)
	}
	r := &t.slab[0]
	t.slab = t.slab[1:]
	return r
}

// recycle keeps r, whose promise has run, for newRecord. Only records of a
// real client are recycled: a test producer or the Driver keeps the records
// it is given.
func (t *task) recycle(r *kgo.Record) {
	if !t.app.recycleRecords.Load() {
		return
	}
	*r = kgo.Record{} // outside the lock: the task's emit waits on it
	t.clMu.Lock()
	if len(t.recycled) < maxRecycled {
		t.recycled = append(t.recycled, r)
	}
	t.clMu.Unlock()
}

// isChangelog reports whether topic is the changelog of one of the task's
// stores the task writes (a table's source topic is not: the task only
// reads it).
func (t *task) isChangelog(topic string) bool {
	for _, s := range t.stores {
		if s.changelog == topic && !s.spec.table {
			return true
		}
	}
	return false
}

// handle processes one input record to completion: success, or the DLQ. It
// returns an error only when the task cannot go on (local store failure, or
// ctx done during a retry backoff — then the record is not marked handled).
func (t *task) handle(ctx context.Context, kr *kgo.Record) error {
	entry, ok := t.entries[kr.Topic]
	if !ok {
		return fmt.Errorf("task %s: record of %s, not a source of its sub-topology", t.id, kr.Topic)
	}
	if len(kr.Headers) > 0 && t.handleMarker(kr) {
		return nil
	}
	t.et.cur = t.et.inputs[kr.Topic]
	var first, last time.Time
	for attempt := 1; ; attempt++ {
		err := t.attempt(entry, kr)
		if err == nil {
			break
		}
		var fatal *fatalError
		if errors.As(err, &fatal) {
			return fatal.err
		}
		now := t.app.cfg.clock.Now()
		if first.IsZero() {
			first = now
		}
		last = now
		if !t.app.retryable(err, attempt) {
			t.deadLetter(kr, err, attempt, first, last)
			break
		}
		t.app.cfg.logger.Debug("processing failed; retrying", "task", t.id.String(), "offset", kr.Offset,
			"attempt", attempt, "err", err)
		t.app.metrics.retries.Inc()
		if err := t.app.cfg.clock.Sleep(ctx, t.app.backoff(attempt)); err != nil {
			return err
		}
	}
	t.next[kr.Topic] = kgo.EpochOffset{Epoch: kr.LeaderEpoch, Offset: kr.Offset + 1}
	t.app.metrics.recordsIn.Inc()
	t.m.in.Inc()
	return nil
}

// fatalError marks a failure of the runtime (not of user code): it stops the
// App instead of being retried.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

// attempt runs the record through the sub-topology once. On success the
// record's store writes are applied to the round's batch and its outputs
// produced; on failure both are dropped.
func (t *task) attempt(entry func(*kgo.Record) error, kr *kgo.Record) (err error) {
	t.pending = t.pending[:0]
	if t.db != nil && t.txn == nil {
		t.txn = t.db.Begin()
	}
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
		if err != nil {
			if t.txn != nil {
				t.txn.Rollback()
			}
			clear(t.pending)
			t.pending = t.pending[:0]
			for _, f := range t.flushers {
				f.dropStaged()
			}
		}
	}()
	if err := entry(kr); err != nil {
		return err
	}
	if t.txn != nil {
		if err := t.txn.Apply(); err != nil {
			return &fatalError{fmt.Errorf("task %s: local store: %w", t.id, err)}
		}
	}
	for _, f := range t.flushers {
		f.commitStaged()
	}
	for _, r := range t.pending {
		t.produce(r)
	}
	clear(t.pending)
	t.pending = t.pending[:0]
	return nil
}

// flushState writes the store changes of the records handled since the last
// call to the local database (unsynced). Called at the end of each
// processing round, before expiry and before any checkpoint.
func (t *task) flushState() error {
	if t.txn == nil {
		return nil
	}
	err := t.txn.Commit()
	t.txn.Discard()
	t.txn = nil
	t.txnGen++
	if err != nil {
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	return nil
}

// PanicError is a panic recovered from user code; it is handled like a
// returned error (retried, then dead-lettered).
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// endBatch ends the task's part of a processing round: the watermark
// advances, then in node order its time-driven operators act on the
// watermark and clock (timed.go) and, if the task flushes its tables this
// round (flushTablesEachRound), its tables' collapsed updates go to their
// changelogs and downstream (see tableUpdates); then expired keys are
// removed (their deletions join the collapsed updates, flushed then too).
// Called after the batch's last record (also of an empty batch, a tick),
// before any commit.
func (t *task) endBatch() error {
	wm := t.advanceWatermark() // the end of the task's part of the round
	if t.app.boundedEnd(t.id.sub) {
		wm = math.MaxInt64 // a bounded run past its input (bounded.go)
	}
	flush := t.flushTablesEachRound()
	if err := t.endOperators(wm, t.app.cfg.clock.Now(), flush); err != nil {
		return err
	}
	if err := t.expire(1000); err != nil {
		return err
	}
	if flush {
		return t.flushTables()
	}
	return nil
}

// expire removes keys whose TTL passed in stream time, writing a tombstone to
// the changelog for each. At most limit keys per store per call bound the
// work; the rest go on the next call.
func (t *task) expire(limit int) error {
	if t.db == nil || t.streamTime == math.MinInt64 {
		return nil
	}
	if t.txn == nil {
		t.txn = t.db.Begin()
	}
	for _, s := range t.stores {
		if s.spec.table || s.spec.ttl == 0 {
			continue // bounded by its compacted source topic (never written), or NoExpiry
		}
		before := t.streamTime - s.spec.ttl.Milliseconds()
		keys, err := t.db.Expired(s.spec.name, before, limit)
		if err != nil || len(keys) == 0 {
			if err != nil {
				return fmt.Errorf("task %s: expire %s: %w", t.id, s.spec.name, err)
			}
			continue
		}
		// The deletes join the round's writes: applied with them (under
		// ExactlyOnce only if the transaction commits). The index read
		// is the database's: a key updated (or deleted) by writes not
		// yet committed is judged by its pending state instead.
		live := keys[:0]
		var olds [][]byte
		for _, k := range keys {
			old, ts, found, err := t.txn.Get(s.spec.name, k)
			if err != nil {
				return fmt.Errorf("task %s: expire %s: %w", t.id, s.spec.name, err)
			}
			if !found || ts >= before {
				continue
			}
			if err := t.txn.Delete(s.spec.name, k); err != nil {
				return fmt.Errorf("task %s: expire %s: %w", t.id, s.spec.name, err)
			}
			live = append(live, k)
			olds = append(olds, slices.Clone(old))
		}
		keys = live
		if err := t.txn.Apply(); err != nil {
			return fmt.Errorf("task %s: expire %s: %w", t.id, s.spec.name, err)
		}
		// A table's deletions go through its collapsed updates: to the
		// changelog and downstream (Table.ToStream forwards them), in
		// order with the key's other updates.
		at := time.UnixMilli(t.streamTime)
		if tbl := t.tableFor(s.spec.name); tbl != nil {
			for i, k := range keys {
				if err := tbl.expired(k, olds[i], at); err != nil {
					return err
				}
			}
		} else {
			for _, k := range keys {
				t.produce(&kgo.Record{Topic: s.changelog, Partition: t.id.partition, Key: k, Timestamp: at})
			}
		}
		t.app.metrics.expired.Add(float64(len(keys)))
	}
	return nil
}

// checkpoint records, with a synced write, the changelog offsets the local
// stores cover. Call only after a flush: every changelog record produced
// before it is acknowledged.
func (t *task) checkpoint() error {
	if t.db == nil {
		return nil
	}
	cp := state.Checkpoint{}
	t.clMu.Lock()
	for _, s := range t.stores {
		if end, ok := t.clEnd[s.changelog]; ok {
			cp[s.spec.name] = end
		}
	}
	t.clMu.Unlock()
	if len(cp) != len(t.stores) {
		return nil // some store has neither been restored nor written: nothing to claim
	}
	staged, err := t.stageWatermark()
	if err != nil {
		return err
	}
	if maps.Equal(cp, t.lastCheckpoint) && !staged {
		return nil // unchanged: spare the synced write
	}
	if err := t.db.WriteCheckpoint(cp); err != nil {
		return err
	}
	t.lastCheckpoint = cp
	t.lastCheckpointAt = t.app.cfg.clock.Now()
	return nil
}

// defaultCheckpointInterval is how often a task writes its local checkpoint
// at most, at the commits (at-least-once) or transaction ends (ExactlyOnce)
// that follow. A checkpoint writes the store cache's dirty keys to Pebble
// and syncs; the cache holds a key's latest state, so the longer between
// checkpoints, the more updates of a key become one write (Kafka Streams
// likewise checkpoints only when it would cover enough:
// OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT, with a 30s at-least-once commit
// interval). The cost is a longer changelog tail to replay after a crash:
// what a task wrote since its last checkpoint, at most this long plus one
// commit interval. A task's first checkpoint (after its restore) and its
// checkpoint when it is handed over or closed are always written. Measured
// on the 1M keyed count at-least-once (2 runs x 3 rounds, commit interval =
// checkpoint cadence): 1s 0.507, 2s 0.563, 5s 0.587 of the hand loop's
// events per CPU-second; under ExactlyOnce a checkpoint after every 100ms
// transaction instead of every second cost ~25% of the App's CPU.
const defaultCheckpointInterval = 2 * time.Second

// checkpointDue reports whether a periodic commit or a transaction end
// should write the task's local checkpoint: checkpointInterval passed since
// the last one, or it has none yet.
func (t *task) checkpointDue() bool {
	if t.db == nil {
		return false
	}
	return len(t.lastCheckpoint) == 0 || t.app.cfg.clock.Now().Sub(t.lastCheckpointAt) >= t.app.cfg.checkpointInterval
}

// noteFlushed records, after a commit or transaction end, whether committed
// writes sit in the task's store cache (then queries ask the loop to flush
// them) or Pebble holds them all (queries answer at once). Loop goroutine:
// no round runs.
func (t *task) noteFlushed() {
	if !t.noteCached() {
		t.markFlushed()
	}
}

// noteCached marks the task unflushed if its store cache holds writes
// Pebble does not, and reports whether it does. At-least-once calls it after
// each round as well (outputs are visible before their commit, so a query
// must see the round's writes too). Task goroutine, or the loop's between
// rounds.
func (t *task) noteCached() bool {
	if t.db == nil || !t.db.Unflushed() {
		return false
	}
	t.markUnflushed()
	return true
}

// markUnflushed notes that committed writes may sit outside Pebble, so
// queries of the task wait for a flush. Any goroutine.
func (t *task) markUnflushed() {
	t.flushMu.Lock()
	t.unflushed = true
	t.flushMu.Unlock()
}

// markFlushed notes that Pebble holds every committed write (loop
// goroutine, after a checkpoint or a flush) and releases waiting queries.
func (t *task) markFlushed() {
	t.flushMu.Lock()
	if t.flushWanted {
		t.app.flushRequests.Add(-1)
	}
	t.unflushed, t.flushWanted = false, false
	if t.flushDone != nil {
		close(t.flushDone)
		t.flushDone = nil
	}
	t.flushMu.Unlock()
}

// awaitFlush returns nil if Pebble holds every committed write of the task,
// else a channel closed once the loop has flushed them (requested here).
// Any goroutine.
func (t *task) awaitFlush() <-chan struct{} {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	if !t.unflushed {
		return nil
	}
	if !t.flushWanted {
		t.flushWanted = true
		t.app.flushRequests.Add(1)
		t.app.wakeForFlush()
	}
	if t.flushDone == nil {
		t.flushDone = make(chan struct{})
	}
	return t.flushDone
}

// flushIfWanted writes the cache's committed writes to Pebble if a query
// waits for them. Loop goroutine, between transactions.
func (t *task) flushIfWanted() error {
	t.flushMu.Lock()
	wanted := t.flushWanted
	t.flushMu.Unlock()
	if !wanted || t.db == nil {
		return nil
	}
	if err := t.db.Flush(); err != nil {
		return fmt.Errorf("task %s: flush for a query: %w", t.id, err)
	}
	t.markFlushed()
	return nil
}

// abortRound drops the store writes of an aborted transaction (all its
// rounds) and takes the watermark back to where the task joined it; the
// records are fetched and processed again.
func (t *task) abortRound() {
	for _, f := range t.flushers {
		f.drop() // the collapsed updates of the aborted writes
	}
	if t.txn != nil {
		t.txn.Discard()
		t.txn = nil
	}
	t.txnGen++
	t.aborts++
	t.streamTime = t.roundStart
	t.rollbackWatermark()
	if t.roundNext != nil {
		t.next = t.roundNext
		t.roundNext = nil
	}
}

// beginRound notes the task's position (stream time, input offsets) when it
// joins the open transaction, for abortRound.
func (t *task) beginRound() {
	t.roundStart = t.streamTime
	t.roundNext = maps.Clone(t.next)
	t.snapshotWatermark()
}

// tablesCovered records that the task's table stores hold their source
// topics up to the given offsets (committed input offsets): the table's
// checkpoint, since the source topic is its changelog.
func (t *task) tablesCovered(offsets map[string]int64) {
	t.clMu.Lock()
	defer t.clMu.Unlock()
	for _, s := range t.stores {
		if !s.spec.table {
			continue
		}
		if o, ok := offsets[s.changelog]; ok && o > t.clEnd[s.changelog] {
			t.clEnd[s.changelog] = o
		}
	}
}

func (t *task) close() error {
	t.app.metrics.dropTask(t.id.String())
	t.markFlushed() // releases waiting queries: they find the task gone
	if t.db == nil {
		return nil
	}
	if t.txn != nil {
		t.txn.Discard()
		t.txn = nil
	}
	return t.db.Close()
}
