package broker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// metricValue gathers reg and returns the value of the series of name
// whose labels include want.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, _ := testBroker(t, func(c *Config) { c.Registerer = reg })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "mt", 1)
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "mt", 0, makeBatch(1, "a", "b", "c")), 1)
	c.roundTrip(produceReq(9, -1, "nope", 0, makeBatch(1, "a")), 2)

	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		got, ok := metricValue(t, reg, name, labels)
		if !ok || got != want {
			t.Errorf("%s%v = %v (found %v), want %v", name, labels, got, ok, want)
		}
	}
	check("weir_broker_requests_total", map[string]string{"api": "Produce"}, 2)
	check("weir_broker_request_errors_total", map[string]string{"api": "Produce", "error": "UNKNOWN_TOPIC_OR_PARTITION"}, 1)
	check("weir_partition_high_watermark", map[string]string{"topic": "mt", "partition": "0"}, 3)
	if v, _ := metricValue(t, reg, "weir_broker_connections", nil); v < 2 { // the admin client's and ours
		t.Errorf("connections %v", v)
	}
	tp, _ := b.topics.get("mt")
	sess := fetchReq(12, "mt", tp.id, 0, 0, 0)
	sess.SessionEpoch = 0
	c.roundTrip(sess, 3)
	check("weir_broker_fetch_sessions", nil, 1)
	if v, _ := metricValue(t, reg, "weir_broker_received_bytes_total", nil); v <= 0 {
		t.Errorf("received bytes %v", v)
	}
}
