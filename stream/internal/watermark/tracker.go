// Package watermark tracks a task's event-time watermark: per input
// partition, bounded out-of-orderness with an idle timeout, merged over the
// upstream writers of a repartition topic, and persisted so that it never
// goes backwards. It also defines the watermark marker records upstream tasks
// write into repartition topics (marker.go).
//
// # Meaning of a watermark
//
// A watermark W is the claim "no more records with event time < W are
// expected" (Kafka Streams' stream time minus grace, not Flink's "<= W"). A
// source partition's watermark is the largest event time seen on it minus
// the out-of-orderness bound; a window [start, end) is closed once W >= end
// + allowed lateness (stream/internal/window). Flink emits maxTs - bound - 1
// meaning "<= W": both close a window at the same record.
//
// # Inputs
//
// A task consumes one or more input partitions:
//   - a source partition (AddSource): its watermark follows the records it
//     delivers (Observe);
//   - a partition of a repartition topic (AddRepartition): records there were
//     written by the N tasks of the upstream sub-topology, each of which
//     writes markers carrying its own watermark (ObserveMarker). The
//     partition's watermark is the minimum over its N writers; a writer not
//     heard from yet holds it at the minimum. Data records on it do not move
//     its watermark: the upstream already bounded their lateness.
//
// The task's watermark is the minimum over its active inputs and never goes
// backwards. Processing time (for idleness) is given to Advance and
// ObserveMarker by the caller: the tracker reads no clock.
//
// # Idleness (Flink's withIdleness)
//
// With an idle timeout, a source partition that delivered no record for that
// long (in processing time, measured at Advance) is idle: it stops holding
// the task's watermark back. A record makes it active again, and it holds the
// watermark again from the next Advance: the watermark does not go back, so
// its records older than the watermark are late (unlike Flink, which lets an
// input back in only once it caught up with the watermark; holding it at
// once makes fewer of its records late). A repartition writer is idle when
// its last marker said so (its own inputs are all idle) or when no marker
// came from it for the idle timeout (it is stalled or gone; live writers send
// markers at least that often). When every input is idle the watermark
// advances to the largest of their watermarks (as Flink does when its last
// input channel goes idle): everything seen has been seen.
//
// A Tracker is used by one goroutine (its task); it is not safe for
// concurrent use.
package watermark

import (
	"fmt"
	"math"
	"time"
)

// Min is the watermark before anything is known.
const Min = math.MinInt64

// Config is a task's watermark strategy.
type Config struct {
	// OutOfOrderness is the bound: a source partition's watermark is the
	// largest event time seen minus it. At least 0, whole milliseconds.
	OutOfOrderness time.Duration
	// IdleTimeout is the processing time without records (or markers) after
	// which an input stops holding the watermark back. 0: never idle.
	IdleTimeout time.Duration
}

// Input names one input of a Tracker, as returned by AddSource and
// AddRepartition.
type Input int

// Tracker tracks one task's watermark.
type Tracker struct {
	boundMs int64
	idle    time.Duration
	inputs  []input
	wm      int64
}

type input struct {
	topic     string
	partition int32
	// maxEvent is the largest event time observed (Min: none).
	maxEvent int64
	// seen says a record arrived since the last Advance; lastActive is the
	// processing time of the Advance that last saw one (or of AddSource).
	seen       bool
	lastActive time.Time
	// writers is nil for a source partition; for a repartition partition it
	// holds one entry per upstream task.
	writers []writer
	// idle, wm and idleWriters are the input's state as of the last Advance.
	idle        bool
	wm          int64
	idleWriters int
}

type writer struct {
	wm         int64
	saidIdle   bool
	lastMarker time.Time
}

// New returns a tracker with no inputs and watermark Min.
func New(cfg Config) (*Tracker, error) {
	if cfg.OutOfOrderness < 0 || cfg.OutOfOrderness%time.Millisecond != 0 {
		return nil, fmt.Errorf("watermark: out-of-orderness %v is not a non-negative whole number of milliseconds", cfg.OutOfOrderness)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("watermark: negative idle timeout %v", cfg.IdleTimeout)
	}
	return &Tracker{boundMs: cfg.OutOfOrderness.Milliseconds(), idle: cfg.IdleTimeout, wm: Min}, nil
}

// AddSource adds a source partition; its idle timeout starts at now.
func (t *Tracker) AddSource(topic string, partition int32, now time.Time) Input {
	t.inputs = append(t.inputs, input{topic: topic, partition: partition, maxEvent: Min, lastActive: now, wm: Min})
	return Input(len(t.inputs) - 1)
}

// AddRepartition adds a partition of a repartition topic written by writers
// upstream tasks (the upstream sub-topology's task count). Each writer holds
// the partition at Min until its first marker, or until it is idle (from
// now).
func (t *Tracker) AddRepartition(topic string, partition int32, writers int, now time.Time) (Input, error) {
	if writers < 1 || writers > math.MaxInt32 {
		return 0, fmt.Errorf("watermark: %s/%d: %d writers", topic, partition, writers)
	}
	ws := make([]writer, writers)
	for i := range ws {
		ws[i] = writer{wm: Min, lastMarker: now}
	}
	t.inputs = append(t.inputs, input{topic: topic, partition: partition, maxEvent: Min, lastActive: now, writers: ws, wm: Min})
	return Input(len(t.inputs) - 1), nil
}

// Observe records a data record of event time ms on in. It is the per-record
// path: no clock, no allocation; idleness and the watermark are recomputed
// by Advance.
func (t *Tracker) Observe(in Input, ms int64) {
	p := &t.inputs[in]
	if ms > p.maxEvent {
		p.maxEvent = ms
	}
	p.seen = true
}

// MarkerError reports a marker that does not fit the input it arrived on;
// the caller skips the marker (and says so in its log).
type MarkerError struct {
	Topic     string
	Partition int32
	Reason    string
}

func (e *MarkerError) Error() string {
	return fmt.Sprintf("watermark: marker on %s/%d: %s", e.Topic, e.Partition, e.Reason)
}

// ObserveMarker records marker m, read at processing time now, on the
// repartition input in. A writer's watermark never goes backwards (an older
// marker, replayed after a rebalance, changes nothing but its liveness).
func (t *Tracker) ObserveMarker(in Input, m Marker, now time.Time) error {
	p := &t.inputs[in]
	switch {
	case p.writers == nil:
		return &MarkerError{p.topic, p.partition, "not a repartition input"}
	case m.Writer >= m.Writers:
		return &MarkerError{p.topic, p.partition, fmt.Sprintf("writer %d of %d", m.Writer, m.Writers)}
	case int(m.Writers) != len(p.writers):
		return &MarkerError{p.topic, p.partition, fmt.Sprintf("marker counts %d writers, the topology %d", m.Writers, len(p.writers))}
	}
	w := &p.writers[m.Writer]
	if m.Watermark > w.wm {
		w.wm = m.Watermark
	}
	w.saidIdle = m.Idle
	w.lastMarker = now
	return nil
}

// Advance recomputes, at processing time now, which inputs are idle and the
// task's watermark, and returns it. It never returns less than before.
func (t *Tracker) Advance(now time.Time) int64 {
	lowActive, highAll := int64(math.MaxInt64), int64(Min)
	active := 0
	for i := range t.inputs {
		p := &t.inputs[i]
		if p.seen {
			p.seen = false
			p.lastActive = now
		}
		if p.writers == nil {
			p.wm = sub(p.maxEvent, t.boundMs)
			p.idle = t.expired(p.lastActive, now)
		} else {
			p.wm, p.idleWriters = t.mergeWriters(p.writers, now)
			p.idle = p.idleWriters == len(p.writers)
		}
		highAll = max(highAll, p.wm)
		if !p.idle {
			active++
			lowActive = min(lowActive, p.wm)
		}
	}
	switch {
	case active > 0:
		t.wm = max(t.wm, lowActive)
	case len(t.inputs) > 0:
		t.wm = max(t.wm, highAll)
	}
	return t.wm
}

// mergeWriters returns a repartition input's watermark, the minimum over
// its active writers (or, when all are idle, the largest), and how many of
// its writers are idle.
func (t *Tracker) mergeWriters(ws []writer, now time.Time) (wm int64, idle int) {
	low, high := int64(math.MaxInt64), int64(Min)
	for i := range ws {
		w := &ws[i]
		high = max(high, w.wm)
		if w.saidIdle || t.expired(w.lastMarker, now) {
			idle++
			continue
		}
		low = min(low, w.wm)
	}
	if idle == len(ws) {
		return high, idle
	}
	return low, idle
}

func (t *Tracker) expired(last, now time.Time) bool {
	return t.idle > 0 && now.Sub(last) >= t.idle
}

// sub returns a - b (b >= 0), saturated at Min.
func sub(a, b int64) int64 {
	if a < Min+b {
		return Min
	}
	return a - b
}

// Watermark returns the task's watermark as of the last Advance (or Restore).
func (t *Tracker) Watermark() int64 { return t.wm }

// IdleInputs returns how many inputs were idle at the last Advance.
func (t *Tracker) IdleInputs() int {
	n := 0
	for i := range t.inputs {
		if t.inputs[i].idle {
			n++
		}
	}
	return n
}

// InputStatus is one input's state as of the last Advance, for metrics and
// App.Describe.
type InputStatus struct {
	Topic     string
	Partition int32
	// Watermark is the input's own watermark (for a repartition input, the
	// minimum over its active writers); MaxEvent the largest event time of a
	// record on it (Min: none).
	Watermark, MaxEvent int64
	Idle                bool
	// Writers is the number of upstream writers of a repartition input (0
	// for a source), IdleWriters how many of them are idle.
	Writers, IdleWriters int
}

// Status returns the state of every input as of the last Advance, in the
// order they were added.
func (t *Tracker) Status() []InputStatus {
	out := make([]InputStatus, len(t.inputs))
	for i, p := range t.inputs {
		out[i] = InputStatus{Topic: p.topic, Partition: p.partition, Watermark: p.wm, MaxEvent: p.maxEvent,
			Idle: p.idle, Writers: len(p.writers), IdleWriters: p.idleWriters}
	}
	return out
}

// Clone returns a deep copy of t: a task keeps one when it joins a
// transaction and goes back to it if the transaction aborts (the aborted
// rounds' effects, windows closed on the later watermark among them, are
// discarded with it).
func (t *Tracker) Clone() *Tracker {
	c := *t
	c.inputs = make([]input, len(t.inputs))
	for i, p := range t.inputs {
		if p.writers != nil {
			p.writers = append([]writer(nil), p.writers...)
		}
		c.inputs[i] = p
	}
	return &c
}

// Inputs returns the number of inputs.
func (t *Tracker) Inputs() int { return len(t.inputs) }
