package stream

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/window"
)

// JoinWindows bounds a stream-stream join in event time (Kafka Streams'
// JoinWindows, Flink's interval join): a left record at time t joins every
// right record of the same key whose time is in [t - Before, t + After],
// both ends inclusive — so a right record at t' joins the left records in
// [t' - After, t' + Before]. Before and After may be negative (an interval
// that does not contain t) as long as Before + After >= 0.
//
// Grace is the allowed lateness, as a windowed store's: a record is late
// when the task's watermark has passed its time + Grace (watermark > t +
// Grace), and goes to the join's late policy. A record's own join window
// closes when the watermark passes the last time a record joining it may
// have: a left record's at t + After + Grace, a right record's at t +
// Before + Grace. Until then it is buffered; then a left (or outer) join
// emits it unmatched if nothing joined it, and it is deleted. All times are
// whole milliseconds.
type JoinWindows struct {
	Before, After time.Duration
	Grace         time.Duration
}

// JoinStore declares the store of a stream-stream join and what happens to
// its late records.
type JoinStore struct {
	// Name of the store, unique in the topology; it names the changelog
	// "<app>-<name>-changelog" and, for an input whose key changed, the
	// repartition topics "<app>-<name>-left-repartition" and
	// "<app>-<name>-right-repartition".
	Name string
	// Late is what happens to a late record: DropLate, LateToTopic (the
	// record as it came, encoded by its side's codecs, with the late
	// headers and HeaderLateJoinSide) or LateToDLQ. Required. LateUpdates
	// is for windowed aggregations only: a join result is never corrected.
	Late LatePolicy
}

// HeaderLateJoinSide names the side ("left" or "right") of a late record a
// stream-stream join wrote with LateToTopic or LateToDLQ. The record's
// HeaderLateWindowStart and HeaderLateWindowEnd are its join window: the
// other side's times it would have joined, end exclusive.
const HeaderLateJoinSide = "weir.late.join.side"

// StreamJoinOpt gives the codecs a stream-stream join buffers its records
// with (and repartitions an input whose key changed with); see JoinCodecs.
type StreamJoinOpt[K, V1, V2 any] struct {
	key   Codec[K]
	left  Codec[V1]
	right Codec[V2]
}

// JoinCodecs overrides the inferred codecs (InferCodec) of a stream-stream
// join's key and of its left and right values. A nil codec keeps the
// inferred one.
func JoinCodecs[K, V1, V2 any](key Codec[K], left Codec[V1], right Codec[V2]) StreamJoinOpt[K, V1, V2] {
	return StreamJoinOpt[K, V1, V2]{key: key, left: left, right: right}
}

// JoinStreams joins two streams on their key within the time bound w
// (Kafka Streams' KStream-KStream join, inner): for every pair of a left and
// a right record of the same key whose times are within w, it emits
// fn(key, left value, right value) with the key, the later of the two
// times, and the headers and origin of the record that arrived second.
// Records arriving out of order are joined as long as they are not late
// (see JoinWindows).
//
// Both inputs are buffered in the store named by store (one Pebble store
// per task, with its changelog "<app>-<name>-changelog", restored on
// assignment like every store), each record until its join window closes;
// so the store holds about (After + Grace) of left records and (Before +
// Grace) of right records per partition (under AtLeastOnce, plus the
// records closed within about one commit interval). The two streams must be
// co-partitioned: same key, same partitioning (murmur2 of the encoded key),
// same partition count — checked at start (ErrPartitionMismatch). An input
// whose key changed since its source (KeyBy upstream) is first written to
// "<app>-<name>-left-repartition" (or "-right-") and read back, partitioned
// as the other input. Codecs are inferred (InferCodec) or given with
// JoinCodecs. Tombstones (Record.Tombstone) are ignored.
//
// Under ExactlyOnce the results, the store's writes and the input offsets
// are one transaction: every result is written exactly once across crashes.
// Under AtLeastOnce every result is written at least once across crashes: a
// crash replays the input since the last commit against a store that may
// already hold its effects, so the replayed records are buffered and joined
// again and results repeat, but none is lost — a record whose window closed
// stays in the store until a commit covers every input record handled
// before the close, so a replayed record still joins the partners it joined
// before the crash (and is not emitted unmatched), and an unmatched result
// not yet committed when the crash came is emitted again.
func JoinStreams[K, V1, V2, VR any](l Stream[K, V1], r Stream[K, V2], w JoinWindows, store JoinStore,
	fn func(key K, lv V1, rv V2) (VR, error), opts ...StreamJoinOpt[K, V1, V2],
) Stream[K, VR] {
	if fn == nil {
		return joinStreams[K, V1, V2, VR](l, r, w, store, joinInner, nil, opts)
	}
	return joinStreams(l, r, w, store, joinInner, func(k K, lv V1, _ bool, rv V2, _ bool) (VR, error) {
		return fn(k, lv, rv)
	}, opts)
}

// LeftJoinStreams is JoinStreams keeping every left record: a left record
// that joined no right record by the time its join window closes (the
// watermark passed its time + After + Grace) is emitted then, once, with
// fn(key, left value, zero, false) and its own time. It is never emitted
// unmatched earlier, so a record whose match arrives late (within the
// bound) has no unmatched result (Kafka Streams 3.1+ semantics).
func LeftJoinStreams[K, V1, V2, VR any](l Stream[K, V1], r Stream[K, V2], w JoinWindows, store JoinStore,
	fn func(key K, lv V1, rv V2, rok bool) (VR, error), opts ...StreamJoinOpt[K, V1, V2],
) Stream[K, VR] {
	if fn == nil {
		return joinStreams[K, V1, V2, VR](l, r, w, store, joinLeft, nil, opts)
	}
	return joinStreams(l, r, w, store, joinLeft, func(k K, lv V1, _ bool, rv V2, rok bool) (VR, error) {
		return fn(k, lv, rv, rok)
	}, opts)
}

// OuterJoinStreams is JoinStreams keeping every record of either side: an
// unmatched left record is emitted as LeftJoinStreams does, an unmatched
// right record when its own join window closes (the watermark passed its
// time + Before + Grace), with lok false and the zero V1.
func OuterJoinStreams[K, V1, V2, VR any](l Stream[K, V1], r Stream[K, V2], w JoinWindows, store JoinStore,
	fn func(key K, lv V1, lok bool, rv V2, rok bool) (VR, error), opts ...StreamJoinOpt[K, V1, V2],
) Stream[K, VR] {
	return joinStreams(l, r, w, store, joinOuter, fn, opts)
}

type joinKind int

const (
	joinInner joinKind = iota
	joinLeft
	joinOuter
)

func (k joinKind) String() string {
	return [...]string{"inner", "left", "outer"}[k]
}

// The store of a stream-stream join. Keys are built from timekey's
// order-preserving parts (escaped key, time), as a window store's:
//
//	'l' | key (escaped) | t   -> the left records of key at t: a bucket
//	'r' | key (escaped) | t   -> the right records of key at t
//	'a' | t | key (escaped)   -> 0x01: the close index of the left buckets
//	'b' | t | key (escaped)   -> 0x01: the close index of the right buckets
//	'k' | 'l' or 'r' | key    -> the key's buckets of that side: a key list
//
//	bucket:   repeated { flags (1 byte; bit 0: matched) | uvarint length | value (its side's codec) },
//	          in arrival order
//	key list: 0x00 | their times (8 bytes BE each, ascending; at most joinSparseTimes), or
//	          0x01 | uvarint count (more buckets than that: found by a scan)
//
// A record's lookup of the other side reads that side's key list of its key
// (a point read: cached, or answered by Pebble's bloom filters when the key
// has none) and the buckets it lists from its time - lo to its time + hi
// (lo, hi: Before, After for a left record; After, Before for a right one);
// a key with more buckets than joinSparseTimes is looked up by one scan of
// its buckets over that range instead. The close index orders every
// bucket of a side by time: the buckets a watermark closes are one scan up
// to wm - hi - Grace - 1. The matched flag is the outer join's bookkeeping:
// it is set, with a changelog write, when a record of the other side first
// joins the entry, so an unmatched result is emitted at close only for an
// entry nothing joined. Every write goes to the changelog, so a restore
// rebuilds buffers, flags and index alike; a closed bucket and its index
// entry are deleted with changelog tombstones (under at-least-once, in the
// round after the commit that follows the close).
//
// Invariants:
//   - j.wm is the task's watermark (never below it, never decreasing within
//     a transaction); lateness, closed-on-arrival and closes all use it. A
//     record is buffered only if its window is open (t + hi + Grace >= wm),
//     and only a non-late record (t + Grace >= wm) is processed: so when a
//     bucket closes (wm > t + hi + Grace) every record that could still be
//     processed has a time > t + hi, outside the bucket's window — its
//     unmatched result is final, and no record that could join it is lost
//     by its deletion (which may therefore come at any later round) — but
//     a crash under at-least-once replays, with the watermark of the last
//     commit, records handled before the close, so there the deletion waits
//     for the round after a commit covering the close (closed, covered);
//   - a bucket's index entry is written before its key list entry, which
//     is written before the bucket, and deleted in the reverse order: a
//     prefix of the changelog (a crash under at-least-once) never holds a
//     bucket its key list and index do not name. A key list may name a
//     bucket that is gone (looked up and skipped) and a count may be too
//     high (the key then stays scanned), never too low: a count is
//     decremented only with the deletion of a bucket that exists;
//   - a database scan sees committed state only: the buckets and index
//     entries created in the open transaction are noted (created, keyBufs)
//     until it ends and merged into every scan, and every scanned key is
//     read again through the transaction, which has the last word. An
//     aborted transaction takes wm and the close scans back to their values
//     at the last commit (task.aborts tells the two ends apart);
//   - nothing derived from the watermark is persisted: a new instance of the
//     task judges and closes by the watermark restored with the committed
//     input offsets, the one its input is replayed from. (A windowed store
//     keeps the watermark it closed at and never goes below it; here that
//     would make the records replayed after an at-least-once crash late —
//     the local store survives a kill ahead of the outputs not yet
//     acknowledged — and lose their results.) Its close scans start at the
//     start of the index.
const (
	ssjLeftBuf   = 'l'
	ssjRightBuf  = 'r'
	ssjLeftIdx   = 'a'
	ssjRightIdx  = 'b'
	ssjMatched   = 1 // bucket entry flag
	joinSideLeft = 0
)

var ssjBufTag = [2]byte{ssjLeftBuf, ssjRightBuf}
var ssjIdxTag = [2]byte{ssjLeftIdx, ssjRightIdx}
var ssjSideName = [2]string{"left", "right"}

// joinDecl is a stream-stream join's validated declaration (ms).
type joinDecl struct {
	kind                 joinKind
	before, after, grace int64
	late                 latePolicy
}

// hi is how far after a side's record the other side's records join it;
// lo how far before.
func (d *joinDecl) hi(side int) int64 {
	if side == joinSideLeft {
		return d.after
	}
	return d.before
}

func (d *joinDecl) lo(side int) int64 {
	if side == joinSideLeft {
		return d.before
	}
	return d.after
}

// outer reports whether a side's unmatched records are emitted.
func (d *joinDecl) outer(side int) bool {
	if side == joinSideLeft {
		return d.kind != joinInner
	}
	return d.kind == joinOuter
}

// declareJoinWindows validates a stream-stream join's declaration,
// recording its errors; nil if it is invalid.
func (b *Builder) declareJoinWindows(op string, w JoinWindows, store JoinStore) *joinDecl {
	var errs []string
	if err := validTopic(store.Name); err != nil {
		errs = append(errs, fmt.Sprintf("store: %v", err))
	}
	for _, st := range b.stores {
		if st.name == store.Name {
			errs = append(errs, "store declared twice")
		}
	}
	for _, g := range b.globals {
		if g.store == store.Name {
			errs = append(errs, "store declared twice (a global table's)")
		}
	}
	for _, x := range []struct {
		name string
		d    time.Duration
	}{{"before", w.Before}, {"after", w.After}, {"grace", w.Grace}} {
		if x.d%time.Millisecond != 0 {
			errs = append(errs, fmt.Sprintf("%s %v: want a whole number of milliseconds", x.name, x.d))
		}
	}
	if w.Grace < 0 {
		errs = append(errs, fmt.Sprintf("grace %v: want >= 0", w.Grace))
	}
	if w.Before+w.After < 0 {
		errs = append(errs, fmt.Sprintf("before %v + after %v < 0: the time bound is empty", w.Before, w.After))
	}
	d := &joinDecl{before: w.Before.Milliseconds(), after: w.After.Milliseconds(), grace: w.Grace.Milliseconds()}
	if store.Late == nil {
		errs = append(errs, "no late policy: set Late to DropLate(), LateToTopic(name) or LateToDLQ()")
	} else {
		d.late = store.Late.late()
		switch d.late.kind {
		case lateUpdates:
			errs = append(errs, "LateUpdates is for windowed aggregations: a join needs DropLate(), LateToTopic(name) or LateToDLQ()")
		case lateTopic:
			if err := validTopic(d.late.topic); err != nil {
				errs = append(errs, fmt.Sprintf("late topic: %v", err))
			}
		}
	}
	if len(errs) > 0 {
		b.errorf("%s %q: %s", op, store.Name, strings.Join(errs, "; "))
		return nil
	}
	return d
}

// joinStreams declares a stream-stream join (see JoinStreams).
func joinStreams[K, V1, V2, VR any](l Stream[K, V1], r Stream[K, V2], w JoinWindows, store JoinStore, kind joinKind,
	fn func(K, V1, bool, V2, bool) (VR, error), opts []StreamJoinOpt[K, V1, V2],
) Stream[K, VR] {
	b := l.b
	op := kind.String() + "-join-streams"
	if kind == joinInner {
		op = "join-streams"
	}
	if !l.valid() || !r.valid() {
		return invalid[K, VR](b)
	}
	if r.b != b {
		b.errorf("%s %q: streams from different builders", op, store.Name)
		return invalid[K, VR](b)
	}
	if fn == nil {
		b.errorf("%s %q: nil function", op, store.Name)
		return invalid[K, VR](b)
	}
	var key Codec[K]
	var lc Codec[V1]
	var rc Codec[V2]
	for _, o := range opts {
		key, lc, rc = cmpOr(o.key, key), cmpOr(o.left, lc), cmpOr(o.right, rc)
	}
	var errs []string
	if key == nil {
		var err error
		if key, err = InferCodec[K](); err != nil {
			errs = append(errs, fmt.Sprintf("key: %v", err))
		}
	}
	if lc == nil {
		var err error
		if lc, err = InferCodec[V1](); err != nil {
			errs = append(errs, fmt.Sprintf("left value: %v", err))
		}
	}
	if rc == nil {
		var err error
		if rc, err = InferCodec[V2](); err != nil {
			errs = append(errs, fmt.Sprintf("right value: %v", err))
		}
	}
	d := b.declareJoinWindows(op, w, store)
	if len(errs) > 0 {
		b.errorf("%s %q: %s; pass stream.JoinCodecs", op, store.Name, strings.Join(errs, "; "))
		return invalid[K, VR](b)
	}
	if d == nil {
		return invalid[K, VR](b)
	}
	d.kind = kind
	name := store.Name
	// A side whose key changed is repartitioned by the new key; the join
	// link then makes both one co-partitioned sub-topology, whose
	// repartition topics take the other side's partition count.
	if l.keyChanged {
		l = repartition(Grouped[K, V1]{s: l, key: key, value: lc}, name+"-left")
	}
	if r.keyChanged {
		r = repartition(Grouped[K, V2]{s: r, key: key, value: rc}, name+"-right")
	}
	if !l.valid() || !r.valid() {
		return invalid[K, VR](b)
	}
	sources := slices.Concat(l.sources, r.sources)
	slices.Sort(sources)
	sources = slices.Compact(sources)
	desc := fmt.Sprintf("stream-stream %s join, a left record at t joins the right records in [t - %v, t + %v], "+
		"grace %v; buffered until the window closes (left: t + %v, right: t + %v), late records: %s",
		kind, w.Before, w.After, w.Grace, w.After+w.Grace, w.Before+w.Grace, d.late)
	b.stores = append(b.stores, &storeSpec{name: name, source: l.sources[0], op: op, window: desc})
	if d.late.kind == lateTopic {
		b.sinks = append(b.sinks, &sinkSpec{topic: d.late.topic, op: "late", sources: sources})
	}
	res := b.addNode(op, nil)
	res.name = op + "-" + name
	res.build = func(t *task, children []any) any {
		j := &streamJoin[K, V1, V2, VR]{t: t, n: res, d: d, name: name, st: t.store(name), key: key, lv: lc, rv: rc,
			fn: fn, next: fanout[K, VR](children), carriesKey: carries(key), carriesL: carries(lc), carriesR: carries(rc),
			wm: math.MinInt64, committedWM: math.MinInt64, gen: t.txnGen, aborts: t.aborts}
		for i := range 2 {
			j.scanned[i], j.nextT[i], j.committedScan[i] = math.MinInt64, math.MinInt64, math.MinInt64
			j.created[i] = map[string]struct{}{}
			j.keyBufs[i] = map[string][][]byte{}
			j.closed[i] = map[string]struct{}{}
		}
		j.alo = t.app.cfg.guarantee != ExactlyOnce
		j.lateCount = t.app.metrics.windowLate.WithLabelValues(name, d.late.label())
		t.addTimed(j)
		return j
	}
	lIn := l.link(op+"-left", func(t *task, children []any) any {
		j := children[0].(*streamJoin[K, V1, V2, VR])
		return func(rec Record[K, V1]) (err error) {
			defer j.recoverPanic(&err)
			if rec.Tombstone {
				return nil
			}
			vb, err := encodeCarried(lc, j.carriesL, rec.valueEnc, rec.Value)
			if err != nil {
				return failedIn(res, fmt.Errorf("store %s: encode left value: %w", name, err))
			}
			return j.process(joinSideLeft, rec.Key, rec.keyEnc, vb, rec.Timestamp, rec.Headers, rec.Origin)
		}
	})
	rIn := r.link(op+"-right", func(t *task, children []any) any {
		j := children[0].(*streamJoin[K, V1, V2, VR])
		return func(rec Record[K, V2]) (err error) {
			defer j.recoverPanic(&err)
			if rec.Tombstone {
				return nil
			}
			vb, err := encodeCarried(rc, j.carriesR, rec.valueEnc, rec.Value)
			if err != nil {
				return failedIn(res, fmt.Errorf("store %s: encode right value: %w", name, err))
			}
			return j.process(1, rec.Key, rec.keyEnc, vb, rec.Timestamp, rec.Headers, rec.Origin)
		}
	})
	lIn.children = append(lIn.children, res)
	rIn.children = append(rIn.children, res)
	b.links = append(b.links, [2]int{lIn.id, rIn.id})
	return Stream[K, VR]{b: b, n: res, sources: sources}
}

// streamJoin is one task's instance of a stream-stream join: a
// time-driven operator (timed.go) fed by both inputs.
type streamJoin[K, V1, V2, VR any] struct {
	t    *task
	n    *node
	d    *joinDecl
	name string
	st   *taskStore
	key  Codec[K]
	lv   Codec[V1]
	rv   Codec[V2]
	fn   func(K, V1, bool, V2, bool) (VR, error)
	next func(Record[K, VR]) error

	carriesKey, carriesL, carriesR bool

	// wm is the watermark records are judged and buckets closed by;
	// committedWM is wm as of the last committed transaction.
	wm, committedWM int64

	// Close scans, per side: every index entry with t <= scanned was
	// handled; none with t in (scanned, nextT) exists. committedScan is
	// scanned as of the last committed transaction.
	scanned, nextT, committedScan [2]int64

	// The open transaction (task.txnGen, task.aborts when it began) and
	// what it created, per side: index keys, and bucket keys by encoded
	// key.
	gen, aborts uint64
	created     [2]map[string]struct{}
	keyBufs     [2]map[string][][]byte

	// alo: the App runs at-least-once. Then a closed bucket (its unmatched
	// records emitted) is kept until a commit covers every input record
	// handled before its close: a crash before that commit replays those
	// records against the local store, which survives ahead of the
	// committed offsets, and a replayed record must find the partners it
	// joined before. closed holds, per side, the index keys of the buckets
	// closed since the last commit; covered those a commit covered since,
	// which the next round deletes (dropCommitted). Both are memory only: the
	// next instance of the task closes those buckets again — without
	// emitting if their close is older than the watermark it starts from
	// (then acknowledged), else emitting again an unmatched record whose
	// first emission may not have been acknowledged.
	alo     bool
	closed  [2]map[string]struct{}
	covered [2][][]byte

	lateCount prometheus.Counter
}

func (j *streamJoin[K, V1, V2, VR]) nodeID() int { return j.n.id }

// recoverPanic turns a panic of user code (the joiner, or an operator
// downstream) into this operator's error.
func (j *streamJoin[K, V1, V2, VR]) recoverPanic(err *error) {
	if p := recover(); p != nil {
		*err = failedIn(j.n, &PanicError{Value: p, Stack: debug.Stack()})
	}
}

// sync begins the task's store transaction if none is open, and drops the
// notes of one that ended (rolling wm and the scans back if it aborted).
func (j *streamJoin[K, V1, V2, VR]) sync() {
	t := j.t
	if t.txn == nil {
		t.txn = t.db.Begin()
	}
	if t.txnGen == j.gen {
		return
	}
	if t.aborts == j.aborts {
		j.committedWM, j.committedScan = j.wm, j.scanned
	} else {
		j.wm, j.scanned = j.committedWM, j.committedScan
		j.nextT = [2]int64{math.MinInt64, math.MinInt64}
		// The closes of the aborted rounds are redone.
		for side := range 2 {
			for k := range j.closed[side] {
				if readEnd([]byte(k)) > j.scanned[side] {
					delete(j.closed[side], k)
				}
			}
		}
	}
	j.gen, j.aborts = t.txnGen, t.aborts
	for i := range 2 {
		clear(j.created[i])
		clear(j.keyBufs[i])
	}
}

func (j *streamJoin[K, V1, V2, VR]) get(key []byte) ([]byte, bool, error) {
	v, _, found, err := j.t.txn.Get(j.name, key)
	if err != nil {
		return nil, false, &fatalError{fmt.Errorf("store %s: %w", j.name, err)}
	}
	return v, found, nil
}

// put writes a store key and its changelog record with the record being
// processed (applied only if it succeeds).
func (j *streamJoin[K, V1, V2, VR]) put(key, value []byte, ts int64) error {
	if _, err := j.t.txn.Put(j.name, key, value, ts); err != nil {
		return &fatalError{fmt.Errorf("store %s: %w", j.name, err)}
	}
	j.t.emit(j.st.changelog, j.t.id.partition, key, value, time.UnixMilli(ts), nil)
	return nil
}

// process handles one record of side (0 left, 1 right): its value encoded
// as vb.
func (j *streamJoin[K, V1, V2, VR]) process(side int, key K, keyEnc encoded, vb []byte, ts time.Time,
	headers []Header, origin Origin,
) (err error) {
	defer func() { err = failedIn(j.n, err) }()
	kb, err := encodeCarried(j.key, j.carriesKey, keyEnc, key)
	if err != nil {
		return fmt.Errorf("store %s: encode key: %w", j.name, err)
	}
	j.sync()
	j.wm = max(j.wm, j.t.et.tracker.Watermark())
	t := ts.UnixMilli()
	d := j.d
	if satAddMs(t, d.grace) < j.wm {
		return j.late(side, kb, vb, ts, headers, origin)
	}
	// The other side's buckets of the key within the bound.
	other := 1 - side
	from, to := satAddMs(t, -d.lo(side)), satAddMs(t, d.hi(side))
	bks, err := j.lookup(other, kb, from, to)
	if err != nil {
		return err
	}
	matched := false
	outKey := carry(j.key, j.carriesKey, kb)
	for _, bk := range bks {
		raw, found, err := j.get(bk)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		es, err := decodeBucket(raw)
		if err != nil {
			return &fatalError{fmt.Errorf("store %s: %w", j.name, err)}
		}
		ot := bucketTime(bk)
		changed := false
		for i := range es {
			var out Record[K, VR]
			if side == joinSideLeft {
				out, err = j.result(key, vb, true, es[i].value, true)
			} else {
				out, err = j.result(key, es[i].value, true, vb, true)
			}
			if err != nil {
				return err
			}
			out.Timestamp, out.Headers, out.Origin, out.keyEnc = time.UnixMilli(max(t, ot)), headers, origin, outKey
			if err := j.next(out); err != nil {
				return err
			}
			matched = true
			if d.outer(other) && es[i].flags&ssjMatched == 0 {
				es[i].flags |= ssjMatched
				changed = true
			}
		}
		if changed {
			if err := j.put(bk, encodeBucket(es), ot); err != nil {
				return err
			}
		}
	}
	if satAddMs(t, d.hi(side)+d.grace) < j.wm {
		// Its window is closed already (a negative After or Before): no
		// record still to come joins it, so it is not buffered.
		if matched || !d.outer(side) {
			return nil
		}
		out, err := j.unmatched(side, key, vb)
		if err != nil {
			return err
		}
		out.Timestamp, out.Headers, out.Origin, out.keyEnc = ts, headers, origin, outKey
		return j.next(out)
	}
	return j.buffer(side, kb, t, vb, matched)
}

// result is fn's result for a pair (or one side: ok false for the other),
// decoded from their encodings.
func (j *streamJoin[K, V1, V2, VR]) result(key K, lb []byte, lok bool, rb []byte, rok bool) (Record[K, VR], error) {
	var lv V1
	var rv V2
	var err error
	if lok {
		if lv, err = j.lv.Decode(lb); err != nil {
			return Record[K, VR]{}, fmt.Errorf("store %s: decode left value: %w", j.name, err)
		}
	}
	if rok {
		if rv, err = j.rv.Decode(rb); err != nil {
			return Record[K, VR]{}, fmt.Errorf("store %s: decode right value: %w", j.name, err)
		}
	}
	v, err := j.fn(key, lv, lok, rv, rok)
	if err != nil {
		return Record[K, VR]{}, err
	}
	return Record[K, VR]{Key: key, Value: v}, nil
}

// unmatched is the result of side's record vb that joined nothing.
func (j *streamJoin[K, V1, V2, VR]) unmatched(side int, key K, vb []byte) (Record[K, VR], error) {
	if side == joinSideLeft {
		return j.result(key, vb, true, nil, false)
	}
	return j.result(key, nil, false, vb, true)
}

// buckets returns the keys of side's buckets of key kb with times in
// [from, to], in time order: those the database holds and those the open
// transaction created (each to be read through the transaction).
func (j *streamJoin[K, V1, V2, VR]) buckets(side int, kb []byte, from, to int64) ([][]byte, error) {
	lo := bufKey(side, kb, from)
	var hi []byte
	if to == math.MaxInt64 {
		// Past every time of the key: its escaped form ends 0x00 0x01.
		hi = bufKey(side, kb, 0)[:len(lo)-timekey.TimeSize]
		hi[len(hi)-1]++
	} else {
		hi = bufKey(side, kb, to+1)
	}
	var keys [][]byte
	err := j.t.db.Scan(j.name, lo, hi, func(k, _ []byte, _ int64) error {
		keys = append(keys, slices.Clone(k))
		return nil
	})
	if err != nil {
		return nil, &fatalError{fmt.Errorf("store %s: scan: %w", j.name, err)}
	}
	for _, k := range j.keyBufs[side][string(kb)] {
		if bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, bytes.Equal), nil
}

// buffer adds side's record (kb, t, vb) to its bucket, creating the bucket
// (index entry first) if it is new.
func (j *streamJoin[K, V1, V2, VR]) buffer(side int, kb []byte, t int64, vb []byte, matched bool) error {
	bk := bufKey(side, kb, t)
	raw, found, err := j.get(bk)
	if err != nil {
		return err
	}
	var es []bucketEntry
	if found {
		if es, err = decodeBucket(raw); err != nil {
			return &fatalError{fmt.Errorf("store %s: %w", j.name, err)}
		}
	} else {
		ik := joinIndexKey(side, t, kb)
		if err := j.put(ik, indexValue, t); err != nil {
			return err
		}
		if err := j.listAdd(side, kb, t); err != nil {
			return err
		}
		j.created[side][string(ik)] = struct{}{}
		j.keyBufs[side][string(kb)] = append(j.keyBufs[side][string(kb)], bk)
		j.nextT[side] = min(j.nextT[side], t)
	}
	var f byte
	if matched {
		f = ssjMatched
	}
	es = append(es, bucketEntry{flags: f, value: vb})
	return j.put(bk, encodeBucket(es), t)
}

// late routes a late record by the policy.
func (j *streamJoin[K, V1, V2, VR]) late(side int, kb, vb []byte, ts time.Time, headers []Header, origin Origin) error {
	j.lateCount.Inc()
	p := j.d.late
	if p.kind == lateDrop {
		return nil
	}
	t := ts.UnixMilli()
	win := window.Window{Start: satAddMs(t, -j.d.lo(side)), End: satAddMs(t, j.d.hi(side)+1)}
	closeAt := satAddMs(t, j.d.grace+1) // late from this watermark on
	by := j.wm - closeAt
	hs := make([]Header, 0, len(headers)+6)
	hs = append(hs, headers...)
	hs = append(hs,
		Header{Key: HeaderLateStore, Value: []byte(j.name)},
		Header{Key: HeaderLateWindowStart, Value: strconv.AppendInt(nil, win.Start, 10)},
		Header{Key: HeaderLateWindowEnd, Value: strconv.AppendInt(nil, win.End, 10)},
		Header{Key: HeaderLateWatermark, Value: strconv.AppendInt(nil, j.wm, 10)},
		Header{Key: HeaderLateBy, Value: strconv.AppendInt(nil, by, 10)},
		Header{Key: HeaderLateJoinSide, Value: []byte(ssjSideName[side])})
	if p.kind == lateTopic {
		j.t.emit(p.topic, -1, slices.Clone(kb), vb, ts, hs)
		return nil
	}
	kr := &kgo.Record{Topic: origin.Topic, Partition: origin.Partition, Offset: origin.Offset,
		Key: slices.Clone(kb), Value: vb, Timestamp: ts}
	for _, h := range hs {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	now := j.t.app.cfg.clock.Now()
	j.t.deadLetter(kr, failedIn(j.n, &lateError{store: j.name, win: win, wm: j.wm, by: by}), 1, now, now)
	return nil
}

// advance closes the buckets the watermark passed (timedOperator): their
// unmatched records are emitted (left and outer joins) and they are
// deleted.
func (j *streamJoin[K, V1, V2, VR]) advance(wm int64, _ time.Time) error {
	j.sync()
	if err := j.dropCommitted(); err != nil {
		return err
	}
	j.wm = max(j.wm, wm)
	if j.wm == math.MinInt64 {
		return nil
	}
	for side := range 2 {
		if err := j.closeSide(side, satAddMs(j.wm, -j.d.hi(side)-j.d.grace-1)); err != nil {
			return err
		}
	}
	return nil
}

// closeSide closes side's buckets with time <= maxT, in (time, key) order.
func (j *streamJoin[K, V1, V2, VR]) closeSide(side int, maxT int64) error {
	if maxT <= j.scanned[side] || maxT < j.nextT[side] {
		return nil
	}
	tag := ssjIdxTag[side]
	from := []byte{tag}
	if j.scanned[side] != math.MinInt64 {
		from = timekey.AppendTime(from, j.scanned[side]+1)
	}
	var keys [][]byte
	next := int64(math.MaxInt64)
	err := j.t.db.Scan(j.name, from, []byte{tag + 1}, func(k, _ []byte, _ int64) error {
		if len(k) < 1+timekey.TimeSize {
			return &state.CorruptionError{Store: j.name, Key: slices.Clone(k), Reason: "short join index key"}
		}
		if t := readEnd(k); t > maxT {
			next = t
			return errWindowScanStop
		}
		keys = append(keys, slices.Clone(k))
		return nil
	})
	if err != nil && !errors.Is(err, errWindowScanStop) {
		return fmt.Errorf("store %s: scan: %w", j.name, err)
	}
	for k := range j.created[side] {
		if t := readEnd([]byte(k)); t <= maxT {
			keys = append(keys, []byte(k))
		} else {
			next = min(next, t)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	for _, ik := range keys {
		if err := j.closeBucket(side, ik); err != nil {
			return err
		}
	}
	j.scanned[side], j.nextT[side] = maxT, next
	return nil
}

// closeBucket closes the bucket of index entry ik: it emits its unmatched
// records if side is outer, and deletes it — at once under ExactlyOnce (an
// aborted transaction restores it), under AtLeastOnce in the round after
// the next successful commit (see committed), or at once if the task started
// from a watermark past its close (its predecessor closed it and emitted
// its unmatched records: nothing is emitted again).
func (j *streamJoin[K, V1, V2, VR]) closeBucket(side int, ik []byte) error {
	t := j.t
	if found, known := t.txn.Known(j.name, ik); known && !found {
		return nil // closed in the open transaction already
	}
	if _, ok := j.closed[side][string(ik)]; ok {
		return nil // closed already, its deletion awaits a commit
	}
	ts, kb, err := parseJoinIndexKey(j.name, ik)
	if err != nil {
		return err
	}
	bk := bufKey(side, kb, ts)
	var raw []byte
	var found bool
	if j.alo && satAddMs(ts, j.d.hi(side)+j.d.grace) < t.et.startWM {
		// Closed by the task's predecessor before the commit (or local
		// checkpoint) it starts from: its unmatched records were
		// acknowledged, and every record that could join it is late.
		_, _, err := j.drop(side, ik, kb, ts)
		return err
	}
	if j.alo {
		if raw, found, err = j.get(bk); err != nil {
			return unfatal(err)
		}
		j.closed[side][string(ik)] = struct{}{}
	} else if raw, found, err = j.drop(side, ik, kb, ts); err != nil {
		return err
	}
	at := time.UnixMilli(ts)
	if !found || !j.d.outer(side) {
		return nil
	}
	es, err := decodeBucket(raw)
	if err != nil {
		return fmt.Errorf("store %s: %w", j.name, err)
	}
	var key K
	keyDecoded := false
	for _, e := range es {
		if e.flags&ssjMatched != 0 {
			continue
		}
		if !keyDecoded {
			if key, err = j.key.Decode(kb); err != nil {
				return fmt.Errorf("store %s: decode stored key: %w", j.name, err)
			}
			keyDecoded = true
		}
		origin := &kgo.Record{Topic: t.app.topicOf(t.app.b.sources[j.st.spec.source]), Partition: t.id.partition,
			Offset: -1, Key: bk, Value: e.value, Timestamp: at}
		value := e.value
		if err := t.emitTimed(func() error {
			out, err := j.unmatched(side, key, value)
			if err != nil {
				return failedIn(j.n, err)
			}
			out.Timestamp, out.keyEnc = at, carry(j.key, j.carriesKey, kb)
			return failedIn(j.n, j.next(out))
		}, origin); err != nil {
			return err
		}
	}
	return nil
}

// drop deletes side's bucket of index entry ik (key kb, time ts), its place
// in the key list and ik, with their changelog records, and returns the
// bucket's value (found false: it was gone).
func (j *streamJoin[K, V1, V2, VR]) drop(side int, ik, kb []byte, ts int64) (raw []byte, found bool, err error) {
	t := j.t
	bk := bufKey(side, kb, ts)
	raw, found, err = j.get(bk)
	if err != nil {
		return nil, false, unfatal(err)
	}
	at := time.UnixMilli(ts)
	var recs []*kgo.Record
	if found {
		if err := t.txn.DeleteCold(j.name, bk); err != nil {
			return nil, false, fmt.Errorf("store %s: %w", j.name, err)
		}
		recs = append(recs, &kgo.Record{Topic: j.st.changelog, Partition: t.id.partition, Key: bk, Timestamp: at})
	}
	lk, lv, err := j.listRemove(side, kb, ts, found)
	if err != nil {
		return nil, false, unfatal(err)
	}
	if lk != nil {
		recs = append(recs, &kgo.Record{Topic: j.st.changelog, Partition: t.id.partition, Key: lk, Value: lv, Timestamp: at})
	}
	if err := t.txn.DeleteCold(j.name, ik); err != nil {
		return nil, false, fmt.Errorf("store %s: %w", j.name, err)
	}
	recs = append(recs, &kgo.Record{Topic: j.st.changelog, Partition: t.id.partition, Key: slices.Clone(ik), Timestamp: at})
	if err := t.txn.Apply(); err != nil {
		return nil, false, err
	}
	for _, r := range recs {
		t.produce(r)
	}
	return raw, found, nil
}

// committed notes that an at-least-once commit covering every input
// record handled so far succeeded (commitNotified): the buckets closed until
// now are deleted from the next round on (dropCommitted), none of the
// records that could join them being replayed after a crash any more.
func (j *streamJoin[K, V1, V2, VR]) committed() {
	for side := range 2 {
		for k := range j.closed[side] {
			j.covered[side] = append(j.covered[side], []byte(k))
		}
		clear(j.closed[side])
	}
}

// dropCommitted deletes the buckets whose close a commit covered, in the
// task's open round.
func (j *streamJoin[K, V1, V2, VR]) dropCommitted() error {
	if len(j.covered[0])+len(j.covered[1]) == 0 {
		return nil
	}
	j.sync()
	for side := range 2 {
		slices.SortFunc(j.covered[side], bytes.Compare)
		for i, ik := range j.covered[side] {
			ts, kb, err := parseJoinIndexKey(j.name, ik)
			if err == nil {
				_, _, err = j.drop(side, ik, kb, ts)
			}
			if err != nil {
				j.covered[side] = j.covered[side][i:]
				return err
			}
		}
		j.covered[side] = j.covered[side][:0]
	}
	return nil
}

// commitNotified is a time-driven operator that acts on the at-least-once
// commits of its task.
type commitNotified interface {
	// committed: a commit covering every input record the task handled
	// succeeded (loop goroutine, between rounds; no I/O).
	committed()
	// dropCommitted deletes the state that commit made unneeded, in the
	// open round (also called by advance).
	dropCommitted() error
}

// notifyCommitted tells the task's operators that a commit covering every
// input record it handled succeeded. Between rounds.
func (t *task) notifyCommitted() {
	for _, op := range t.timed {
		if c, ok := op.(commitNotified); ok {
			c.committed()
		}
	}
}

// dropCommitted has the task's operators delete, in a round of its own,
// the state a commit made unneeded (the Driver: its rounds commit at once).
func (t *task) dropCommitted() error {
	for _, op := range t.timed {
		if c, ok := op.(commitNotified); ok {
			if err := c.dropCommitted(); err != nil {
				return err
			}
		}
	}
	return t.flushState()
}
