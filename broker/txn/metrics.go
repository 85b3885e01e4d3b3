package txn

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the coordinator's Prometheus metrics (namespace weir_txn).
type metrics struct {
	reg          prometheus.Registerer
	collectors   []prometheus.Collector
	states       *prometheus.GaugeVec
	commits      prometheus.Counter
	aborts       *prometheus.CounterVec
	timeouts     prometheus.Counter
	expired      prometheus.Counter
	markers      prometheus.Counter
	markerErrors prometheus.Counter
	pids         prometheus.Counter
	appendErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reg: reg,
		states: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "txn", Name: "transactional_ids",
			Help: "Transactional ids by state."}, []string{"state"}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "txn", Name: "commits_total",
			Help: "Transactions committed (Complete state durable)."}),
		aborts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "weir", Subsystem: "txn", Name: "aborts_total",
			Help: "Transactions aborted, by reason (client, timeout, fenced)."}, []string{"reason"}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "txn", Name: "timeouts_total",
			Help: "Transactions aborted because they exceeded their timeout."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "txn", Name: "expired_ids_total",
			Help: "Transactional ids removed after transactional.id.expiration.ms idle."}),
		markers: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "txn", Name: "markers_written_total",
			Help: "Transaction markers written to partitions."}),
		markerErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "txn", Name: "marker_errors_total",
			Help: "Failed marker writes (each is retried)."}),
		pids: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "txn", Name: "producer_ids_allocated_total",
			Help: "Producer ids handed out."}),
		appendErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "txn", Name: "state_append_errors_total",
			Help: "Failed appends to __transaction_state."}),
	}
	m.collectors = []prometheus.Collector{m.states, m.commits, m.aborts, m.timeouts, m.expired, m.markers, m.markerErrors, m.pids, m.appendErrors}
	if reg == nil {
		return m, nil
	}
	for i, col := range m.collectors {
		if err := reg.Register(col); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("txn: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, col := range m.collectors {
		m.reg.Unregister(col)
	}
}
