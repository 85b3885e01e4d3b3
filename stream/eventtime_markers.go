package stream

import (
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/watermark"
)

// Watermarks through repartition topics.
//
// A task whose sub-topology writes a repartition topic is one of its
// writers: writer p of n, p its partition and n its sub-topology's task
// count. At the end of its rounds (a time-driven operator after every other,
// so a marker follows the data of its round) it sends a marker carrying its
// watermark, and whether all its inputs are idle, to every partition of
// each repartition topic it writes. It is produced like any output of the
// round: under ExactlyOnce inside the open transaction, so a read_committed
// reader sees a marker exactly when it sees the data before it.
//
// A task reading a repartition topic tracks that input as the minimum over
// its n writers (watermark.Tracker.AddRepartition): a writer not heard from
// yet, or stalled, holds it until the idle timeout says it is gone.
//
// Invariants:
//   - a writer sends at most every marker interval, and only when its
//     watermark or idle state changed since its last marker — or, with an
//     idle timeout, when half of it passed since (a keepalive: a live
//     writer is never taken for a stalled one); a writer without a
//     watermark (and not idle) sends only keepalives;
//   - markers never reach the operators: a task recognises them before any
//     codec runs (handleMarker) and they are never dead-lettered;
//   - an aborted transaction's markers are not visible; the writer sends
//     again at its next round (abortRound forgets the last marker).

// defaultMarkerInterval is how often a repartition writer sends its
// watermark at most: Flink's default watermark interval
// (pipeline.auto-watermark-interval). A window downstream of a repartition
// closes up to one interval after its upstream writers passed it; in
// exchange the traffic is at most writers x partitions markers of ~70 bytes
// per interval (12 x 12 tasks: 720 markers/s, ~50 KB/s), and none while the
// watermark stands still. Measured (BenchmarkMarkerTraffic: KeyBy count, 3
// partitions, 30k records, weir broker, against the same pipeline without
// markers in the same run): input all at once 0.01% of the records and
// bytes; at 5,000 records/s 0.23% of the records, 0.3% of the bytes (0.7%
// if every marker had its own batch); at 1,000/s 1.1% and 1.5% (3.6%). A
// 3x3 pipeline sends ~45 markers/s while its watermark moves, so they pass
// 5% of its records below ~250 input records/s.
const defaultMarkerInterval = 200 * time.Millisecond

// markerConfig is the WatermarkMarkers setting.
type markerConfig struct {
	interval time.Duration
	set      bool
	// off turns markers off on a cluster too: the baseline of the marker
	// traffic benchmark (set by tests only).
	off bool
}

// WatermarkMarkers sets how often, at most, a task writing a repartition
// topic sends its watermark to every partition of it (a marker: a record
// with the header "weir.wm" and no key or value, which the App never hands
// to operators and other consumers must skip; see docs/format/watermark.md).
// A writer sends only when its watermark or idle state changed, and with
// an idle timeout (Watermarks) at least every half of it, so readers tell
// a stalled writer from a quiet one; the interval is capped at that half.
// 0 sends at the end of every round that changed something. Default 200ms.
//
// A writer sends at round ends, and an idle App runs a round every commit
// interval (the poll's wait): keep the idle timeout at two commit
// intervals or more, or readers may take a quiet writer for a stalled one
// (and let the watermark pass it).
//
// The Driver sends no markers unless this option is given: there its
// repartition topics' watermarks follow their records, as a source's do.
func WatermarkMarkers(interval time.Duration) Opt {
	return optFunc(func(c *config) { c.markers = markerConfig{interval: interval, set: true} })
}

// markersOn reports whether repartition writers send markers and readers
// merge them: always on a cluster, in the Driver only if asked for.
func (a *App) markersOn() bool {
	return !a.cfg.markers.off && (a.cfg.markers.set || a.cfg.seams.producer == nil)
}

// markerInterval is the effective interval: the option (or the default),
// at most half the idle timeout.
func (a *App) markerInterval() time.Duration {
	iv := defaultMarkerInterval
	if a.cfg.markers.set {
		iv = a.cfg.markers.interval
	}
	if idle := a.cfg.watermark.IdleTimeout; idle > 0 {
		iv = min(iv, idle/2)
	}
	return iv
}

// markerWriterSub returns the sub-topology whose tasks write internal
// topic topic, and whether markers can carry its watermark: exactly one
// sub-topology writes it (a writer is one of its tasks). A topic written
// by several is tracked by its records, as a source.
func (a *App) markerWriterSub(topic string) (int, bool) {
	sub := -1
	for _, s := range a.b.sinks {
		if !s.internal || len(s.sources) == 0 || a.sinkTopic(s) != topic {
			continue
		}
		w := a.subOf[s.sources[0]]
		if sub >= 0 && w != sub {
			return -1, false
		}
		sub = w
	}
	if sub < 0 {
		return -1, false
	}
	// The reader's watermark waits for the writers': a cycle of such
	// waits (a foreign-key join's subscription and response topics) would
	// hold every watermark on it at none forever. An internal topic on a
	// cycle of sub-topologies is tracked by its records instead.
	if src, ok := a.sources[topic]; ok && a.subsReach(a.subOf[src.idx], sub) {
		return -1, false
	}
	return sub, true
}

// subsReach reports whether records flow from sub-topology from to
// sub-topology to through internal topics (from == to counts).
func (a *App) subsReach(from, to int) bool {
	seen := map[int]bool{}
	var visit func(sub int) bool
	visit = func(sub int) bool {
		if sub == to {
			return true
		}
		if seen[sub] {
			return false
		}
		seen[sub] = true
		for _, s := range a.b.sinks {
			if !s.internal || len(s.sources) == 0 || a.subOf[s.sources[0]] != sub {
				continue
			}
			if src, ok := a.sources[a.sinkTopic(s)]; ok && visit(a.subOf[src.idx]) {
				return true
			}
		}
		return false
	}
	return visit(from)
}

// repartitionWriters returns the number of tasks writing the repartition
// topic read by internal source s (its upstream sub-topology's task
// count), 0 if markers do not carry its watermark.
func (a *App) repartitionWriters(s *sourceNode) int {
	sub, ok := a.markerWriterSub(a.topicOf(s))
	if !ok {
		return 0
	}
	return int(a.taskCount(a.subs[sub]))
}

// repartitionsWritten returns the repartition topics sub-topology sub
// writes markers to.
func (a *App) repartitionsWritten(sub int) []string {
	var out []string
	for _, s := range a.b.sinks {
		topic := a.sinkTopic(s)
		if w, ok := a.markerWriterSub(topic); s.internal && ok && w == sub && !slices.Contains(out, topic) {
			out = append(out, topic)
		}
	}
	return out
}

// markerWriter is a task's marker sending: a time-driven operator that runs
// after all others.
type markerWriter struct {
	t         *task
	topics    []string
	parts     []int32 // partition count of each topic
	writers   uint32
	interval  time.Duration
	keepalive time.Duration // 0: none (no idle timeout)

	// created is when the writer started; the last marker sent (sent
	// zero: none yet, or forgotten)
	created time.Time
	sent    time.Time
	wm      int64
	idle    bool
}

// newMarkerWriter returns the task's marker writer, nil if it writes no
// repartition topic.
func newMarkerWriter(t *task) *markerWriter {
	a := t.app
	topics := a.repartitionsWritten(t.id.sub)
	if len(topics) == 0 {
		return nil
	}
	w := &markerWriter{t: t, writers: uint32(a.taskCount(a.subs[t.id.sub])), interval: a.markerInterval(),
		keepalive: a.cfg.watermark.IdleTimeout / 2, created: a.cfg.clock.Now()}
	for _, topic := range topics {
		if n := a.partitions[topic]; n > 0 {
			w.topics = append(w.topics, topic)
			w.parts = append(w.parts, n)
		}
	}
	if len(w.topics) == 0 || w.writers == 0 || uint32(t.id.partition) >= w.writers {
		return nil
	}
	return w
}

// nodeID places the writer after every operator of the task.
func (w *markerWriter) nodeID() int { return math.MaxInt }

// advance sends the task's watermark to every partition of the repartition
// topics it writes, when due.
func (w *markerWriter) advance(wm int64, now time.Time) error {
	tr := w.t.et.tracker
	idle := tr.Inputs() > 0 && tr.IdleInputs() == tr.Inputs()
	switch {
	case wm == watermark.Min && !idle:
		// No watermark yet tells readers nothing they do not assume (a
		// writer not heard from holds them at none): such a writer speaks
		// only to stay alive, first half an idle timeout after it started
		// (by then it has usually seen data, whose time its marker takes).
		last := w.sent
		if last.IsZero() {
			last = w.created
		}
		if w.keepalive == 0 || now.Sub(last) < w.keepalive {
			return nil
		}
	case !w.sent.IsZero():
		since := now.Sub(w.sent)
		changed := wm != w.wm || idle != w.idle
		if since < w.interval || !(changed || (w.keepalive > 0 && since >= w.keepalive)) {
			return nil
		}
	}
	m := watermark.Marker{Writer: uint32(w.t.id.partition), Writers: w.writers, Watermark: wm, Idle: idle}
	// The record timestamp is in the data's domain — the largest event
	// time the writer has seen — not the processing clock: a batch
	// encodes its records' timestamps as deltas from its first one, and a
	// marker a year ahead of the data it shares a batch with cost every
	// record after it ~4 bytes (measured: +5% of the repartition topic). A
	// writer that saw no record yet takes the App's largest event time.
	ts := now
	switch a := w.t.app; {
	case w.t.streamTime != watermark.Min:
		ts = time.UnixMilli(w.t.streamTime)
	case a.maxEventTime.Load() != 0: // the App's other tasks' data share its batches
		ts = time.UnixMilli(a.maxEventTime.Load())
	}
	n := 0
	for i, topic := range w.topics {
		for p := int32(0); p < w.parts[i]; p++ {
			r := watermark.MarkerRecord(topic, p, m)
			r.Timestamp = ts
			w.t.app.producer(r, w.t.promise)
			n++
		}
	}
	w.t.app.metrics.markersOut.Add(float64(n))
	w.sent, w.wm, w.idle = now, wm, idle
	return nil
}

// forget makes the next round send a marker (the last one was aborted).
func (w *markerWriter) forget() { w.sent = time.Time{} }

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
	t.app.metrics.markersIn.Inc()
	t.next[kr.Topic] = kgo.EpochOffset{Epoch: kr.LeaderEpoch, Offset: kr.Offset + 1}
	return true
}

// WatermarkMarker is the content of a watermark marker record (see
// WatermarkMarkers): writer Writer of Writers upstream tasks had Watermark
// (ms since the Unix epoch; math.MinInt64: none yet); Idle says all the
// writer's inputs were idle.
type WatermarkMarker struct {
	Writer, Writers uint32
	Watermark       int64
	Idle            bool
}

// WatermarkMarkerHeader is the record header that makes a record a
// watermark marker, never data.
const WatermarkMarkerHeader = watermark.MarkerHeader

// ParseWatermarkMarker returns the marker a record with the given headers
// carries: ok false if it is no marker (no WatermarkMarkerHeader); an error
// if it is one whose header value does not decode (still not data).
func ParseWatermarkMarker(headers []kgo.RecordHeader) (m WatermarkMarker, ok bool, err error) {
	wm, ok, err := watermark.MarkerOf(&kgo.Record{Headers: headers})
	if !ok || err != nil {
		return WatermarkMarker{}, ok, err
	}
	return WatermarkMarker(wm), true, nil
}

// markerPartitioner partitions a repartition topic: a marker to the
// partition set on it (every partition gets one), data by key.
type markerPartitioner struct{ byKey kgo.TopicPartitioner }

func (p markerPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return watermark.IsMarker(r) || p.byKey.RequiresConsistency(r)
}

func (p markerPartitioner) Partition(r *kgo.Record, n int) int {
	if watermark.IsMarker(r) {
		return int(r.Partition)
	}
	return p.byKey.Partition(r, n)
}

// OnNewBatch keeps the key partitioner's stickiness for records without a
// key.
func (p markerPartitioner) OnNewBatch() {
	if nb, ok := p.byKey.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
