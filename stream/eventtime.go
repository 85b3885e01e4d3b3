package stream

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weirhq/weir/stream/internal/watermark"
)

// Event time of a task: every task tracks its watermark
// (stream/internal/watermark) over the input partitions it consumes, on the
// App's processing clock for idleness. Its state is kept in the task's local
// database with its checkpoint and in the commit metadata of its input
// offsets (eventtime_commit.go), so it never goes backwards across restarts,
// moves and full restores; under ExactlyOnce an aborted transaction takes it
// back to where the task joined the transaction, with the rounds it undoes.
// Through repartition topics it travels as markers (eventtime_markers.go).
// Windows and timers read it at each round's end (timed.go); metrics and
// App.Watermarks/Describe show it.

// Watermarks sets the App's watermark strategy: a source partition's
// watermark is the largest event time read from it minus outOfOrderness; a
// partition that delivered no record for idleTimeout of processing time
// (the App's clock) stops holding its task's watermark back until it
// delivers again (0: never). Default: 0 and 0.
func Watermarks(outOfOrderness, idleTimeout time.Duration) Opt {
	return optFunc(func(c *config) {
		c.watermark = watermark.Config{OutOfOrderness: outOfOrderness, IdleTimeout: idleTimeout}
	})
}

// eventTime is a task's watermark tracking.
type eventTime struct {
	tracker *watermark.Tracker
	// inputs maps a source topic to its input in the tracker; cur is the
	// input of the record being handled (observe's).
	inputs map[string]watermark.Input
	cur    watermark.Input
	// saved is the state last given to the local database.
	saved []byte
	// roundSnap is the tracker when the task joined the open ExactlyOnce
	// transaction (restored if it aborts).
	roundSnap *watermark.Tracker
	// writer sends the task's markers (nil: it writes no repartition topic).
	writer *markerWriter
	// startWM is the watermark the task started from (restored from its
	// local copy and the committed offsets' metadata, before its first
	// round): every output of a round whose watermark reached it was
	// acknowledged, since both copies are written only after a producer
	// flush.
	startWM int64
	// committedMeta is the commit metadata of each input partition as last
	// committed (or found at the task's start); startOffset its committed
	// offset found at the start; topicIDs the inputs' topic ids.
	committedMeta map[string]string
	startOffset   map[string]int64
	topicIDs      map[string][16]byte

	// the task's children of the event-time metrics (wmGauge and lagGauge
	// nil until the task has a watermark); inWM and inIdle per input.
	wmGauge, lagGauge, idleGauge prometheus.Gauge
	inWM, inIdle                 []prometheus.Gauge

	// status is the state as of the last round, for App.Watermarks (read
	// by other goroutines under statusMu).
	statusMu sync.Mutex
	status   TaskWatermark
}

// initEventTime adds the task's input partitions to a new tracker and
// resumes the state its local database kept (a state it cannot read is
// dropped: the database is a cache). A repartition topic is tracked over
// its upstream writers when they send markers (markersOn).
func (t *task) initEventTime() error {
	a := t.app
	tr, err := watermark.New(a.cfg.watermark)
	if err != nil {
		return err
	}
	id := t.id.String()
	t.et = eventTime{tracker: tr, inputs: map[string]watermark.Input{},
		committedMeta: map[string]string{}, startOffset: map[string]int64{}, topicIDs: map[string][16]byte{},
		idleGauge: a.metrics.taskIdleInputs.WithLabelValues(id)}
	now := a.cfg.clock.Now()
	// The task's input partitions: partition p of each source topic that
	// has one (a sub-topology has as many tasks as its largest source has
	// partitions; a smaller source has no partition for the others).
	var topics []string
	for _, topic := range slices.Sorted(maps.Keys(t.entries)) {
		if n, ok := a.partitions[topic]; !ok || t.id.partition < n {
			topics = append(topics, topic)
		}
	}
	for _, topic := range topics {
		writers := 0
		if s := a.sources[topic]; s != nil && s.internal && a.markersOn() {
			writers = a.repartitionWriters(s)
		}
		if writers == 0 {
			t.et.inputs[topic] = tr.AddSource(topic, t.id.partition, now)
			continue
		}
		if t.et.inputs[topic], err = tr.AddRepartition(topic, t.id.partition, writers, now); err != nil {
			return err
		}
	}
	t.et.inWM = make([]prometheus.Gauge, tr.Inputs()) // created with the input's first watermark
	for _, topic := range topics {
		t.et.inIdle = append(t.et.inIdle, a.metrics.inputIdle.WithLabelValues(id, topic, strconv.Itoa(int(t.id.partition))))
	}
	if a.markersOn() {
		if w := newMarkerWriter(t); w != nil {
			t.et.writer = w
			t.addTimed(w)
		}
	}
	t.et.startWM = tr.Watermark()
	if t.db == nil {
		return nil
	}
	saved, err := t.db.Watermark()
	if err != nil {
		return fmt.Errorf("task %s: read watermark: %w", t.id, err)
	}
	if saved != nil {
		if err := tr.Restore(saved, now); err != nil {
			a.cfg.logger.Warn("local watermark state unreadable; starting from the records",
				"task", t.id.String(), "err", err)
		} else {
			t.et.saved = saved
		}
	}
	t.et.startWM = tr.Watermark()
	return nil
}

// advanceWatermark recomputes the task's watermark at the end of its part
// of a round, on the App's clock, and updates the task's event-time
// metrics and status.
func (t *task) advanceWatermark() int64 {
	now := t.app.cfg.clock.Now()
	wm := t.et.tracker.Advance(now)
	t.publishWatermark(wm, now)
	if st := t.streamTime; st != watermark.Min {
		for cur := t.app.maxEventTime.Load(); st > cur && !t.app.maxEventTime.CompareAndSwap(cur, st); {
			cur = t.app.maxEventTime.Load()
		}
	}
	return wm
}

// publishWatermark sets the task's event-time metrics and status to
// watermark wm at processing time now.
func (t *task) publishWatermark(wm int64, now time.Time) {
	id := t.id.String()
	if wm != watermark.Min {
		if t.et.wmGauge == nil { // the series appear with the first watermark
			t.et.wmGauge = t.app.metrics.taskWatermark.WithLabelValues(id)
			t.et.lagGauge = t.app.metrics.taskEventLag.WithLabelValues(id)
		}
		t.et.wmGauge.Set(float64(wm) / 1e3)
		t.et.lagGauge.Set(float64(now.UnixMilli()-wm) / 1e3)
	}
	t.et.idleGauge.Set(float64(t.et.tracker.IdleInputs()))
	st := TaskWatermark{Task: id, Watermark: wmTime(wm), At: now}
	if wm != watermark.Min {
		st.Lag = now.Sub(st.Watermark)
	}
	for i, in := range t.et.tracker.Status() {
		if in.Watermark != watermark.Min {
			if t.et.inWM[i] == nil {
				t.et.inWM[i] = t.app.metrics.inputWatermark.WithLabelValues(id, in.Topic, strconv.Itoa(int(in.Partition)))
			}
			t.et.inWM[i].Set(float64(in.Watermark) / 1e3)
		}
		idle := 0.0
		if in.Idle {
			idle = 1
		}
		t.et.inIdle[i].Set(idle)
		st.Inputs = append(st.Inputs, InputWatermark{Topic: in.Topic, Partition: in.Partition,
			Watermark: wmTime(in.Watermark), MaxEvent: wmTime(in.MaxEvent), Idle: in.Idle,
			Writers: in.Writers, IdleWriters: in.IdleWriters})
	}
	t.et.statusMu.Lock()
	t.et.status = st
	t.et.statusMu.Unlock()
}

// wmTime converts a watermark (ms) to a time, zero for none.
func wmTime(ms int64) time.Time {
	if ms == watermark.Min {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// snapshotWatermark keeps the tracker as the task joins an ExactlyOnce
// transaction; rollbackWatermark goes back to it when the transaction
// aborts: the aborted rounds' store writes and outputs (windows closed,
// markers sent) are discarded, so must the watermark that made them be.
// The markers of the aborted rounds are sent again.
func (t *task) snapshotWatermark() { t.et.roundSnap = t.et.tracker.Clone() }

func (t *task) rollbackWatermark() {
	if t.et.roundSnap == nil {
		return
	}
	t.et.tracker, t.et.roundSnap = t.et.roundSnap, nil
	if t.et.writer != nil {
		t.et.writer.forget()
	}
}

// TaskWatermark is one task's event time as of its last round (see
// App.Watermarks).
type TaskWatermark struct {
	Task string // "<sub-topology>_<partition>"
	// Watermark is the task's watermark (zero: none yet): no record with an
	// earlier event time is expected. Lag is At minus Watermark, At the
	// processing time of the round.
	Watermark, At time.Time
	Lag           time.Duration
	Inputs        []InputWatermark
}

// InputWatermark is one input partition of a task.
type InputWatermark struct {
	Topic     string
	Partition int32
	// Watermark is the input's own (for a repartition topic, the minimum
	// over its upstream writers' markers); MaxEvent the largest event time
	// of a record read from it. Zero: none.
	Watermark, MaxEvent time.Time
	// Idle: the input holds the task's watermark back no more (no record,
	// or no writer active, for the idle timeout).
	Idle bool
	// Writers is the number of upstream tasks writing a repartition topic
	// (0 for a source topic); IdleWriters how many of them are idle.
	Writers, IdleWriters int
}

// Watermarks returns the event time of every task this instance runs, as
// of each task's last round, ordered by task.
func (a *App) Watermarks() []TaskWatermark {
	tasks := a.allTasks()
	slices.SortFunc(tasks, func(x, y *task) int { return compareTaskIDs(x.id, y.id) })
	out := make([]TaskWatermark, 0, len(tasks))
	for _, t := range tasks {
		t.et.statusMu.Lock()
		st := t.et.status
		t.et.statusMu.Unlock()
		if st.Task == "" {
			st.Task = t.id.String()
		}
		out = append(out, st)
	}
	return out
}

// describeEventTime renders the watermark strategy and every running
// task's watermark for Describe.
func (a *App) describeEventTime(b *strings.Builder) {
	w := a.cfg.watermark
	idle := "never idle"
	if w.IdleTimeout > 0 {
		idle = "idle after " + w.IdleTimeout.String()
	}
	fmt.Fprintf(b, "  event time: watermark = largest event time - %v per source partition, %s; task watermark = minimum over its inputs, never backwards, kept with the committed offsets\n",
		w.OutOfOrderness, idle)
	if reps := a.repartitionTopics(); len(reps) > 0 {
		if a.markersOn() {
			fmt.Fprintf(b, "  event time through %s: watermark markers (header %s) at most every %v per writer; readers take the minimum over the upstream tasks\n",
				strings.Join(reps, ", "), watermark.MarkerHeader, a.markerInterval())
		} else {
			fmt.Fprintf(b, "  event time through %s: no markers (Driver): the largest event time read, as a source\n", strings.Join(reps, ", "))
		}
	}
	for _, st := range a.Watermarks() {
		wm := "none"
		if !st.Watermark.IsZero() {
			wm = st.Watermark.Format(time.RFC3339Nano) + " (lag " + st.Lag.Round(time.Millisecond).String() + ")"
		}
		var ins []string
		for _, in := range st.Inputs {
			s := fmt.Sprintf("%s-%d ", in.Topic, in.Partition)
			if in.Watermark.IsZero() {
				s += "none"
			} else {
				s += in.Watermark.Format(time.RFC3339Nano)
			}
			if in.Writers > 0 {
				s += fmt.Sprintf(" writers %d (%d idle)", in.Writers, in.IdleWriters)
			}
			if in.Idle {
				s += " IDLE"
			}
			ins = append(ins, s)
		}
		fmt.Fprintf(b, "  task %s watermark %s; inputs: %s\n", st.Task, wm, strings.Join(ins, "; "))
	}
}

// repartitionTopics lists the App's repartition topics, sorted.
func (a *App) repartitionTopics() []string {
	var out []string
	for _, s := range a.b.sources {
		if s.internal {
			out = append(out, a.topicOf(s))
		}
	}
	slices.Sort(out)
	return out
}

// stageWatermark gives the tracker's state to the local database if it
// changed since, for the checkpoint write that follows to sync it. It
// reports whether it did.
func (t *task) stageWatermark() (bool, error) {
	if t.db == nil {
		return false, nil
	}
	b := t.et.tracker.AppendState(nil)
	if slices.Equal(b, t.et.saved) {
		return false, nil
	}
	if err := t.db.SetWatermark(b); err != nil {
		return false, err
	}
	t.et.saved = b
	return true, nil
}
