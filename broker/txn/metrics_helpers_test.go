package txn

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func testutilCount(e *env, reason string) float64 {
	return counterValue(e.c.met.aborts.WithLabelValues(reason))
}

func testutilMarkerErrors(e *env) float64 { return counterValue(e.c.met.markerErrors) }
