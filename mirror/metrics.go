package mirror

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one mirror; every series carries the label mirror=<ID>.
type metrics struct {
	records    *prometheus.CounterVec
	bytes      *prometheus.CounterVec
	lagRecords *prometheus.GaugeVec
	lagSeconds *prometheus.GaugeVec
	syncs      prometheus.Counter
	restarts   prometheus.Counter
	deduped    prometheus.Counter
	dataLoss   prometheus.Counter
	// group offset sync (groups.go), by group
	groupSynced *prometheus.CounterVec
	groupSkips  *prometheus.CounterVec
	collectors  []prometheus.Collector
}

func newMetrics(id string, reg prometheus.Registerer) (*metrics, error) {
	l := prometheus.Labels{"mirror": id}
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_mirror_copied_records_total", ConstLabels: l,
			Help: "Data records copied to the target and acknowledged, by source topic."}, []string{"topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_mirror_copied_bytes_total", ConstLabels: l,
			Help: "Key and value bytes of the records copied, by source topic."}, []string{"topic"}),
		lagRecords: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_mirror_lag_records", ConstLabels: l,
			Help: "Source offsets not yet copied: the source partition's last stable offset minus the mirror's position, at its last fetch."}, []string{"topic", "partition"}),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_mirror_lag_seconds", ConstLabels: l,
			Help: "0 when the partition is caught up; else the age (now minus source timestamp) of the last record copied."}, []string{"topic", "partition"}),
		syncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_mirror_offset_syncs_total", ConstLabels: l,
			Help: "Offset-sync records written to the target (one per copied batch and partition)."}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_mirror_restarts_total", ConstLabels: l,
			Help: "Times the mirror restarted its copy after an error (it resumes from its stored progress)."}),
		deduped: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_mirror_restart_skipped_records_total", ConstLabels: l,
			Help: "Records found already copied (compared equal) on the target after a stop without progress, and not copied again."}),
		dataLoss: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_mirror_source_data_loss_total", ConstLabels: l,
			Help: "Times the source no longer held the records the mirror was to copy next (retention ran ahead of the mirror)."}),
		groupSynced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_mirror_group_offsets_synced_total", ConstLabels: l,
			Help: "Partition offsets of a consumer group translated and committed on the target by the group offset sync."}, []string{"group"}),
		groupSkips: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_mirror_group_sync_skipped_total", ConstLabels: l,
			Help: "Times the group offset sync left a group alone because it has members on the target."}, []string{"group"}),
	}
	m.collectors = []prometheus.Collector{m.records, m.bytes, m.lagRecords, m.lagSeconds, m.syncs, m.restarts, m.deduped, m.dataLoss, m.groupSynced, m.groupSkips}
	if reg != nil {
		for _, c := range m.collectors {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) setLag(p tp, records int64, seconds float64) {
	ps := strconv.Itoa(int(p.partition))
	m.lagRecords.WithLabelValues(p.topic, ps).Set(float64(max(records, 0)))
	m.lagSeconds.WithLabelValues(p.topic, ps).Set(max(seconds, 0))
}
