package stream

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/watermark"
)

// newMergeDriver runs "a" merged with "b" (one partition each: one task
// with two inputs) to "out".
func newMergeDriver(t *testing.T, opts ...Opt) *Driver {
	t.Helper()
	b := NewBuilder()
	From(b, "a", String(), String()).Merge(From(b, "b", String(), String())).To("out", String(), String())
	return newTestDriver(t, b, opts...)
}

func newTestDriver(t *testing.T, b *Builder, opts ...Opt) *Driver {
	t.Helper()
	d, err := NewDriver("et", b, nil, append([]Opt{StateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func pipeAt(t *testing.T, d *Driver, topic string, ms int64) {
	t.Helper()
	if _, err := d.Pipe(topic, []byte("k"), []byte("v"), time.UnixMilli(ms)); err != nil {
		t.Fatal(err)
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
}

func taskWatermark(t *testing.T, d *Driver) int64 {
	t.Helper()
	tk, err := d.task(taskID{sub: 0, partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	return tk.et.tracker.Watermark()
}

func TestTaskWatermarkMinOverInputs(t *testing.T) {
	d := newMergeDriver(t, Watermarks(10*time.Millisecond, 0))
	pipeAt(t, d, "a", 100)
	if got := taskWatermark(t, d); got != math.MinInt64 {
		t.Fatalf("b not read yet, no idle timeout: watermark %d, want none", got)
	}
	pipeAt(t, d, "b", 150)
	if got := taskWatermark(t, d); got != 90 {
		t.Fatalf("watermark %d, want min(100, 150) - 10 = 90", got)
	}
	pipeAt(t, d, "a", 300)
	pipeAt(t, d, "a", 120) // out of order: a's largest stays 300
	if got := taskWatermark(t, d); got != 140 {
		t.Fatalf("watermark %d, want min(300, 150) - 10 = 140", got)
	}
}

func TestTaskWatermarkIdleInput(t *testing.T) {
	clk := &instantClock{now: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)} // Sleep advances it
	reg := prometheus.NewRegistry()
	d := newMergeDriver(t, Watermarks(0, 5*time.Second), ProcessingClock(clk), Registerer(reg))
	pipeAt(t, d, "a", 1000)
	if got := taskWatermark(t, d); got != math.MinInt64 {
		t.Fatalf("b silent for 0s: watermark %d, want none", got)
	}
	if m := gatherTask(t, reg, "0_0"); m["weir_stream_task_idle_inputs"] == nil || *m["weir_stream_task_idle_inputs"] != 0 || m["weir_stream_task_watermark_seconds"] != nil {
		t.Fatalf("metrics before a watermark: %v", m)
	}
	clk.Sleep(context.Background(), 5*time.Second)
	pipeAt(t, d, "a", 2000)
	if got := taskWatermark(t, d); got != 2000 {
		t.Fatalf("b silent for 5s (idle): watermark %d, want a's 2000", got)
	}
	m := gatherTask(t, reg, "0_0")
	wantLag := float64(clk.Now().UnixMilli()-2000) / 1e3
	if *m["weir_stream_task_idle_inputs"] != 1 || *m["weir_stream_task_watermark_seconds"] != 2 || *m["weir_stream_task_event_time_lag_seconds"] != wantLag {
		t.Fatalf("metrics: idle %v watermark %v lag %v, want 1, 2, %v", *m["weir_stream_task_idle_inputs"],
			*m["weir_stream_task_watermark_seconds"], *m["weir_stream_task_event_time_lag_seconds"], wantLag)
	}
	// b comes back behind: it holds the watermark again, which does not
	// go back.
	pipeAt(t, d, "b", 1500)
	pipeAt(t, d, "a", 3000)
	if got := taskWatermark(t, d); got != 2000 {
		t.Fatalf("b back at 1500: watermark %d, want 2000 (held)", got)
	}
	pipeAt(t, d, "b", 2500)
	if got := taskWatermark(t, d); got != 2500 {
		t.Fatalf("b at 2500: watermark %d, want 2500", got)
	}
}

// gatherTask returns the gauges of task id (nil: no such series).
func gatherTask(t *testing.T, reg *prometheus.Registry, id string) map[string]*float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "task" && l.GetValue() == id && m.GetGauge() != nil {
					v := m.GetGauge().GetValue()
					out[mf.GetName()] = &v
				}
			}
		}
	}
	return out
}

func TestTaskWatermarkMarkersAreNotData(t *testing.T) {
	d := newMergeDriver(t)
	marker := watermark.AppendMarker(nil, watermark.Marker{Writer: 0, Writers: 1, Watermark: 5})
	for _, h := range []Header{
		{Key: watermark.MarkerHeader, Value: marker},
		{Key: watermark.MarkerHeader, Value: []byte("not a marker")},
	} {
		if _, err := d.Pipe("a", nil, nil, time.UnixMilli(7), h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Pipe("a", []byte("k"), []byte("data"), time.UnixMilli(9), Header{Key: "traceparent", Value: []byte("00-x")}); err != nil {
		t.Fatal(err)
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	out := d.Records("out")
	if len(out) != 1 || string(out[0].Value) != "data" {
		t.Fatalf("out holds %v, want only the data record", out)
	}
	for _, topic := range d.Topics() {
		if topic != "a" && topic != "out" && len(d.Records(topic)) > 0 {
			t.Fatalf("%s holds %d records: markers went somewhere", topic, len(d.Records(topic)))
		}
	}
	tk, _ := d.task(taskID{})
	if next := tk.next["a"].Offset; next != 3 {
		t.Fatalf("next offset of a = %d, want 3 (markers count as handled)", next)
	}
}

// TestTaskWatermarkKeptWithCheckpoint: a task's watermark is written with
// its checkpoint and resumed by the next task opened on the same local
// state (a restart on the same disk).
func TestTaskWatermarkKeptWithCheckpoint(t *testing.T) {
	b := NewBuilder()
	Count(GroupByKey(From(b, "a", String(), String()), Codecs(String(), String())), StoreConfig{Name: "n", TTL: time.Hour}).
		ToStream().To("counts", String(), Int64())
	d := newTestDriver(t, b, Watermarks(10*time.Millisecond, 0))
	pipeAt(t, d, "a", 1000)
	pipeAt(t, d, "a", 800)
	id := taskID{}
	tk, err := d.task(id)
	if err != nil {
		t.Fatal(err)
	}
	if tk.db == nil {
		t.Fatal("the counting task has no local state")
	}
	if got := tk.et.tracker.Watermark(); got != 990 {
		t.Fatalf("watermark %d, want 990", got)
	}
	if err := tk.flushState(); err != nil {
		t.Fatal(err)
	}
	if err := tk.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if len(tk.lastCheckpoint) == 0 {
		t.Fatal("no checkpoint written")
	}
	if err := tk.close(); err != nil {
		t.Fatal(err)
	}
	delete(d.tasks, id)

	again, err := d.a.newTask(id) // the same directory, not wiped
	if err != nil {
		t.Fatal(err)
	}
	defer again.close()
	if got := again.et.tracker.Watermark(); got != 990 {
		t.Fatalf("reopened task's watermark %d, want 990", got)
	}
	// A replayed older record does not move it back.
	again.et.cur = again.et.inputs["a"]
	again.observe(time.UnixMilli(500))
	if got := again.advanceWatermark(); got != 990 {
		t.Fatalf("after a replayed record: %d, want 990", got)
	}
	if st := again.et.tracker.Status(); st[0].MaxEvent != 1000 {
		t.Fatalf("restored input %+v, want its largest event time 1000", st)
	}
}

func TestWatermarksOptionValidated(t *testing.T) {
	b := NewBuilder()
	From(b, "a", String(), String()).To("out", String(), String())
	if _, err := NewDriver("et", b, nil, StateDir(t.TempDir()), Watermarks(-time.Second, 0)); err == nil {
		t.Fatal("negative out-of-orderness accepted")
	}
}

// keyForPartition returns a key the App's partitioner puts in partition p
// of n.
func keyForPartition(t *testing.T, p, n int) []byte {
	t.Helper()
	part := kgo.StickyKeyPartitioner(nil).ForTopic("x")
	for i := 0; i < 10000; i++ {
		k := []byte(fmt.Sprint("key", i))
		if part.Partition(&kgo.Record{Key: k}, n) == p {
			return k
		}
	}
	t.Fatalf("no key for partition %d of %d", p, n)
	return nil
}

// TestStalledUpstreamHoldsDownstreamUntilIdle: the Driver runs a task
// only when it has input, so an upstream task whose partition gets nothing
// is a writer that never sends a marker: it holds every downstream
// watermark until the idle timeout passed on the processing clock, then the
// downstream watermark is the minimum over the writers that still speak.
func TestStalledUpstreamHoldsDownstreamUntilIdle(t *testing.T) {
	clk := &instantClock{now: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)}
	b := NewBuilder()
	keyByCount(b)
	d, err := NewDriver("st", b, map[string]int32{"ev": 3}, StateDir(t.TempDir()), ProcessingClock(clk),
		Watermarks(0, 5*time.Second), WatermarkMarkers(0))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	k0, k1 := keyForPartition(t, 0, 3), keyForPartition(t, 1, 3)
	step := func(ts0, ts1 int64) {
		t.Helper()
		d.Pipe("ev", k0, []byte(fmt.Sprint("v", ts0)), time.UnixMilli(ts0))
		d.Pipe("ev", k1, []byte(fmt.Sprint("v", ts1)), time.UnixMilli(ts1))
		if err := d.Process(); err != nil {
			t.Fatal(err)
		}
	}
	downstream := func() []int64 {
		t.Helper()
		var out []int64
		for p := int32(0); p < 3; p++ {
			tk, err := d.task(taskID{sub: 1, partition: p})
			if err != nil {
				t.Fatal(err)
			}
			if st := tk.et.tracker.Status(); len(st) != 1 || st[0].Writers != 3 {
				t.Fatalf("task 1_%d inputs %+v, want one repartition input with 3 writers", p, st)
			}
			out = append(out, tk.et.tracker.Watermark())
		}
		return out
	}
	none := []int64{watermark.Min, watermark.Min, watermark.Min}
	step(3000, 4000)
	if got := downstream(); !slices.Equal(got, none) {
		t.Fatalf("writer 2 not heard from: downstream %v, want none", got)
	}
	clk.Sleep(context.Background(), 4900*time.Millisecond)
	step(6000, 7000)
	if got := downstream(); !slices.Equal(got, none) {
		t.Fatalf("writer 2 silent 4.9s of a 5s idle timeout: downstream %v, want none", got)
	}
	clk.Sleep(context.Background(), 100*time.Millisecond)
	step(8000, 9000)
	if got := downstream(); !slices.Equal(got, []int64{8000, 8000, 8000}) {
		t.Fatalf("writer 2 silent 5s: downstream %v, want min(8000, 9000) of the writers that speak", got)
	}
	// The markers are in the repartition topic, never in the counts.
	markers := 0
	for _, r := range d.Records("st-n-repartition") {
		for _, h := range r.Headers {
			if h.Key == watermark.MarkerHeader {
				markers++
			}
		}
	}
	if markers == 0 || len(d.Records("out")) != 6 {
		t.Fatalf("%d markers, %d counts (want some, and 6)", markers, len(d.Records("out")))
	}
}

// TestAbortRestoresWatermark: an ExactlyOnce transaction that aborts takes
// the task's watermark back to where the task joined it (abortRound, as
// the App's end of transaction calls it), and the writer sends its marker
// again in the next round.
func TestAbortRestoresWatermark(t *testing.T) {
	b := NewBuilder()
	keyByCount(b)
	d, err := NewDriver("ab", b, nil, StateDir(t.TempDir()), WatermarkMarkers(0), Watermarks(10*time.Millisecond, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := func(ts int64) {
		t.Helper()
		d.Pipe("ev", []byte("k"), []byte(fmt.Sprint(ts)), time.UnixMilli(ts))
		if err := d.Process(); err != nil {
			t.Fatal(err)
		}
	}
	pipe(1000)
	up, _ := d.task(taskID{})
	if got := up.et.tracker.Watermark(); got != 990 {
		t.Fatalf("watermark %d, want 990", got)
	}
	sent := len(d.Records("ab-n-repartition"))
	up.beginRound() // joins a transaction
	pipe(5000)
	if got := up.et.tracker.Watermark(); got != 4990 {
		t.Fatalf("watermark in the transaction %d, want 4990", got)
	}
	up.abortRound()
	if got := up.et.tracker.Watermark(); got != 990 {
		t.Fatalf("watermark after the abort %d, want 990 again", got)
	}
	if st := up.et.tracker.Status(); st[0].MaxEvent != 1000 {
		t.Fatalf("input after the abort %+v, want its largest event time 1000 again", st)
	}
	if up.et.writer == nil || !up.et.writer.sent.IsZero() {
		t.Fatal("the writer still counts the aborted marker as sent")
	}
	// Nothing changed since the abort, but the aborted marker is sent again.
	before := len(d.Records("ab-n-repartition"))
	if before <= sent {
		t.Fatal("no marker written in the aborted transaction")
	}
	if err := up.endBatch(); err != nil {
		t.Fatal(err)
	}
	if got := len(d.Records("ab-n-repartition")); got != before+1 {
		t.Fatalf("%d records after the next round, want one more marker than %d", got, before)
	}
}

// TestCommitMetadataBounded: a repartition input with many upstream
// writers still fits Kafka's offset.metadata.max.bytes (4096): its writers
// are left out of the commit metadata, the watermarks are kept.
func TestCommitMetadataBounded(t *testing.T) {
	for _, writers := range []int{3, 1000} {
		b := NewBuilder()
		keyByCount(b)
		d, err := NewDriver("md", b, map[string]int32{"ev": int32(writers)}, StateDir(t.TempDir()), WatermarkMarkers(0))
		if err != nil {
			t.Fatal(err)
		}
		down, err := d.task(taskID{sub: 1, partition: 0})
		if err != nil {
			t.Fatal(err)
		}
		rep := "md-n-repartition"
		now := time.Unix(0, 0)
		for w := 0; w < writers; w++ {
			m := watermark.Marker{Writer: uint32(w), Writers: uint32(writers), Watermark: 1764633600000 + int64(w)}
			if err := down.et.tracker.ObserveMarker(down.et.inputs[rep], m, now); err != nil {
				t.Fatal(err)
			}
		}
		want := down.advanceWatermark()
		meta := down.commitMetadata(rep)
		if len(meta) > maxCommitMetadata || !strings.HasPrefix(meta, commitMetaPrefix) {
			t.Fatalf("%d writers: metadata of %d bytes (%.20q...)", writers, len(meta), meta)
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(meta, commitMetaPrefix))
		if err != nil {
			t.Fatal(err)
		}
		cw, ok, err := ParseCommittedWatermark(meta)
		if wantWriters := map[int]int{3: 3, 1000: 0}[writers]; !ok || err != nil || cw.Watermark != want ||
			cw.MaxEventTime != math.MinInt64 || cw.Writers != wantWriters {
			t.Fatalf("%d writers: ParseCommittedWatermark = %+v %v %v, want watermark %d, %d writers", writers, cw, ok, err, want, wantWriters)
		}
		tr, _ := watermark.New(watermark.Config{})
		in, _ := tr.AddRepartition(rep, 0, writers, now)
		if err := tr.Restore(raw, now); err != nil {
			t.Fatal(err)
		}
		if tr.Watermark() != want || want != 1764633600000 {
			t.Fatalf("%d writers: restored watermark %d, want %d", writers, tr.Watermark(), want)
		}
		tr.ObserveMarker(in, watermark.Marker{Writer: 0, Writers: uint32(writers), Watermark: 1}, now)
		writersKept := tr.Advance(now) == want && tr.Status()[0].Watermark == want
		if writersKept != (writers == 3) {
			t.Fatalf("%d writers: writers restored = %v (metadata %d bytes)", writers, writersKept, len(meta))
		}
		d.Close()
	}
}

// FuzzCommitMetadata: whatever metadata a group holds, reading it as a
// task's watermark state never panics, and a state that restores
// round-trips through commitMetadata's encoding.
func FuzzCommitMetadata(f *testing.F) {
	tr, _ := watermark.New(watermark.Config{})
	in := tr.AddSource("ev", 0, time.Time{})
	tr.Observe(in, 1764633600000)
	tr.Advance(time.Time{})
	f.Add(commitMetaPrefix + base64.RawURLEncoding.EncodeToString(tr.AppendInputState(nil, in, true)))
	f.Add(commitMetaPrefix + "!!")
	f.Add("member-1")
	f.Fuzz(func(t *testing.T, meta string) {
		cw, cwOK, cwErr := ParseCommittedWatermark(meta)
		state, ok, err := decodeCommitMetadata(meta)
		if cwOK != ok || err != nil && cwErr == nil {
			t.Fatalf("%q: ParseCommittedWatermark %v %v, decodeCommitMetadata %v %v", meta, cwOK, cwErr, ok, err)
		}
		if !ok || err != nil {
			return
		}
		tr, _ := watermark.New(watermark.Config{})
		in := tr.AddSource("ev", 0, time.Time{})
		if tr.Restore(state, time.Time{}) != nil {
			return
		}
		if cwErr == nil && cw.Watermark != tr.Watermark() {
			t.Fatalf("%q: ParseCommittedWatermark watermark %d, restored %d", meta, cw.Watermark, tr.Watermark())
		}
		again := commitMetaPrefix + base64.RawURLEncoding.EncodeToString(tr.AppendInputState(nil, in, true))
		state2, ok, err := decodeCommitMetadata(again)
		if !ok || err != nil {
			t.Fatalf("re-encoded %q: %v %v", again, ok, err)
		}
		tr2, _ := watermark.New(watermark.Config{})
		tr2.AddSource("ev", 0, time.Time{})
		if err := tr2.Restore(state2, time.Time{}); err != nil || tr2.Watermark() != tr.Watermark() {
			t.Fatalf("round trip: %v, watermark %d want %d", err, tr2.Watermark(), tr.Watermark())
		}
	})
}

// TestTaskWatermarkOnlyItsPartitions: a sub-topology merging a 2-partition
// and a 1-partition topic has two tasks; task 0_1 has no partition of the
// smaller topic, which must not hold its watermark.
func TestTaskWatermarkOnlyItsPartitions(t *testing.T) {
	b := NewBuilder()
	From(b, "a", String(), String()).Merge(From(b, "b", String(), String())).To("out", String(), String())
	d, err := NewDriver("et", b, map[string]int32{"a": 2, "b": 1}, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Pipe("a", keyForPartition(t, 1, 2), []byte("v"), time.UnixMilli(700))
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	tk, err := d.task(taskID{sub: 0, partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st := tk.et.tracker.Status(); len(st) != 1 || st[0].Topic != "a" {
		t.Fatalf("task 0_1 inputs %+v, want a-1 only", st)
	}
	if got := tk.et.tracker.Watermark(); got != 700 {
		t.Fatalf("task 0_1 watermark %d, want 700", got)
	}
}

// TestInternalTopicOfSeveralWritersTrackedAsSource: markers name a writer
// by its task in the one sub-topology writing a topic; a topic two
// sub-topologies write gets no markers and its readers track it by its
// records, as a source (instead of waiting for writers that never speak).
func TestInternalTopicOfSeveralWritersTrackedAsSource(t *testing.T) {
	b := NewBuilder()
	keyByCount(b)
	From(b, "other", String(), String()).To("sink", String(), String()) // its own sub-topology
	var otherSrc int
	for _, s := range b.sources {
		if s.topic == "other" {
			otherSrc = s.idx
		}
	}
	b.sinks = append(b.sinks, &sinkSpec{topic: "n-repartition", internal: true, op: "repartition", sources: []int{otherSrc}})
	d, err := NewDriver("mw", b, map[string]int32{"ev": 2, "other": 2}, StateDir(t.TempDir()), WatermarkMarkers(0))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipeKey := func(ts int64) {
		d.Pipe("ev", []byte("k"), []byte("v"), time.UnixMilli(ts))
		if err := d.Process(); err != nil {
			t.Fatal(err)
		}
	}
	pipeKey(1000)
	var down *task
	for _, tk := range d.tasks {
		if st := tk.et.tracker.Status(); len(st) == 1 && st[0].Topic == "mw-n-repartition" {
			down = tk
		}
	}
	if down == nil {
		t.Fatal("no task reads the repartition topic")
	}
	if st := down.et.tracker.Status(); st[0].Writers != 0 || down.et.tracker.Watermark() != 1000 {
		t.Fatalf("reader %+v watermark %d, want a source-like input at 1000", st, down.et.tracker.Watermark())
	}
	for _, r := range d.Records("mw-n-repartition") {
		if _, ok, _ := ParseWatermarkMarker(toKgoHeaders(r.Headers)); ok {
			t.Fatal("a marker was written to a topic of two writing sub-topologies")
		}
	}
}

func toKgoHeaders(hs []Header) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return out
}

// TestInputWatermarkMetrics: per input partition, the watermark gauge
// appears with the input's first watermark and the idle gauge says which
// input stopped holding the task back; both go when the task closes.
func TestInputWatermarkMetrics(t *testing.T) {
	clk := &instantClock{now: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	d := newMergeDriver(t, Watermarks(0, 5*time.Second), ProcessingClock(clk), Registerer(reg))
	inputs := func() map[string][2]float64 { // "topic-partition" -> {watermark (-1: absent), idle}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				var topic, part string
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "topic":
						topic = l.GetValue()
					case "partition":
						part = l.GetValue()
					}
				}
				if topic == "" {
					continue
				}
				k := topic + "-" + part
				v, ok := out[k]
				if !ok {
					v = [2]float64{-1, 0}
				}
				switch mf.GetName() {
				case "weir_stream_task_input_watermark_seconds":
					v[0] = m.GetGauge().GetValue()
				case "weir_stream_task_input_idle":
					v[1] = m.GetGauge().GetValue()
				}
				out[k] = v
			}
		}
		return out
	}
	pipeAt(t, d, "a", 3000)
	if got := inputs(); got["a-0"] != [2]float64{3, 0} || got["b-0"] != [2]float64{-1, 0} {
		t.Fatalf("after a record on a: %v, want a-0 at 3s, b-0 without a watermark, none idle", got)
	}
	clk.Sleep(context.Background(), 5*time.Second)
	pipeAt(t, d, "a", 4000)
	if got := inputs(); got["a-0"] != [2]float64{4, 0} || got["b-0"] != [2]float64{-1, 1} {
		t.Fatalf("b silent 5s: %v, want a-0 at 4s and b-0 idle", got)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := inputs(); len(got) != 0 {
		t.Fatalf("series of a closed task remain: %v", got)
	}
}

// TestForeignKeyJoinTopicsNoMarkerCycle: a foreign-key join's
// subscription and response topics make two sub-topologies feed each
// other; waiting for each other's markers would hold both watermarks at
// none forever, so those topics are tracked by their records and the
// watermarks move with the data.
func TestForeignKeyJoinTopicsNoMarkerCycle(t *testing.T) {
	b := NewBuilder()
	orders := FromTable(b, "orders", String(), String(), "orders")
	customers := FromTable(b, "customers", String(), String(), "customers")
	JoinForeign(orders, func(_ string, c string) (string, error) { return c, nil }, customers,
		StoreConfig{Name: "oc", NoExpiry: "test"},
		func(o, c, name string) (string, error) { return o + " for " + name, nil }).ToStream().To("oc", String(), String())
	d, err := NewDriver("fk", b, map[string]int32{"orders": 2, "customers": 2}, StateDir(t.TempDir()), WatermarkMarkers(0))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, s := range b.sources {
		if s.internal {
			if n := d.a.repartitionWriters(s); n != 0 {
				t.Fatalf("%s: %d marker writers, want none (a cycle)", s.topic, n)
			}
		}
	}
	at := time.UnixMilli(5000)
	for _, p := range [][3]string{{"customers", "c1", "Ann"}, {"orders", "o1", "c1"}} {
		d.Pipe(p[0], []byte(p[1]), []byte(p[2]), at)
		if err := d.Process(); err != nil {
			t.Fatal(err)
		}
	}
	if out := d.Records("oc"); len(out) != 1 || string(out[0].Value) != "o1 for Ann" {
		t.Fatalf("join output %v", out)
	}
	for id, tk := range d.tasks {
		for _, in := range tk.et.tracker.Status() {
			if in.Writers != 0 {
				t.Fatalf("task %s input %+v waits for markers", id, in)
			}
		}
	}
}
