package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/window"
)

// The windowed operator (WindowedCount, WindowedReduce, WindowedAggregate).
//
// State: one store per operator, in the task's Pebble database, changelogged
// like every store (every key below is written to "<app>-<store>-changelog",
// so a restore rebuilds all of them). The changelog writes are collapsed
// between flushes (storeChangelog, window_changelog.go: before every commit
// of input offsets and every transaction commit): a window updated many
// times between two flushes gets one record, and a window opened and closed
// between two flushes none. A store that can hold no retained window
// (derivesCloseIndex: no Retain, no LateUpdates, not sliding) keeps its
// close index out of the changelog: a restore sets a window's 'c' entry
// with its 'w' entry and deletes it with it (applyStoreChangelog). Such a
// store of time windows not in pane layout, or in its row form
// (indexedByDB), keeps it out of the operator's writes and the store cache
// too: its database writes a window's 'c' entry in the batch that first
// writes the window to Pebble and deletes it with it (state.Derived; a
// row's follows the row's next window, window_pane_row.go), so an open
// window (a key's row) is one cache entry.
//
//	'w' | key | end | start   -> the window: uvarint records since its last emission
//	                             | (sliding) first, last record time (2 x 8 bytes BE)
//	                             | the aggregate (its codec's bytes)
//	'c' | end | key | start   -> 0x01: the window is open (the close index)
//	'r' | end | key | start   -> 0x01: the window closed and is retained (Retain > 0)
//	'm'                       -> the watermark (8 bytes BE) windows were last closed by
//	                             [| while a burst of closes is behind: the last
//	                             'c' key its scan handled (window_burst.go)]
//
// (timekey's layouts; 'r' is the close index's layout under another tag.
// A store of hopping windows in pane layout keeps panes, not windows, under
// 'w': see window_pane.go.)
// A window is open from its first record until the watermark reaches its
// end + closeDelta; then (one scan of the 'c' range up to that end) its
// final result is emitted (EmitFinal) and its 'c' entry deleted, and either
// its 'w' entry deleted too or, with Retain, moved to 'r' until the
// watermark passes end + closeDelta + Retain (one scan of the 'r' range).
// All of it happens in the task's round (advance), in the round's
// transaction under ExactlyOnce, with changelog tombstones for every
// deletion. The 'm' entry keeps a new owner of the task (restored from the
// changelog, whose watermark may start lower) from re-opening a window that
// was already closed and emitted: the operator's watermark never goes below
// it.
//
// Invariants:
//   - the changelog order keeps a window closable: a crash that keeps a
//     prefix of the changelog leaves at worst an index entry without its
//     window (dropped when the scan reaches it), never a window that no
//     index entry closes. A derived close index holds this by
//     construction; otherwise each flush writes its records in phases
//     (windowChangelogPhase): new index entries ('c', 'r'), then windows
//     ('w': values and tombstones), then deleted index entries, then the
//     mark; the state at each flush keeps every window indexed (a record's
//     or a close's writes are applied whole), so every prefix of a flush
//     does too;
//   - o.wm never decreases, except when a transaction is aborted: it then
//     goes back to the store's committed mark (the task's watermark goes
//     back too, and the aborted records are processed again, not late);
//     every lateness decision and every close uses it, so a window is
//     closed exactly when the watermark passes its close time, and a
//     record that would reach a closed window is late;
//   - a 'c' entry is created only for a window whose end is past
//     o.wm - closeDelta at that moment (else the record is late), so after
//     a close scan up to end E no 'c' entry <= E appears again in this
//     operator's life (o.scanned) — except when a transaction is aborted,
//     which undoes the scan's deletions: scanned then goes back to its
//     value at the last commit;
//   - a database scan (state.DB.ReadScan or TaskScan: no flush of the
//     store cache)
//     sees what Pebble holds; the index and window keys created in the
//     open transaction (created, keyWins) and in committed ones whose
//     writes may still sit in the store cache (pending, pendingWins: kept
//     until the cache flushes, state.DB.Flushes) are merged into every
//     scan; every scanned entry is read again through the transaction,
//     which has the last word (a key deleted since is skipped). So a close
//     scan never writes the cache to Pebble: a window that opens and
//     closes between two flushes never reaches Pebble.
//   - (time windows) a window with end past o.fresh's floor exists only if
//     this operator instance created it, and then its key is in that end's
//     filter: a record's new windows are written without a read
//     (window_fresh.go).
const (
	tagRetained = 'r'
	tagMark     = 'm'
)

// markKey is the store key of the operator's persisted watermark.
var markKey = []byte{tagMark}

// indexValue is the value of 'c' and 'r' entries (not empty: an empty
// changelog value could read as a tombstone).
var indexValue = []byte{1}

var errWindowScanStop = errors.New("window scan done")

// lateError is the dead-letter reason of a late record (LateToDLQ).
type lateError struct {
	store  string
	win    window.Window
	wm, by int64
}

func (e *lateError) Error() string {
	return fmt.Sprintf("late: window [%d, %d) of store %s closed; watermark %d, %d ms past its close",
		e.win.Start, e.win.End, e.store, e.wm, e.by)
}

// windowed declares a windowed operation (see WindowedCount).
func windowed[K, V, A any](g Grouped[K, V], w Windows, store WindowedStore, op string, codec Codec[A],
	fns windowFns[K, V, A],
) Table[Windowed[K], A] {
	s := g.s
	b := s.b
	if !s.valid() {
		return Table[Windowed[K], A]{b: b}
	}
	d := b.declareWindow(op, w, store, fns.merge != nil)
	ok := d != nil
	if d != nil && d.pane > 0 {
		d.combine = paneCombiner(codec, fns.merge)
	}
	if g.keyErr != nil {
		b.errorf("%s %q: key: %v", op, store.Name, g.keyErr)
		ok = false
	}
	if d != nil && (d.late.kind == lateTopic || d.late.kind == lateDLQ) && g.valueErr != nil {
		b.errorf("%s %q: late records are written as they came, which needs the value codec: %v", op, store.Name, g.valueErr)
		ok = false
	}
	if ok && (s.keyChanged || len(s.sources) != 1) {
		if g.valueErr != nil {
			b.errorf("%s %q repartitions its input (its key changed, or it merges sources): value: %v",
				op, store.Name, g.valueErr)
			ok = false
		} else {
			s = repartition(g, store.Name)
		}
	}
	if !ok || !s.valid() {
		return Table[Windowed[K], A]{b: b}
	}
	spec := &storeSpec{name: store.Name, source: s.sources[0], op: op, window: d.desc, win: d,
		codecs: windowStoreCodecs(g.key, codec, d.kind)}
	b.stores = append(b.stores, spec)
	if d.late.kind == lateTopic {
		b.sinks = append(b.sinks, &sinkSpec{topic: d.late.topic, op: "late", sources: s.sources})
	}
	name := store.Name
	var n *node
	n = s.link(op, func(t *task, children []any) any {
		o := &windowOp[K, V, A]{t: t, n: n, d: d, name: name, st: t.store(name), key: g.key, value: g.value,
			agg: codec, fns: fns, carriesKey: carries(g.key), wm: math.MinInt64, closedBy: math.MinInt64,
			scanned: [2]int64{math.MinInt64, math.MinInt64}, nextEnd: [2]int64{math.MinInt64, math.MinInt64},
			created: map[string]struct{}{}, keyWins: map[string][][]byte{}, early: map[string]struct{}{},
			pendingWins: map[string][][]byte{}}
		o.committedScan = o.scanned
		o.dbIndex = o.st.spec.indexedByDB()
		phase := windowChangelogPhase
		switch {
		case d.rows && o.st.spec.derivesCloseIndex():
			phase = windowChangelogPhaseDerived
		case d.rows:
		case d.pane > 0 && o.st.spec.derivesCloseIndex():
			phase = paneChangelogPhaseDerived
		case d.pane > 0:
			phase = paneChangelogPhase
		case o.st.spec.derivesCloseIndex():
			phase = windowChangelogPhaseDerived
		}
		o.cl = newStoreChangelog(t, n.id, o.st, phase)
		if len(children) > 0 {
			o.next = fanout[Windowed[K], A](children)
		}
		o.lateCount = t.app.metrics.windowLate.WithLabelValues(name, o.d.late.label())
		o.partialCount = t.app.metrics.windowLate.WithLabelValues(name, "partial")
		t.addTimed(o)
		return func(r Record[K, V]) (err error) {
			defer func() { err = failedIn(n, err) }()
			return o.process(r)
		}
	})
	n.name = op + "-" + name
	return Table[Windowed[K], A]{b: b, n: n, store: name, key: WindowedKeys(g.key, w), value: codec, sources: s.sources}
}

// label is the late policy's metric label.
func (p latePolicy) label() string {
	switch p.kind {
	case lateDrop:
		return "drop"
	case lateTopic:
		return "topic"
	case lateDLQ:
		return "dlq"
	case lateUpdates:
		return "updates-expired"
	}
	return "none"
}

// windowOp is one task's instance of a windowed operator.
type windowOp[K, V, A any] struct {
	t          *task
	n          *node
	d          *windowDecl
	name       string
	st         *taskStore
	cl         *storeChangelog // the store's collapsed changelog writes
	key        Codec[K]
	value      Codec[V] // nil if the group has none (only late records need it)
	agg        Codec[A]
	fns        windowFns[K, V, A]
	next       func(Record[Windowed[K], A]) error // nil: nothing downstream
	carriesKey bool
	// dbIndex: the database derives the close index ('c') from the
	// windows or rows (storeSpec.indexedByDB): the operator never writes
	// it.
	dbIndex bool

	// wm is the watermark windows are judged and closed by (see the
	// invariants); loaded: it includes the store's persisted mark.
	wm     int64
	loaded bool
	// closedBy is the store's mark when load read it (MinInt64: none):
	// every window with end + closeDelta <= closedBy was closed and
	// emitted, so an index entry of such a window is a leftover of a
	// derived close index (window_changelog.go) and is deleted unread.
	closedBy int64

	// Close scans of the two indexes ([0] 'c', [1] 'r'): every entry with
	// end <= scanned was handled; no entry with end in (scanned, nextEnd)
	// exists. committedScan is scanned as of the last committed
	// transaction.
	scanned, nextEnd, committedScan [2]int64
	// A burst (window_burst.go): a scan that ran out of its round's
	// budget handled every entry up to resume (nil: none) and left behind
	// set; committedResume is resume as of the last committed
	// transaction. closedThrough is the cursor the store's mark held when
	// load read it (nil: none; then closedBy alone says what closed).
	resume, committedResume [2][]byte
	behind                  [2]bool
	closedThrough           []byte
	// scans counts the index scans (for tests: a round that cannot close
	// a window scans nothing).
	scans int

	// Notes on the open transaction (see the invariants).
	txn     *state.Txn
	epoch   uint64
	commits uint64
	aborts  uint64              // the task's aborts when the watermark was last taken back
	created map[string]struct{} // 'c' and 'r' keys created in it
	// createdRows: the 'c' keys created in it by the row form of the
	// pane layout (window_pane_row.go), instead of in created: a list,
	// without hashing (a key is rarely created twice in a transaction, and
	// the scans take each key once). Each key is its own allocation, never
	// modified.
	createdRows [][]byte
	keyWins     map[string][][]byte // 'w' keys created in it, by encoded key (sliding, session)
	// grownWins: keys whose keyWins list reached a power of two since the
	// round began (pruneWins).
	grownWins []string
	// Notes on committed transactions whose writes may not be in Pebble
	// yet: their created and keyWins, kept until the store cache flushes
	// (flushMark: state.DB.Flushes when they were last added to). pending
	// is a list, not a set: a key listed twice (created again in a later
	// transaction) is one key to the scans, which sort and compact what
	// they merge; the list holds at most one element per creation since
	// the flush, and a round's notes join it without a hash of each.
	pending     []string
	pendingRows [][]byte // createdRows of committed transactions (as pending)
	pendingWins map[string][][]byte
	flushMark   uint64

	// early holds the 'w' keys updated since the last EarlyInterval firing;
	// lastEarly is when that was (processing clock).
	early     map[string]struct{}
	lastEarly time.Time

	lateCount, partialCount prometheus.Counter

	// fresh: which new time windows need no read (nil: every one is read);
	// kh is the hash of the key of the record being processed (processTime:
	// only once khSet, see keyHash).
	fresh *freshEnds
	kh    uint64
	khSet bool
	// hints: pane layout, each key's latest pane (window_pane.go).
	hints *paneHints
	// Row form of the pane layout (window_pane_row.go): closeTo is the
	// bound of the running close scan, closeNext the least end of the
	// index entries its closes created (burstScan: it is part of a burst,
	// window_burst.go); rowPanes and rowOut are buffers.
	closeTo, closeNext int64
	burstScan          bool
	rowPanes           []rowPane
	rowOut             []rowResult[A]

	wins     []window.Window
	winKeys  [][]byte // the store keys of wins (processTime)
	absorbed []int
	scanKeys [][]byte
	loadKeys [][]byte
}

// closeChunk is how many windows a close scan reads from the database with
// one iterator (state.Txn.Load) before closing them.
const closeChunk = 1024

// loadWindows reads into the store cache the windows of index entries iks
// ('r' entries if retained); an entry that does not parse is left to
// closeWindow to report.
func (o *windowOp[K, V, A]) loadWindows(iks [][]byte, retained bool) error {
	ws := o.loadKeys[:0]
	for _, ik := range iks {
		pk := ik
		if retained {
			pk = slices.Clone(ik)
			pk[0] = timekey.TagIndex
		}
		key, start, end, err := timekey.ParseIndexKey(pk)
		if err != nil {
			continue
		}
		switch {
		case o.d.rows:
			ws = append(ws, rowKey(nil, key))
		case o.d.pane > 0:
			ws = o.paneKeysOf(ws, key, window.Window{Start: start, End: end})
		default:
			ws = append(ws, windowKey(key, start, end))
		}
	}
	o.loadKeys = ws[:0]
	if err := o.t.txn.Load(o.name, ws); err != nil {
		return fmt.Errorf("store %s: %w", o.name, err)
	}
	return nil
}

func (o *windowOp[K, V, A]) nodeID() int { return o.n.id }

// sync begins the task's store transaction if none is open and drops the
// notes of a transaction that ended (see the invariants).
func (o *windowOp[K, V, A]) sync() {
	t := o.t
	if t.txn == nil {
		t.txn = t.db.Begin()
	}
	if t.txn == o.txn && t.txn.Epoch() == o.epoch {
		return
	}
	// Either way the ended transaction's created keys join the pending
	// notes: one not known to have aborted may have committed (the scans
	// read each noted key through the transaction; a note of a key that
	// does not exist costs at most a redundant tombstone).
	// A task commits a round and then discards the Txn (an empty round):
	// the round the scans ran in committed iff Commits moved; an aborted
	// one moved only Discards.
	o.notePending()
	if t.txn == o.txn && t.txn.Commits() != o.commits {
		o.committedScan = o.scanned // the transaction the scans ran in committed
		o.committedResume = o.resume
	} else {
		// Aborted (or unknown): its deletions were undone.
		o.scanned, o.resume = o.committedScan, o.committedResume
		o.behind = [2]bool{true, o.d.retain > 0} // until the next round's scans say
		o.nextEnd = [2]int64{math.MinInt64, math.MinInt64}
	}
	if o.aborts != t.aborts {
		// A transaction was aborted, its mark with it: load takes the
		// watermark back to the committed mark, advance to the task's.
		o.aborts = t.aborts
		o.wm, o.loaded = math.MinInt64, false
	}
	o.txn, o.epoch, o.commits = t.txn, t.txn.Epoch(), t.txn.Commits()
	clear(o.created)
	clear(o.createdRows)
	o.createdRows = o.createdRows[:0]
	clear(o.keyWins)
	clear(o.grownWins)
	o.grownWins = o.grownWins[:0]
}

// notePending moves the notes of the transaction that just committed to
// the notes of committed writes not yet known to be in Pebble, dropping
// those a flush of the store cache wrote there since they were noted (a
// flush writes every committed write the cache holds).
func (o *windowOp[K, V, A]) notePending() {
	db := o.t.db
	if f := db.Flushes(); f != o.flushMark || !db.Unflushed() {
		clear(o.pending)
		o.pending = o.pending[:0]
		clear(o.pendingRows)
		o.pendingRows = o.pendingRows[:0]
		clear(o.pendingWins)
		o.flushMark = f
	}
	if !db.Unflushed() {
		return // Pebble holds every committed write
	}
	for k := range o.created {
		o.pending = append(o.pending, k)
	}
	o.pendingRows = append(o.pendingRows, o.createdRows...)
	// A window the committed state holds as deleted needs no note (the
	// scans skip it; one created again is noted again): the notes of a key
	// stay about as many as its windows instead of its records since the
	// last flush. The new transaction holds no write of this store yet, so
	// Known answers with the committed state (or not at all: kept).
	txn := o.t.txn
	for k, ws := range o.keyWins {
		p := append(o.pendingWins[k], ws...)
		p = slices.DeleteFunc(p, func(wk []byte) bool {
			found, known := txn.Known(o.name, wk)
			return known && !found
		})
		if len(p) == 0 {
			delete(o.pendingWins, k)
		} else {
			o.pendingWins[k] = p
		}
	}
}

// load raises the operator's watermark to the store's persisted mark, once.
func (o *windowOp[K, V, A]) load() error {
	if o.loaded {
		return nil
	}
	v, found, err := o.st.get(markKey)
	if err != nil {
		return err
	}
	if found {
		if len(v) < 8 {
			return &fatalError{fmt.Errorf("store %s: watermark mark of %d bytes", o.name, len(v))}
		}
		o.closedBy = int64(binary.BigEndian.Uint64(v))
		o.closedThrough = nil
		if len(v) > 8 {
			o.closedThrough = slices.Clone(v[8:]) // a burst's cursor (window_burst.go)
		}
		o.wm = max(o.wm, o.closedBy)
	}
	if o.d.kind == "time" && !o.d.rows {
		if err := o.loadFresh(); err != nil {
			return err
		}
	}
	if o.d.emit.final && o.d.emit.earlyEach > 0 {
		if err := o.loadEarly(); err != nil {
			return err
		}
	}
	o.loaded = true
	return nil
}

// loadEarly rebuilds the set of windows an EarlyInterval firing emits from
// the store (once, when the operator starts: after a restart, a restore or
// a move of the task): the open windows whose stored count of records since
// their last emission is not zero. That count is the persisted form of the
// set, written with every update of the window (and its changelog record),
// so a window updated before a crash still gets its early result.
func (o *windowOp[K, V, A]) loadEarly() error {
	delta := o.d.closeDelta()
	lo, hi := []byte{timekey.TagWindow}, []byte{timekey.TagWindow + 1}
	err := o.t.db.Scan(o.name, lo, hi, func(k, v []byte, _ int64) error {
		p, n := binary.Uvarint(v)
		if n <= 0 || p == 0 {
			return nil // a bad value is reported when the window is read
		}
		if _, _, end, err := timekey.ParseWindowKey(k); err != nil || satAddMs(end, delta) <= o.wm {
			return nil // closed (retained)
		}
		o.early[string(k)] = struct{}{}
		return nil
	})
	if err != nil {
		return &fatalError{fmt.Errorf("store %s: scan: %w", o.name, err)}
	}
	return nil
}

// process handles one record.
func (o *windowOp[K, V, A]) process(r Record[K, V]) error {
	kb, err := encodeCarried(o.key, o.carriesKey, r.keyEnc, r.Key)
	if err != nil {
		return fmt.Errorf("store %s: encode key: %w", o.name, err)
	}
	o.sync()
	if err := o.load(); err != nil {
		return err
	}
	ts := r.Timestamp.UnixMilli()
	switch o.d.kind {
	case "session":
		return o.processSession(r, kb, ts)
	case "sliding":
		return o.processSliding(r, kb, ts)
	}
	if o.d.rows {
		return o.processRow(r, kb, ts)
	}
	if o.d.pane > 0 {
		return o.processPanes(r, kb, ts)
	}
	return o.processTime(r, kb, ts)
}

// processTime updates a record's tumbling, hopping or calendar windows.
func (o *windowOp[K, V, A]) processTime(r Record[K, V], kb []byte, ts int64) error {
	o.wins = o.d.tw.AssignTo(o.wins[:0], ts)
	if len(o.wins) == 0 {
		return nil // outside the representable times
	}
	o.khSet = false
	// Each window's store key, built once: the update's changelog record
	// keeps it.
	wks := o.winKeys[:0]
	for _, w := range o.wins {
		wks = append(wks, windowKey(kb, w.Start, w.End))
	}
	o.winKeys = wks
	defer clear(wks)
	if len(o.wins) > 1 {
		// The key's windows are neighbours in the store: one database
		// iterator reads those the cache cannot answer.
		ks := o.loadKeys[:0]
		for i, w := range o.wins {
			if !o.fresh.absent(w.End, o.keyHash(kb)) {
				ks = append(ks, wks[i])
			}
		}
		o.loadKeys = ks
		if err := o.t.txn.Load(o.name, ks); err != nil {
			return &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
		}
	}
	if o.d.late.kind == lateUpdates && satAddMs(o.wins[0].End, o.d.grace) <= o.wm {
		// A retained window's update: its close first (window_burst.go).
		n := 0
		for n < len(o.wins) && satAddMs(o.wins[n].End, o.d.grace) <= o.wm {
			n++
		}
		if _, err := o.closeTouched(kb, o.wins[:n]); err != nil {
			return err
		}
	}
	took, skipped := 0, 0
	for i, w := range o.wins {
		closeAt := satAddMs(w.End, o.d.grace)
		switch {
		case closeAt > o.wm:
			if err := o.update(r, kb, wks[i], w, w.End-1, false); err != nil {
				return err
			}
			took++
		case o.d.late.kind == lateUpdates && satAddMs(closeAt, o.d.retain) > o.wm:
			if err := o.update(r, kb, wks[i], w, w.End-1, true); err != nil {
				return err
			}
			took++
		default:
			skipped++
		}
	}
	if took == 0 {
		w := o.wins[len(o.wins)-1]
		return o.late(r, kb, w, satAddMs(w.End, o.d.grace))
	}
	if skipped > 0 {
		o.partialCount.Add(float64(skipped))
	}
	return nil
}

// windowState is a stored window, decoded.
type windowState[A any] struct {
	pending     uint64 // records since its last emission
	first, last int64  // sliding: its first and last record's times
	agg         A
}

func (o *windowOp[K, V, A]) decodeWindow(v []byte) (windowState[A], error) {
	var s windowState[A]
	p, n := binary.Uvarint(v)
	if n <= 0 {
		return s, &fatalError{fmt.Errorf("store %s: window value without its header", o.name)}
	}
	s.pending, v = p, v[n:]
	if o.d.kind == "sliding" {
		if len(v) < 16 {
			return s, &fatalError{fmt.Errorf("store %s: sliding window value without its record times", o.name)}
		}
		s.first, s.last = int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
		v = v[16:]
	}
	agg, err := o.agg.Decode(v)
	if err != nil {
		return s, fmt.Errorf("store %s: decode stored aggregate: %w", o.name, err)
	}
	s.agg = agg
	return s, nil
}

func (o *windowOp[K, V, A]) encodeWindow(s windowState[A]) ([]byte, error) {
	if n, ok := any(s.agg).(int64); ok && o.d.kind != "sliding" {
		if _, ok := any(o.agg).(int64Codec); ok {
			// A count (or an int64 reduce): one allocation, sized
			// exactly, the same bytes as the generic path.
			var hdr [binary.MaxVarintLen64]byte
			h := binary.PutUvarint(hdr[:], s.pending)
			v := make([]byte, h+8)
			copy(v, hdr[:h])
			binary.BigEndian.PutUint64(v[h:], uint64(n))
			return v, nil
		}
	}
	ab, err := o.agg.Encode(s.agg)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode aggregate: %w", o.name, err)
	}
	// Sized exactly: the cache retains it, and charges its capacity.
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], s.pending)
	n := h + len(ab)
	if o.d.kind == "sliding" {
		n += 16
	}
	v := append(make([]byte, 0, n), hdr[:h]...)
	if o.d.kind == "sliding" {
		v = binary.BigEndian.AppendUint64(v, uint64(s.first))
		v = binary.BigEndian.AppendUint64(v, uint64(s.last))
	}
	return append(v, ab...), nil
}

// put writes a store key through the round's transaction and stages its
// changelog write (kept only if the record succeeds). The changelog keeps
// key and value: the caller must not modify them afterwards.
func (o *windowOp[K, V, A]) put(key, value []byte, ts int64) error {
	if _, err := o.t.txn.Put(o.name, key, value, ts); err != nil {
		return &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
	}
	o.cl.write(key, value, ts, false)
	return nil
}

// del deletes a store key and stages its changelog tombstone.
func (o *windowOp[K, V, A]) del(key []byte, ts int64) error {
	k := slices.Clone(key)
	if err := o.t.txn.Delete(o.name, k); err != nil {
		return &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
	}
	o.cl.write(k, nil, ts, false)
	return nil
}

// get reads a store key through the round's transaction.
func (o *windowOp[K, V, A]) get(key []byte) ([]byte, bool, error) {
	v, _, found, err := o.t.txn.Get(o.name, key)
	if err != nil {
		return nil, false, &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
	}
	return v, found, nil
}

// windowKey is the 'w' entry of window [start, end) of key, in one
// allocation (a key without escaped bytes fits).
func windowKey(key []byte, start, end int64) []byte {
	return timekey.WindowKey(make([]byte, 0, len(key)+3+2*timekey.TimeSize), key, start, end)
}

// indexKey is the 'c' (open) or 'r' (retained) entry of a window.
func indexKey(key []byte, w window.Window, retained bool) []byte {
	k := timekey.IndexKey(nil, key, w.Start, w.End)
	if retained {
		k[0] = tagRetained
	}
	return k
}

// addWindow creates the index entry of window w, whose store key is wk (its
// 'w' entry is written by the caller), and notes it for the transaction's
// scans.
func (o *windowOp[K, V, A]) addWindow(kb, wk []byte, w window.Window, ts int64, retained bool) error {
	ik := indexKey(kb, w, retained)
	if !o.dbIndex {
		// The window is new, so is its index entry: no read of it.
		if _, err := o.t.txn.PutAbsent(o.name, ik, indexValue, ts); err != nil {
			return &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
		}
		o.cl.write(ik, indexValue, ts, true)
	}
	// Neither key exists before this record: closed before the next flush,
	// the window needs no changelog record.
	o.cl.write(wk, nil, ts, true)
	o.created[string(ik)] = struct{}{}
	i := 0
	if retained {
		i = 1
	}
	o.nextEnd[i] = min(o.nextEnd[i], w.End)
	if o.d.kind != "time" {
		ws := append(o.keyWins[string(kb)], wk)
		o.keyWins[string(kb)] = ws
		if n := len(ws); n >= 8 && n&(n-1) == 0 {
			o.grownWins = append(o.grownWins, string(kb))
		}
	}
	return nil
}

// pruneWins drops from the open transaction's notes of the keys in
// grownWins the windows the transaction deleted since (a session or sliding
// window is replaced by most records: under ExactlyOnce a transaction spans
// rounds, and the notes of a busy key would grow by one per record). A note
// of a window created and then deleted in the transaction is of no use
// whatever its outcome: committed, the window does not exist; aborted, the
// window is as before the transaction, which the pending notes and Pebble
// cover. Called between records only (the round's end): a record in
// flight could still be rolled back, undoing a deletion.
func (o *windowOp[K, V, A]) pruneWins() {
	txn := o.t.txn
	for _, k := range o.grownWins {
		ws, ok := o.keyWins[k]
		if !ok {
			continue
		}
		ws = slices.DeleteFunc(ws, func(wk []byte) bool {
			found, known := txn.Known(o.name, wk)
			return known && !found
		})
		if len(ws) == 0 {
			delete(o.keyWins, k)
		} else {
			o.keyWins[k] = ws
		}
	}
	clear(o.grownWins)
	o.grownWins = o.grownWins[:0]
}

// update folds r into window w of key kb, whose store key is wk (kept by
// the changelog record: not modified afterwards). retained: a closed window
// kept for LateUpdates; the update is a correction. ts is the window's
// time: its store timestamp and its results' timestamp.
func (o *windowOp[K, V, A]) update(r Record[K, V], kb, wk []byte, w window.Window, ts int64, retained bool) error {
	isTime := o.d.kind == "time"
	var s windowState[A]
	var found bool
	var err error
	if isTime {
		s, found, err = o.readTimeWindow(wk, kb, w.End)
	} else {
		s, found, err = o.readState(wk, false)
	}
	if err != nil {
		return err
	}
	if s.agg, err = o.fns.add(r, s.agg, found); err != nil {
		return err
	}
	s.pending++
	if !found {
		// The index entry first: a crash that keeps a prefix of the
		// changelog leaves at worst an index entry without its window
		// (dropped when the scan reaches it), never a window that no
		// index entry closes.
		if err := o.addWindow(kb, wk, w, ts, retained); err != nil {
			return err
		}
		if isTime && o.fresh != nil {
			o.fresh.created(w.End, o.keyHash(kb))
		}
	}
	return o.store(r, kb, wk, w, ts, s, retained)
}

// store writes window w's new state and emits what its emission says: every
// update (EmitUpdates), a correction (retained), or an early firing.
func (o *windowOp[K, V, A]) store(r Record[K, V], kb, wk []byte, w window.Window, ts int64, s windowState[A], retained bool) error {
	emit := !o.d.emit.final || retained || (o.d.emit.earlyEvery > 0 && s.pending >= uint64(o.d.emit.earlyEvery))
	if emit {
		s.pending = 0
	}
	v, err := o.encodeWindow(s)
	if err != nil {
		return err
	}
	if err := o.put(wk, v, ts); err != nil {
		return err
	}
	if o.d.emit.final && o.d.emit.earlyEach > 0 && !emit {
		o.early[string(wk)] = struct{}{}
	}
	if !emit || o.next == nil {
		return nil
	}
	return o.next(Record[Windowed[K], A]{Key: o.windowedKey(r.Key, w), Value: s.agg, Timestamp: time.UnixMilli(ts),
		Headers: r.Headers, Origin: r.Origin})
}

// readState reads the stored state of window (or pane) key wk through the
// round's transaction; absent: known not to exist (the fresh filter), so
// the transaction answers without a read.
func (o *windowOp[K, V, A]) readState(wk []byte, absent bool) (windowState[A], bool, error) {
	var s windowState[A]
	if absent {
		o.t.txn.KnowAbsent(o.name, wk)
	}
	v, found, err := o.get(wk)
	if err != nil || !found {
		return s, found, err
	}
	s, err = o.decodeWindow(v)
	return s, true, err
}

// readTimeWindow is readState for time window wk of key kb (processTime),
// ending at end: the fresh filters are asked only about a window the cache
// cannot answer (an open window is mostly a cache hit).
func (o *windowOp[K, V, A]) readTimeWindow(wk, kb []byte, end int64) (windowState[A], bool, error) {
	var s windowState[A]
	v, _, found, known, err := o.t.txn.GetKnown(o.name, wk)
	if err != nil {
		return s, false, &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
	}
	if !known {
		return o.readState(wk, o.fresh.absent(end, o.keyHash(kb)))
	}
	if !found {
		return s, false, nil
	}
	s, err = o.decodeWindow(v)
	return s, true, err
}

// keyHash is o.kh, the fresh filters' hash of key kb of the record
// processTime handles, computed at its first use in the record (a record
// whose windows the cache answers needs none).
func (o *windowOp[K, V, A]) keyHash(kb []byte) uint64 {
	if !o.khSet && o.fresh != nil {
		o.kh, o.khSet = maphash.Bytes(o.fresh.seed, kb), true
	}
	return o.kh
}

// windowedKey is the result key of key's window w.
func (o *windowOp[K, V, A]) windowedKey(key K, w window.Window) Windowed[K] {
	return Windowed[K]{Key: key, Start: time.UnixMilli(w.Start).UTC(), End: time.UnixMilli(w.End).UTC()}
}

// late routes a late record by the policy. w is the latest window it
// belonged to, closed at closeAt.
func (o *windowOp[K, V, A]) late(r Record[K, V], kb []byte, w window.Window, closeAt int64) error {
	o.lateCount.Inc()
	p := o.d.late
	if p.kind == lateDrop || p.kind == lateUpdates {
		return nil
	}
	vb, err := o.value.Encode(r.Value)
	if err != nil {
		return fmt.Errorf("store %s: encode late record's value: %w", o.name, err)
	}
	by := o.wm - closeAt
	hs := make([]Header, 0, len(r.Headers)+5)
	hs = append(hs, r.Headers...)
	hs = append(hs,
		Header{Key: HeaderLateStore, Value: []byte(o.name)},
		Header{Key: HeaderLateWindowStart, Value: strconv.AppendInt(nil, w.Start, 10)},
		Header{Key: HeaderLateWindowEnd, Value: strconv.AppendInt(nil, w.End, 10)},
		Header{Key: HeaderLateWatermark, Value: strconv.AppendInt(nil, o.wm, 10)},
		Header{Key: HeaderLateBy, Value: strconv.AppendInt(nil, by, 10)})
	if p.kind == lateTopic {
		o.t.emit(p.topic, -1, slices.Clone(kb), vb, r.Timestamp, hs)
		return nil
	}
	kr := &kgo.Record{Topic: r.Origin.Topic, Partition: r.Origin.Partition, Offset: r.Origin.Offset,
		Key: slices.Clone(kb), Value: vb, Timestamp: r.Timestamp}
	for _, h := range hs {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	now := o.t.app.cfg.clock.Now()
	o.t.deadLetter(kr, failedIn(o.n, &lateError{store: o.name, win: w, wm: o.wm, by: by}), 1, now, now)
	return nil
}

// advance closes the windows the watermark passed (timedOperator).
func (o *windowOp[K, V, A]) advance(wm int64, now time.Time) error {
	o.sync()
	o.pruneWins()
	if err := o.load(); err != nil {
		return unfatal(err)
	}
	o.wm = max(o.wm, wm)
	if o.lastEarly.IsZero() {
		o.lastEarly = now
	}
	if o.d.emit.earlyEach > 0 && now.Sub(o.lastEarly) >= o.d.emit.earlyEach {
		o.lastEarly = now
		if err := o.fireEarly(); err != nil {
			return err
		}
	}
	if o.wm == math.MinInt64 {
		o.behind = [2]bool{} // nothing can be due
		return nil
	}
	delta := o.d.closeDelta()
	budget := o.t.app.cfg.closeBurst // a burst spreads over rounds (window_burst.go)
	closed, taken, err := o.closeIndex(0, satAddMs(o.wm, -delta), budget)
	if err != nil {
		return err
	}
	switch {
	case o.d.rows:
	case o.d.pane > 0:
		o.panesClosed()
	default:
		o.fresh.closed(o.scanned[0])
	}
	if o.d.retain > 0 {
		n, nt, err := o.closeIndex(1, satAddMs(o.wm, -delta-o.d.retain), budget-taken)
		if err != nil {
			return err
		}
		closed, taken = closed+n, taken+nt
	}
	if closed == 0 && taken == 0 {
		return nil
	}
	// Persist the watermark the closes happened at (see the invariants),
	// and while a burst is behind, how far its close scan went.
	mark := binary.BigEndian.AppendUint64(nil, uint64(o.wm))
	if o.behind[0] {
		mark = append(mark, o.burstCursor()...)
	}
	if _, err := o.t.txn.Put(o.name, markKey, mark, o.wm); err != nil {
		return fmt.Errorf("store %s: %w", o.name, err)
	}
	if err := o.t.txn.Apply(); err != nil {
		return err
	}
	o.cl.writeNow(markKey, mark, o.wm, false)
	return nil
}

// unfatal returns the runtime error inside a fatalError.
func unfatal(err error) error {
	var fe *fatalError
	if errors.As(err, &fe) {
		return fe.err
	}
	return err
}

// closeIndex handles the entries of index i ('c' or 'r') with end <= maxEnd,
// in index order (end, key, start), at most budget of them (the rest wait
// for the next rounds: window_burst.go): an open window is closed (its
// final result emitted under EmitFinal) and deleted or retained; a retained
// one is deleted. It returns how many windows it handled and how many
// entries it took from the budget.
func (o *windowOp[K, V, A]) closeIndex(i int, maxEnd int64, budget int) (handled, taken int, err error) {
	if maxEnd < o.nextEnd[i] || maxEnd <= o.scanned[i] {
		o.behind[i] = false
		return 0, 0, nil
	}
	if budget <= 0 {
		o.behind[i] = true // entries may be due: the next round looks
		return 0, 0, nil
	}
	tag := byte(timekey.TagIndex)
	if i == 1 {
		tag = tagRetained
	}
	from := []byte{tag}
	switch {
	case o.resume[i] != nil:
		from = append(slices.Clone(o.resume[i]), 0) // just after it
	case o.scanned[i] != math.MinInt64:
		from = timekey.AppendTime(from, o.scanned[i]+1)
	}
	o.scans++
	keys := o.scanKeys[:0]
	var leftovers [][]byte // deleted outside the budget (freeLeftover)
	next := int64(math.MaxInt64)
	full := false // the scan stopped at the budget, not at maxEnd
	err = o.t.db.ReadScan(o.name, from, []byte{tag + 1}, func(k, _ []byte, _ int64) error {
		if len(k) < 1+timekey.TimeSize {
			return &state.CorruptionError{Store: o.name, Key: slices.Clone(k), Reason: "short window index key"}
		}
		end := readEnd(k)
		if end > maxEnd {
			next = end
			return errWindowScanStop
		}
		if len(keys) == budget {
			full = true
			return errWindowScanStop
		}
		if i == 0 && o.freeLeftover(k, end) {
			leftovers = append(leftovers, slices.Clone(k))
			return nil
		}
		keys = append(keys, slices.Clone(k))
		return nil
	})
	if err != nil && !errors.Is(err, errWindowScanStop) {
		return 0, 0, fmt.Errorf("store %s: scan: %w", o.name, err)
	}
	for _, ik := range leftovers {
		if _, err := o.closeWindow(ik, false, false); err != nil {
			return 0, 0, err
		}
	}
	var limit string // full: the last key the scan read; notes past it wait
	if full {
		limit = string(keys[len(keys)-1])
	}
	merge := func(k string) {
		if k[0] != tag {
			return
		}
		end := readEnd([]byte(k))
		switch o.noteAction(i, end, maxEnd, o.resume[i] == nil || k > string(o.resume[i]), full && k > limit) {
		case noteDue:
			keys = append(keys, []byte(k))
		case noteLater:
			next = min(next, end)
		}
	}
	for k := range o.created {
		merge(k)
	}
	for _, k := range o.pending {
		merge(k)
	}
	// The row form's notes, without a copy (see createdRows).
	for _, notes := range [][][]byte{o.createdRows, o.pendingRows} {
		for _, k := range notes {
			if k[0] != tag {
				continue
			}
			end := readEnd(k)
			switch o.noteAction(i, end, maxEnd, o.resume[i] == nil || string(k) > string(o.resume[i]), full && string(k) > limit) {
			case noteDue:
				keys = append(keys, k)
			case noteLater:
				next = min(next, end)
			}
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	if len(keys) > budget {
		keys, full = keys[:budget], true
	}
	o.scanKeys = keys[:0]
	// A close may create index entries past maxEnd (a row's next window,
	// window_pane_row.go): closeNext is the least of their ends. In a
	// burst (a scan that resumes or stops at the budget) a row close logs
	// the row it writes back (window_burst.go).
	o.closeTo, o.closeNext = maxEnd, math.MaxInt64
	o.burstScan = full || o.resume[i] != nil
	for j, ik := range keys {
		if j%closeChunk == 0 {
			if err := o.loadWindows(keys[j:min(j+closeChunk, len(keys))], i == 1); err != nil {
				return handled, taken, err
			}
		}
		ok, err := o.closeWindow(ik, i == 1, false)
		if err != nil {
			return handled, taken, err
		}
		taken++
		if ok {
			handled++
		}
	}
	o.behind[i] = full
	if full {
		// Every entry up to the last one taken is handled; the next
		// round resumes after it. (A row close's new entries are past
		// maxEnd, so past it too.)
		last := slices.Clone(keys[len(keys)-1])
		end := readEnd(last)
		o.resume[i], o.scanned[i], o.nextEnd[i] = last, end-1, end
		return handled, taken, nil
	}
	o.scanned[i], o.nextEnd[i], o.resume[i] = maxEnd, min(next, o.closeNext), nil
	return handled, taken, nil
}

// What a close scan of index i does with a noted index key (noteAction).
const (
	noteSkip  = iota // handled by an earlier scan, or a later round's
	noteDue          // closed by this scan
	noteLater        // past this scan's bound: its end bounds nextEnd
)

// noteAction says what a close scan of index i up to maxEnd does with a
// noted index key with end end, ordered after the scan's resume cursor
// (afterResume; true without one) and after the last entry its budget took
// (pastLimit; false unless the scan is full).
func (o *windowOp[K, V, A]) noteAction(i int, end, maxEnd int64, afterResume, pastLimit bool) int {
	switch {
	case end <= o.scanned[i] || !afterResume:
		return noteSkip // handled by an earlier scan (a pending note)
	case pastLimit:
		return noteSkip // after the budget's last entry: a later round's
	case end <= maxEnd:
		return noteDue
	}
	return noteLater
}

// readEnd is the end time of an index key ('c' or 'r').
func readEnd(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[1:]) ^ (1 << 63))
}

// closeWindow closes (or, retained, deletes) the window of index entry ik,
// if the transaction still holds it. rec: the close is part of the record
// being processed (closeTouched, window_burst.go): its writes and output
// are the record's, kept only if the record succeeds.
func (o *windowOp[K, V, A]) closeWindow(ik []byte, retained, rec bool) (bool, error) {
	t := o.t
	if o.d.rows {
		// No retained windows in pane layout; the database derives the row
		// form's index (closeRow).
		key, start, end, err := timekey.ParseIndexKey(ik)
		if err != nil {
			return false, fmt.Errorf("store %s: %w", o.name, err)
		}
		return o.closeRow(key, window.Window{Start: start, End: end}, rec)
	}
	// The scan found ik in the database; the round may have deleted it. (A
	// derived index (dbIndex) is not in the transaction: the window itself
	// says whether it is still open.)
	if !o.dbIndex {
		if found, known := t.txn.Known(o.name, ik); known && !found {
			return false, nil
		}
	}
	pk := ik
	if retained {
		pk = slices.Clone(ik)
		pk[0] = timekey.TagIndex
	}
	key, start, end, err := timekey.ParseIndexKey(pk)
	if err != nil {
		return false, fmt.Errorf("store %s: %w", o.name, err)
	}
	w := window.Window{Start: start, End: end}
	if !retained && o.dbIndex && o.closedBefore(ik, end) {
		// Closed before the mark was written (not reached: a window's
		// tombstone precedes the mark in the changelog): delete it unread.
		// (Never a record's close: closeTouched serves stores whose index
		// is not derived by the database.)
		return false, o.dropWindow(windowKey(key, start, end), o.windowTime(w))
	}
	if !retained && o.closedBefore(ik, end) {
		// Closed before the mark was written: a leftover the restore
		// derived from a pane that outlives the window.
		if err := t.txn.DeleteKnown(o.name, ik, o.windowTime(w)); err != nil {
			return false, fmt.Errorf("store %s: %w", o.name, err)
		}
		o.clWrite(rec, ik, nil, o.windowTime(w), false)
		return false, t.txn.Apply()
	}
	wk := windowKey(key, start, end)
	var v []byte
	var found bool
	var paneDels [][]byte // pane layout: the panes only w holds
	if o.d.pane > 0 {
		v, found, paneDels, err = o.paneWindow(key, w)
	} else {
		v, found, err = o.get(wk)
	}
	if err != nil {
		return false, unfatal(err)
	}
	if o.dbIndex && !found {
		return false, nil // the entry outlived its window in the database until its next write
	}
	ts := o.windowTime(w)
	// The close's changelog writes are recorded with its store writes: if
	// they fail to apply, the task stops and nothing is committed.
	// The window before its index entry (see update), and a retained
	// window's new entry before its old one goes.
	keep := !retained && o.d.retain > 0 && satAddMs(end, o.d.closeDelta()+o.d.retain) > o.wm
	if keep && found {
		rk := indexKey(key, w, true)
		if _, err := t.txn.PutAbsent(o.name, rk, indexValue, ts); err != nil {
			return false, fmt.Errorf("store %s: %w", o.name, err)
		}
		o.clWrite(rec, rk, indexValue, ts, true)
		o.nextEnd[1] = min(o.nextEnd[1], end)
		o.created[string(rk)] = struct{}{}
	} else if o.d.pane > 0 {
		for _, dk := range paneDels {
			if err := t.txn.DeleteCold(o.name, dk); err != nil {
				return false, fmt.Errorf("store %s: %w", o.name, err)
			}
			o.clWrite(rec, dk, nil, ts, false)
		}
	} else if found {
		// Closed: not read again (a late record finds it deleted in
		// the database as well).
		if err := t.txn.DeleteCold(o.name, wk); err != nil {
			return false, fmt.Errorf("store %s: %w", o.name, err)
		}
		o.clWrite(rec, wk, nil, ts, false)
	}
	// The index entry was written at ts and the scan found it: delete it
	// without reading it (a derived one goes with its window).
	if !o.dbIndex {
		if err := o.deleteIndex(ik, ts, rec); err != nil {
			return false, fmt.Errorf("store %s: %w", o.name, err)
		}
		o.clWrite(rec, ik, nil, ts, false)
	}
	if !rec {
		if err := t.txn.Apply(); err != nil {
			return false, err
		}
	}
	delete(o.early, string(wk))
	if retained || !found || !o.d.emit.final || o.next == nil {
		return true, nil
	}
	s, err := o.decodeWindow(v)
	if err != nil {
		return true, unfatal(err)
	}
	k, err := o.key.Decode(key)
	if err != nil {
		return true, fmt.Errorf("store %s: decode stored key: %w", o.name, err)
	}
	out := Record[Windowed[K], A]{Key: o.windowedKey(k, w), Value: s.agg, Timestamp: time.UnixMilli(ts)}
	if rec {
		return true, o.next(out)
	}
	return true, o.emitResult(out, wk, v, ts)
}

// dropWindow deletes window wk, if it exists, with its changelog tombstone,
// without emitting it.
func (o *windowOp[K, V, A]) dropWindow(wk []byte, ts int64) error {
	_, found, err := o.get(wk)
	if err != nil || !found {
		return unfatal(err)
	}
	if err := o.t.txn.DeleteCold(o.name, wk); err != nil {
		return fmt.Errorf("store %s: %w", o.name, err)
	}
	o.cl.writeNow(wk, nil, ts, false)
	return o.t.txn.Apply()
}

// emitResult forwards a window's result as task.emitTimed runs a
// time-driven operator's work (all or nothing; a user failure sends the
// window, named by origin, to the dead-letter topic), building the origin
// record only when it is needed.
func (o *windowOp[K, V, A]) emitResult(out Record[Windowed[K], A], wk, v []byte, ts int64) error {
	return o.emitResultOf(out, func() (*kgo.Record, error) { return o.origin(wk, v, ts), nil })
}

// emitResultOf is emitResult with the origin built by origin, called only
// when the emission fails (an error from it stops the task).
func (o *windowOp[K, V, A]) emitResultOf(out Record[Windowed[K], A], origin func() (*kgo.Record, error)) error {
	t := o.t
	err := t.attempt(func(*kgo.Record) error { return failedIn(o.n, o.next(out)) }, nil)
	if err == nil {
		return nil
	}
	var fatal *fatalError
	if errors.As(err, &fatal) {
		return fatal.err
	}
	kr, oerr := origin()
	if oerr != nil {
		return oerr
	}
	now := t.app.cfg.clock.Now()
	t.deadLetter(kr, err, 1, now, now)
	return nil
}

// origin is what a failed emission of window wk names in the dead-letter
// topic: the store's input partition, the window's store key and value.
func (o *windowOp[K, V, A]) origin(wk, v []byte, ts int64) *kgo.Record {
	t := o.t
	return &kgo.Record{Topic: t.app.topicOf(t.app.b.sources[o.st.spec.source]), Partition: t.id.partition, Offset: -1,
		Key: wk, Value: v, Timestamp: time.UnixMilli(ts)}
}

// windowTime is the timestamp of a window's results and store entries: its
// last instant (end exclusive for time windows).
func (o *windowOp[K, V, A]) windowTime(w window.Window) int64 {
	if o.d.kind == "time" {
		return w.End - 1
	}
	return w.End
}

// fireEarly emits the current result of every window updated since the
// last interval firing (EarlyInterval), in key order.
func (o *windowOp[K, V, A]) fireEarly() error {
	if len(o.early) == 0 {
		return nil
	}
	t := o.t
	keys := make([]string, 0, len(o.early))
	for k := range o.early {
		keys = append(keys, k)
	}
	clear(o.early)
	slices.Sort(keys)
	for _, k := range keys {
		wk := []byte(k)
		v, found, err := o.get(wk)
		if err != nil {
			return unfatal(err)
		}
		if !found {
			continue
		}
		s, err := o.decodeWindow(v)
		if err != nil {
			return unfatal(err)
		}
		if s.pending == 0 {
			continue
		}
		key, start, end, err := timekey.ParseWindowKey(wk)
		if err != nil {
			return fmt.Errorf("store %s: %w", o.name, err)
		}
		if satAddMs(end, o.d.closeDelta()) <= o.wm {
			continue // closed: its final result is due, not an early one
		}
		w := window.Window{Start: start, End: end}
		ts := o.windowTime(w)
		s.pending = 0
		nv, err := o.encodeWindow(s)
		if err != nil {
			return unfatal(err)
		}
		if _, err := t.txn.Put(o.name, wk, nv, ts); err != nil {
			return fmt.Errorf("store %s: %w", o.name, err)
		}
		if err := t.txn.Apply(); err != nil {
			return err
		}
		o.cl.writeNow(wk, nv, ts, false)
		if o.next == nil {
			continue
		}
		kk, err := o.key.Decode(key)
		if err != nil {
			return fmt.Errorf("store %s: decode stored key: %w", o.name, err)
		}
		out := Record[Windowed[K], A]{Key: o.windowedKey(kk, w), Value: s.agg, Timestamp: time.UnixMilli(ts)}
		if err := t.emitTimed(func() error { return failedIn(o.n, o.next(out)) }, o.origin(wk, nv, ts)); err != nil {
			return err
		}
	}
	return nil
}

// keyWindow is one of a key's stored windows.
type keyWindow struct {
	wk  []byte
	w   window.Window
	val []byte
}

// keyWindows returns key kb's windows with end >= minEnd, in end order,
// stopping at the first that starts after maxStart (sliding and session
// windows: a later end has a later start).
func (o *windowOp[K, V, A]) keyWindows(kb []byte, minEnd, maxStart int64) ([]keyWindow, error) {
	lo, hi := timekey.KeyWindows(kb, minEnd)
	var keys [][]byte
	// TaskScan: ReadScan's view (no flush) on a kept iterator; one scan
	// per record made a new Pebble iterator the cost of a session record.
	err := o.t.db.TaskScan(o.name, lo, hi, func(k, _ []byte, _ int64) error {
		if start := int64(binary.BigEndian.Uint64(k[len(k)-8:]) ^ (1 << 63)); start > maxStart {
			return errWindowScanStop
		}
		keys = append(keys, slices.Clone(k))
		return nil
	})
	if err != nil && !errors.Is(err, errWindowScanStop) {
		return nil, &fatalError{fmt.Errorf("store %s: scan: %w", o.name, err)}
	}
	for _, notes := range []map[string][][]byte{o.keyWins, o.pendingWins} {
		for _, k := range notes[string(kb)] {
			if bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	out := make([]keyWindow, 0, len(keys))
	for _, k := range keys {
		v, found, err := o.get(k)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		_, start, end, err := timekey.ParseWindowKey(k)
		if err != nil {
			return nil, &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
		}
		if start > maxStart {
			break
		}
		out = append(out, keyWindow{wk: k, w: window.Window{Start: start, End: end}, val: v})
	}
	return out, nil
}

// satAddMs is a + b saturated to the int64 range.
func satAddMs(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return math.MaxInt64
	}
	if b < 0 && s > a {
		return math.MinInt64
	}
	return s
}

// msDuration is ms milliseconds as a duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// indexScans is how many close index scans the operator ran (tests).
func (o *windowOp[K, V, A]) indexScans() int { return o.scans }

// pendingNotes is how many window keys the pending notes hold (tests).
func (o *windowOp[K, V, A]) pendingNotes() int {
	n := 0
	for _, ws := range o.pendingWins {
		n += len(ws)
	}
	return n
}

// txnNotes is how many window keys the open transaction's notes hold
// (tests).
func (o *windowOp[K, V, A]) txnNotes() int {
	n := 0
	for _, ws := range o.keyWins {
		n += len(ws)
	}
	return n
}
