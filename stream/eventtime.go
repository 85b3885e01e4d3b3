package stream

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/watermark"
)

// Event time of a task, first step of issue 14: every task tracks its
// watermark (stream/internal/watermark) over the input partitions it
// consumes, on the App's processing clock for idleness, and keeps it in its
// local state with its checkpoint. Nothing reads it yet but tests: windows
// and timers will.
//
// What is not done yet:
//   - repartition topics are tracked like source topics (largest record time
//     minus the bound) until upstream tasks write watermark markers; markers
//     already never reach the operators;
//   - the state is kept in the task's local database only, so the watermark
//     survives a restart on the same disk, not a move to another instance or
//     a full restore (it will travel with the committed offsets or the
//     changelog);
//   - metrics: the task's watermark, event-time lag and idle inputs; no
//     App.Describe line yet.

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
	// the task's children of the event-time metrics (wmGauge and lagGauge
	// nil until the task has a watermark)
	wmGauge, lagGauge, idleGauge prometheus.Gauge
}

// initEventTime adds the task's input partitions to a new tracker and
// resumes the state its local database kept (a state it cannot read is
// dropped: the database is a cache).
func (t *task) initEventTime() error {
	tr, err := watermark.New(t.app.cfg.watermark)
	if err != nil {
		return err
	}
	t.et = eventTime{tracker: tr, inputs: map[string]watermark.Input{},
		idleGauge: t.app.metrics.taskIdleInputs.WithLabelValues(t.id.String())}
	now := t.app.cfg.clock.Now()
	for _, topic := range slices.Sorted(maps.Keys(t.entries)) {
		t.et.inputs[topic] = tr.AddSource(topic, t.id.partition, now)
	}
	if t.db == nil {
		return nil
	}
	saved, err := t.db.Watermark()
	if err != nil {
		return fmt.Errorf("task %s: read watermark: %w", t.id, err)
	}
	if saved != nil {
		if err := tr.Restore(saved, now); err != nil {
			t.app.cfg.logger.Warn("local watermark state unreadable; starting from the records",
				"task", t.id.String(), "err", err)
		} else {
			t.et.saved = saved
		}
	}
	return nil
}

// handleMarker reports whether kr is a watermark marker, which is never
// data: it goes to the tracker (or is skipped, logged, if it does not fit)
// and counts as handled.
func (t *task) handleMarker(kr *kgo.Record) bool {
	m, ok, err := watermark.MarkerOf(kr)
	if !ok {
		return false
	}
	if err == nil {
		err = t.et.tracker.ObserveMarker(t.et.inputs[kr.Topic], m, t.app.cfg.clock.Now())
	}
	if err != nil {
		t.app.cfg.logger.Warn("watermark marker skipped", "task", t.id.String(), "topic", kr.Topic,
			"partition", kr.Partition, "offset", kr.Offset, "err", err)
	}
	t.next[kr.Topic] = kgo.EpochOffset{Epoch: kr.LeaderEpoch, Offset: kr.Offset + 1}
	return true
}

// advanceWatermark recomputes the task's watermark at the end of its part
// of a round, on the App's clock, and updates the task's event-time
// metrics.
func (t *task) advanceWatermark() int64 {
	now := t.app.cfg.clock.Now()
	wm := t.et.tracker.Advance(now)
	if wm != watermark.Min {
		if t.et.wmGauge == nil { // the series appear with the first watermark
			id := t.id.String()
			t.et.wmGauge = t.app.metrics.taskWatermark.WithLabelValues(id)
			t.et.lagGauge = t.app.metrics.taskEventLag.WithLabelValues(id)
		}
		t.et.wmGauge.Set(float64(wm) / 1e3)
		t.et.lagGauge.Set(float64(now.UnixMilli()-wm) / 1e3)
	}
	t.et.idleGauge.Set(float64(t.et.tracker.IdleInputs()))
	return wm
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
