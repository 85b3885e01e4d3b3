package group

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gatherSeries returns every series of the registry by metric name and
// label values ("group=g,topic=t,..." in label order).
func gatherSeries(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		series := map[string]float64{}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, lp := range m.GetLabel() {
				if key != "" {
					key += ","
				}
				key += lp.GetName() + "=" + lp.GetValue()
			}
			series[key] = value(m)
		}
		out[mf.GetName()] = series
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestMetricsGenerationAndUncommittedLag: every group exports its current
// generation (classic) or epoch (KIP-848) and its rebalance count, and the
// partitions of its subscribed topics without a committed offset get a lag
// counted from the log start, labelled from="log_start"; committed ones
// keep from="committed".
func TestMetricsGenerationAndUncommittedLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(o *Options) { o.Registerer = reg })
	for p, hw := range []int64{10, 20, 30, 40} {
		h.topics.hw[tp{"t", int32(p)}] = hw
	}
	m := &cmem{id: "m"}
	h.cgHeartbeat("cg", m, []string{"t"})
	h.cgHeartbeat("cg", m, nil)
	h.commit(commitReq("cg", "m", m.epoch, "t", map[int32]int64{0: 4}))
	_, gen := h.stableGroup("classic", 1)

	s := gatherSeries(t, reg)
	lag := s["weir_group_lag_records"]
	want := map[string]float64{
		"from=committed,group=cg,partition=0,topic=t": 6,
		"from=log_start,group=cg,partition=1,topic=t": 20,
		"from=log_start,group=cg,partition=2,topic=t": 30,
		"from=log_start,group=cg,partition=3,topic=t": 40,
	}
	for k, v := range want {
		if got, ok := lag[k]; !ok || got != v {
			t.Errorf("weir_group_lag_records{%s} = %v (present %v), want %v; all: %v", k, got, ok, v, lag)
		}
	}
	if len(lag) != len(want) {
		t.Errorf("lag series %v, want exactly %v", lag, want)
	}
	if g := s["weir_group_generation"]; g["group=cg"] != float64(m.epoch) || g["group=classic"] != float64(gen) || m.epoch < 1 {
		t.Errorf("weir_group_generation %v, want cg=%d classic=%d", g, m.epoch, gen)
	}
	if r := s["weir_group_rebalances_total"]; r["group=classic"] != 1 || r["group=cg"] < 1 {
		t.Errorf("weir_group_rebalances_total %v", r)
	}
}
