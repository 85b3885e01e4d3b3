package stream

import (
	"fmt"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/weirhq/weir/stream/internal/window"
)

// Windows is a window specification for WindowedCount, WindowedReduce and
// WindowedAggregate: Tumbling, Hopping, Sliding or Session.
type Windows interface {
	// describe names the windows for App.Describe.
	describe() string
	validate() error
}

// TimeWindows are tumbling or hopping windows of event time (Kafka Streams'
// TimeWindows): [start, end) with end exclusive, aligned to the epoch
// (shifted by WindowOffset) or, with WindowIn, to the wall clock of a time
// zone.
type TimeWindows struct{ w window.TimeWindows }

// WindowOpt configures Tumbling or Hopping windows.
type WindowOpt func(*window.TimeWindows)

// Tumbling returns windows of size that do not overlap: each record is in
// exactly one.
func Tumbling(size time.Duration, opts ...WindowOpt) TimeWindows {
	return Hopping(size, size, opts...)
}

// Hopping returns windows of size starting every advance (advance <= size):
// each record is in size/advance windows (rounded up or down).
//
// Panes: with EmitFinal (no early firing), no Retain, no WindowIn, an
// operation with a merge function (WindowedCount, WindowedReduce,
// WindowedAggregate given merge) and gcd(size, advance) >= advance/2, the
// store keeps one partial aggregate per key and pane of width gcd(size,
// advance) instead of one per window: a record updates one pane, and a
// window's result combines its size/gcd panes when it closes (window
// slicing, as Flink's sliced windows); with at most 32 panes a window, a
// key's panes are one store entry. Queries (QueryWindows, App.Range,
// App.Get of a window key) still read windows. Other declarations keep one entry per window (every
// update or early result would combine the panes again). The layout
// follows from the declaration and is persisted: a change of declaration
// that changes it needs a new store name.
func Hopping(size, advance time.Duration, opts ...WindowOpt) TimeWindows {
	w := window.TimeWindows{Size: size, Advance: advance}
	for _, o := range opts {
		if o != nil {
			o(&w)
		}
	}
	return TimeWindows{w: w}
}

// WindowOffset shifts the windows: they start at offset + k*advance after
// the epoch (after local midnight of 1970-01-01 with WindowIn). For
// instance Tumbling(24*time.Hour, WindowOffset(6*time.Hour)) has days that
// start at 06:00.
func WindowOffset(offset time.Duration) WindowOpt {
	return func(w *window.TimeWindows) { w.Offset = offset }
}

// WindowIn lays the windows on the wall clock of loc (calendar windows):
// size, advance and offset are measured on that clock, so a daily window
// runs from local midnight to local midnight — 23 hours on the day the
// clock springs forward, 25 on the day it falls back — and an hourly window
// in the repeated hour of autumn holds both passes of it (two real hours).
// The window's End is then not always Start + size: use WindowedKeys for its
// key codec. The zone's rules come from loc (time.LoadLocation reads the
// system's zoneinfo; a program that must not depend on it imports
// time/tzdata).
func WindowIn(loc *time.Location) WindowOpt {
	return func(w *window.TimeWindows) { w.Location = loc }
}

func (w TimeWindows) validate() error { return w.w.Validate() }

func (w TimeWindows) describe() string {
	var s string
	if w.w.Advance == w.w.Size {
		s = fmt.Sprintf("tumbling %v", w.w.Size)
	} else {
		s = fmt.Sprintf("hopping %v advancing %v", w.w.Size, w.w.Advance)
	}
	if w.w.Offset != 0 {
		s += fmt.Sprintf(" offset %v", w.w.Offset)
	}
	if w.w.Location != nil {
		s += " in " + w.w.Location.String()
	}
	return s
}

// SlidingWindows are Kafka Streams' sliding windows (SlidingWindows): a
// window [start, start + timeDifference], both ends inclusive, for every
// distinct set of a key's records whose times differ by at most
// timeDifference — created as records enter and leave the span, never
// empty.
type SlidingWindows struct{ w window.Sliding }

// Sliding returns sliding windows with the given time difference.
func Sliding(timeDifference time.Duration) SlidingWindows {
	return SlidingWindows{w: window.Sliding{TimeDifference: timeDifference}}
}

func (w SlidingWindows) validate() error { return w.w.Validate() }
func (w SlidingWindows) describe() string {
	return fmt.Sprintf("sliding, time difference %v", w.w.TimeDifference)
}

// SessionWindows are session windows (Kafka Streams' SessionWindows): a
// key's session runs from its first to its last record (both inclusive) and
// ends after gap of event time without records; a record within gap of two
// sessions merges them into one.
//
// A session's key (Windowed: key, start, end) changes whenever a record
// extends it or merges it with another. As Kafka Streams does, the table of
// results retracts the keys that stop existing: when a record turns
// sessions into a new one, each absorbed session whose result was already
// emitted (every update under EmitUpdates or with early firing; a closed,
// retained one under LateUpdates) is followed downstream by a tombstone
// (Record.Tombstone; a sink writes a null value), before the new session's
// result. A consumer upserting the results by key therefore holds exactly
// the current sessions.
type SessionWindows struct{ w window.Sessions }

// Session returns session windows with the given inactivity gap.
func Session(gap time.Duration) SessionWindows { return SessionWindows{w: window.Sessions{Gap: gap}} }

func (w SessionWindows) validate() error  { return w.w.Validate() }
func (w SessionWindows) describe() string { return fmt.Sprintf("session, gap %v", w.w.Gap) }

// LatePolicy says what happens to a late record: one whose every window is
// closed (the watermark passed the window's end plus the grace). Every
// windowed operation declares one; there is no default. See DropLate,
// LateToTopic, LateToDLQ and LateUpdates.
type LatePolicy interface {
	late() latePolicy
}

type lateKind int

const (
	lateDrop lateKind = iota + 1
	lateTopic
	lateDLQ
	lateUpdates
)

type latePolicy struct {
	kind  lateKind
	topic string
}

func (p latePolicy) late() latePolicy { return p }

func (p latePolicy) String() string {
	switch p.kind {
	case lateDrop:
		return "drop (counted)"
	case lateTopic:
		return "to topic " + p.topic
	case lateDLQ:
		return "to the dead-letter topic"
	case lateUpdates:
		return "update the retained window and emit a correction"
	}
	return "?"
}

// DropLate drops late records. Each is counted in the metric
// weir_stream_window_late_records_total{store, policy="drop"} and in
// App.Describe.
func DropLate() LatePolicy { return latePolicy{kind: lateDrop} }

// LateToTopic writes each late record, unchanged (its key and value encoded
// by the group's codecs, its timestamp and headers), to topic, with the
// headers HeaderLateStore, HeaderLateWindowStart, HeaderLateWindowEnd,
// HeaderLateWatermark and HeaderLateBy added. The topic must exist when the
// App starts, like a To topic.
func LateToTopic(topic string) LatePolicy { return latePolicy{kind: lateTopic, topic: topic} }

// LateToDLQ sends each late record to the App's dead-letter topic (with the
// late headers of LateToTopic, and the dead-letter headers naming the
// windowed operator and the reason "late").
func LateToDLQ() LatePolicy { return latePolicy{kind: lateDLQ} }

// LateUpdates lets a late record update its windows as long as the store
// still holds them — up to WindowedStore.Retain of watermark after they
// closed — and emits the corrected results downstream (for EmitFinal a
// second result for a window, which a consumer keyed by the window
// upserts). It works for every kind of windows, as Kafka Streams' grace
// period does for late records (weir's Grace + Retain playing its part):
//   - time windows (tumbling, hopping, calendar): each of the record's
//     windows still retained takes it;
//   - sliding windows: the record updates the windows holding it and
//     creates those it makes (Sliding), each emitted if closed;
//   - sessions: the record joins, extends or merges sessions as an on-time
//     one would; a session it absorbs whose result was emitted is
//     retracted downstream with a tombstone (see SessionWindows).
//
// A sliding or session record is taken while the watermark is below its
// time + 1 + Grace + Retain: then every window it can touch is still in the
// store. A record later than that is dropped and counted (policy label
// "updates-expired").
func LateUpdates() LatePolicy { return latePolicy{kind: lateUpdates} }

// Headers of a late record written by LateToTopic or LateToDLQ. Times are
// decimal milliseconds since the epoch.
const (
	HeaderLateStore       = "weir.late.store"        // the windowed store
	HeaderLateWindowStart = "weir.late.window.start" // the latest window the record belonged to
	HeaderLateWindowEnd   = "weir.late.window.end"   // its end (exclusive for time windows)
	HeaderLateWatermark   = "weir.late.watermark"    // the task's watermark when the record came
	HeaderLateBy          = "weir.late.by"           // watermark minus (window end + grace), ms: how late
)

// Emission says when a windowed operation emits results: EmitFinal or
// EmitUpdates. Every windowed operation declares one.
type Emission interface{ emission() emission }

type emission struct {
	final      bool
	earlyEvery int64
	earlyEach  time.Duration
}

func (e emission) emission() emission { return e }

func (e emission) String() string {
	if !e.final {
		return "every update (per round)"
	}
	s := "final, when the window closes"
	if e.earlyEvery > 0 {
		s += fmt.Sprintf("; early every %d records", e.earlyEvery)
	}
	if e.earlyEach > 0 {
		s += fmt.Sprintf("; early every %v (processing time)", e.earlyEach)
	}
	return s
}

// EarlyFiring makes EmitFinal also emit a window's current (partial)
// result before the window closes: EarlyEvery, EarlyInterval.
type EarlyFiring func(*emission)

// EarlyEvery emits a window's partial result each time it has taken n
// records since its last emission.
func EarlyEvery(n int) EarlyFiring { return func(e *emission) { e.earlyEvery = int64(n) } }

// EarlyInterval emits, every d of processing time, the partial result of
// each window updated since its last emission. Which windows those are is
// kept with each window in the store, so it survives restarts and moves of
// the task (the first interval runs from the restarted task's first round).
func EarlyInterval(d time.Duration) EarlyFiring { return func(e *emission) { e.earlyEach = d } }

// EmitFinal emits one result per window, when the window closes: once the
// watermark passes its end plus the grace (Kafka Streams'
// suppress(untilWindowCloses) and EmitStrategy.onWindowClose; Flink's
// default). Early firings add partial results before it; LateUpdates adds
// corrections after it. When the watermark passes more windows at once than
// WindowClosesPerRound, their results come over the next rounds, in close
// order; each window is closed to records from the moment the watermark
// passed it.
func EmitFinal(early ...EarlyFiring) Emission {
	e := emission{final: true}
	for _, f := range early {
		if f != nil {
			f(&e)
		}
	}
	return e
}

// EmitUpdates emits each window's latest result whenever it changes (per
// processing round, like an aggregate's table; Kafka Streams' default):
// downstream sees updates of a window and upserts them.
func EmitUpdates() Emission { return emission{} }

// WindowedStore declares a windowed operation's store and time semantics.
type WindowedStore struct {
	// Name of the store, unique in the topology; it names the changelog
	// "<app>-<name>-changelog" (and "<app>-<name>-repartition" when the
	// operation repartitions).
	Name string
	// Grace is the allowed lateness (Kafka Streams' grace period): a
	// window closes when the watermark passes its end plus Grace. >= 0.
	Grace time.Duration
	// Late is what happens to a late record. Required.
	Late LatePolicy
	// Emit is when results are emitted: EmitFinal or EmitUpdates. Required.
	Emit Emission
	// Retain keeps a closed window in the store this much longer (in
	// watermark time) for queries and for LateUpdates; the retention is
	// the window's size + Grace + Retain. >= 0.
	Retain time.Duration
}

// windowDecl is a windowed store's validated declaration.
type windowDecl struct {
	kind   string // "time", "sliding", "session"
	tw     window.TimeWindows
	sl     window.Sliding
	ss     window.Sessions
	grace  int64 // ms
	retain int64 // ms: how long a closed window is kept (sliding: + time difference + 1)
	// lateRetain is WindowedStore.Retain (ms): how long after its close a
	// window still takes late records (LateUpdates).
	lateRetain int64
	late       latePolicy
	emit       emission
	// windows names the windows; desc states the store (describe), its
	// late records' destination as the policy names it.
	windows string
	desc    string
	// pane is the width (ms) of the panes of a store in pane layout
	// (window_pane.go), 0 for one entry per window; combine folds a
	// window's stored pane values into its value (queries); rows: the
	// panes of a key are one store entry (window_pane_row.go).
	pane    int64
	rows    bool
	combine func(vals [][]byte) ([]byte, error)
}

// declareWindow validates a windowed operation's declaration, recording its
// errors; nil if it is invalid.
func (b *Builder) declareWindow(op string, w Windows, store WindowedStore, hasMerge bool) *windowDecl {
	var errs []string
	if err := validTopic(store.Name); err != nil {
		errs = append(errs, fmt.Sprintf("store: %v", err))
	}
	for _, st := range b.stores {
		if st.name == store.Name {
			errs = append(errs, "store declared twice")
		}
	}
	d := &windowDecl{grace: store.Grace.Milliseconds(), retain: store.Retain.Milliseconds(),
		lateRetain: store.Retain.Milliseconds()}
	switch w := w.(type) {
	case nil:
		errs = append(errs, "no windows: pass Tumbling, Hopping, Sliding or Session")
	case TimeWindows:
		d.kind, d.tw = "time", w.w
	case SlidingWindows:
		d.kind, d.sl = "sliding", w.w
		// A closed sliding window is still read to seed the windows of
		// later records within the time difference: kept that much longer.
		d.retain += w.w.TimeDifference.Milliseconds() + 1
	case SessionWindows:
		d.kind, d.ss = "session", w.w
		if !hasMerge {
			errs = append(errs, "session windows merge sessions: pass a merge function")
		}
	default:
		errs = append(errs, fmt.Sprintf("unknown windows %T", w))
	}
	if w != nil {
		if err := w.validate(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if store.Grace < 0 || store.Grace%time.Millisecond != 0 {
		errs = append(errs, fmt.Sprintf("grace %v: want a non-negative whole number of milliseconds", store.Grace))
	}
	if store.Retain < 0 || store.Retain%time.Millisecond != 0 {
		errs = append(errs, fmt.Sprintf("retain %v: want a non-negative whole number of milliseconds", store.Retain))
	}
	if store.Late == nil {
		errs = append(errs, "no late policy: set Late to DropLate(), LateToTopic(name), LateToDLQ() or LateUpdates()")
	} else {
		d.late = store.Late.late()
		if d.late.kind == lateTopic {
			if err := validTopic(d.late.topic); err != nil {
				errs = append(errs, fmt.Sprintf("late topic: %v", err))
			}
		}
		if d.late.kind == lateUpdates && store.Retain == 0 {
			errs = append(errs, "LateUpdates needs Retain > 0: a closed window is kept that long for late records")
		}
	}
	if store.Emit == nil {
		errs = append(errs, "no emission: set Emit to EmitFinal() or EmitUpdates()")
	} else {
		d.emit = store.Emit.emission()
		if d.emit.earlyEvery < 0 || d.emit.earlyEach < 0 {
			errs = append(errs, "early firing: want a positive record count or interval")
		}
	}
	if len(errs) > 0 {
		b.errorf("%s %q: %s", op, store.Name, strings.Join(errs, "; "))
		return nil
	}
	d.windows = w.describe()
	d.pane = d.paneWidth(hasMerge)
	d.rows = d.pane > 0 && d.tw.Size.Milliseconds()/d.pane <= paneRowMax
	d.desc = d.describe(d.late.String())
	return d
}

// describe states the windowed store for App.Describe, its late records
// going to late.
func (d *windowDecl) describe(late string) string {
	s := fmt.Sprintf("windowed (%s), grace %v, retain %v after close, late records: %s, emit: %s",
		d.windows, msDuration(d.grace), msDuration(d.lateRetain), late, d.emit)
	switch {
	case d.rows:
		s += fmt.Sprintf("; stored as panes of %v (one row of partials per key, combined when a window closes)", msDuration(d.pane))
	case d.pane > 0:
		s += fmt.Sprintf("; stored as panes of %v (one partial per key and pane, combined when a window closes)", msDuration(d.pane))
	}
	return s
}

// windowDescription states a windowed store for App.Describe, naming where
// its late records go as this App writes them: the late topic, or the
// dead-letter topic of the input each late record came from (through
// repartitions, the input the record was first read from, as its
// dead-letter headers say).
func (a *App) windowDescription(spec *storeSpec) (desc string) {
	d := spec.win
	if d == nil {
		return spec.window
	}
	defer func() { desc += a.burstDescription() }()
	if d.late.kind != lateDLQ {
		return d.describe(d.late.String())
	}
	var dlqs []string
	for _, in := range a.originInputs(spec.source) {
		if t := a.dlqTopic(in); !slices.Contains(dlqs, t) {
			dlqs = append(dlqs, t)
		}
	}
	slices.Sort(dlqs)
	if len(dlqs) == 1 {
		return d.describe("to the dead-letter topic " + dlqs[0])
	}
	return d.describe("to the dead-letter topic of the record's input: " + strings.Join(dlqs, ", "))
}

// originInputs returns the input topics whose records reach source src:
// src's own topic, or through a repartition topic its upstream sources'
// inputs, sorted.
func (a *App) originInputs(src int) []string {
	var out []string
	seen := map[int]bool{}
	var visit func(i int)
	visit = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		s := a.b.sources[i]
		if !s.internal || len(s.upstream) == 0 {
			out = append(out, a.topicOf(s))
			return
		}
		for _, u := range s.upstream {
			visit(u)
		}
	}
	visit(src)
	slices.Sort(out)
	return slices.Compact(out)
}

// closeDelta is the distance from a window's end to the watermark that
// closes it (window.CloseAt): a window with end e is closed at watermark
// wm >= e + closeDelta.
func (d *windowDecl) closeDelta() int64 {
	switch d.kind {
	case "sliding":
		return 1 + d.grace
	case "session":
		return d.ss.Gap.Milliseconds() + 1 + d.grace
	}
	return d.grace
}

// WindowedKeys returns the codec of the windowed keys w produces, in Kafka
// Streams' formats (see TimeWindowed and SessionWindowed): for a sink of a
// windowed table's stream.
func WindowedKeys[K any](key Codec[K], w Windows) Codec[Windowed[K]] {
	switch w := w.(type) {
	case TimeWindows:
		if w.w.Location == nil {
			return TimeWindowed(key, w.w.Size)
		}
		tw := w.w
		return TimeWindowedEnd(key, func(start time.Time) time.Time {
			ms := start.UnixMilli()
			for _, win := range tw.AssignTo(nil, ms) {
				if win.Start == ms {
					return time.UnixMilli(win.End).UTC()
				}
			}
			return start.Add(tw.Size)
		})
	case SlidingWindows:
		return TimeWindowed(key, w.w.TimeDifference)
	case SessionWindows:
		return SessionWindowed(key)
	}
	return nil
}

// WindowedCount counts the records per key and window into a table keyed
// by Windowed[K] (Kafka Streams' windowedBy(...).count()).
func WindowedCount[K, V any](g Grouped[K, V], w Windows, store WindowedStore) Table[Windowed[K], int64] {
	return windowed(g, w, store, "windowed-count", Int64(), windowFns[K, V, int64]{
		add:   func(_ Record[K, V], n int64, _ bool) (int64, error) { return n + 1, nil },
		merge: func(a, b int64) (int64, error) { return a + b, nil },
	})
}

// WindowedReduce combines the values per key and window with fn(previous,
// new); a window's first value is stored as is. Sessions merge with fn too.
// The table's values use the group's value codec. Hopping windows with
// EmitFinal keep partial results per pane (see Hopping) and combine them
// with fn when a window closes: fn must be associative and commutative
// there (a sum, a max), as it must for a result independent of the
// records' arrival order anyway.
func WindowedReduce[K, V any](g Grouped[K, V], w Windows, store WindowedStore, fn func(agg, v V) (V, error)) Table[Windowed[K], V] {
	if g.valueErr != nil && g.s.b != nil {
		g.s.b.errorf("windowed reduce %q: %v", store.Name, g.valueErr)
		return Table[Windowed[K], V]{b: g.s.b}
	}
	return windowed(g, w, store, "windowed-reduce", g.value, windowFns[K, V, V]{
		add: func(r Record[K, V], agg V, found bool) (V, error) {
			if !found {
				return r.Value, nil
			}
			return fn(agg, r.Value)
		},
		merge: fn,
	})
}

// WindowedAggregate folds the records per key and window into aggregates of
// type A, starting from init() for a new window. merge combines the
// aggregates of two sessions a record bridges (older first): required for
// Session windows; given for Hopping windows with EmitFinal, it lets the
// store keep one partial aggregate per pane instead of one per window (see
// Hopping), merged (older first) when a window closes; unused (may be nil)
// for the others. A's codec is
// inferred (InferCodec) or given with Codecs (whose key codec is ignored).
func WindowedAggregate[K, V, A any](g Grouped[K, V], w Windows, store WindowedStore, init func() A,
	fn func(r Record[K, V], agg A) (A, error), merge func(a, b A) (A, error), opts ...CodecOpt[K, A],
) Table[Windowed[K], A] {
	var codec Codec[A]
	for _, o := range opts {
		codec = cmpOr(o.value, codec)
	}
	if codec == nil {
		var err error
		if codec, err = InferCodec[A](); err != nil {
			if g.s.b != nil {
				g.s.b.errorf("windowed aggregate %q: %v", store.Name, err)
			}
			return Table[Windowed[K], A]{b: g.s.b}
		}
	}
	if fn == nil {
		if g.s.b != nil {
			g.s.b.errorf("windowed aggregate %q: nil aggregator", store.Name)
		}
		return Table[Windowed[K], A]{b: g.s.b}
	}
	return windowed(g, w, store, "windowed-aggregate", codec, windowFns[K, V, A]{
		add: func(r Record[K, V], agg A, found bool) (A, error) {
			if !found && init != nil {
				agg = init()
			}
			return fn(r, agg)
		},
		merge: merge,
	})
}

// windowFns are a windowed operation's aggregation functions: add folds a
// record into a window's aggregate (found false: a new window, agg is the
// zero A), merge combines two sessions' aggregates.
type windowFns[K, V, A any] struct {
	add   func(r Record[K, V], agg A, found bool) (A, error)
	merge func(a, b A) (A, error)
}

// windowLateSummary states the late records a windowed store counted so
// far, by policy (App.Describe).
func (a *App) windowLateSummary(store string) string {
	var parts []string
	for _, label := range []string{"drop", "topic", "dlq", "updates-expired", "partial"} {
		c, err := a.metrics.windowLate.GetMetricWithLabelValues(store, label)
		if err != nil {
			continue
		}
		var m dto.Metric
		if c.Write(&m) != nil || m.GetCounter().GetValue() == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d", label, int64(m.GetCounter().GetValue())))
	}
	if len(parts) == 0 {
		return "late records so far: none"
	}
	return "late records so far: " + strings.Join(parts, ", ")
}
