package stream

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestTaskMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := NewBuilder()
	in := From(b, "in", String(), String())
	Map(in, func(r Record[string, string]) (string, error) {
		if r.Value == "bad" {
			return "", errors.New("bad")
		}
		return r.Value, nil
	}).To("out", String(), String())
	h := newHarness(t, b, Registerer(reg), MaxAttempts(1))
	h.feed("in", 1, "k", "a", t0)
	h.feed("in", 1, "k", "bad", t0)
	h.feed("in", 2, "k", "b", t0)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "task" {
					name += "{" + l.GetValue() + "}"
				}
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"weir_stream_task_records_in_total{0_1}":  2,
		"weir_stream_task_records_in_total{0_2}":  1,
		"weir_stream_task_dlq_records_total{0_1}": 1,
		"weir_stream_task_records_out_total{0_1}": 2, // one output + one dead letter
		"weir_stream_records_in_total":            3,
		"weir_stream_dlq_records_total":           1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// A closed task's series disappear.
	h.task("in", 2).close()
	delete(h.tasks, h.taskID("in", 2))
	mfs, _ = reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "task" && l.GetValue() == "0_2" {
					t.Fatalf("%s still has task in-2 after close", mf.GetName())
				}
			}
		}
	}
}
