package stream

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	d := newMergeDriver(t, Watermarks(0, 5*time.Second), WithClock(clk), Registerer(reg))
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
	Count(GroupByKey(From(b, "a", String(), String()), String(), String()), StoreConfig{Name: "n", TTL: time.Hour}).
		To("counts", String(), Int64())
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
