package stream

import "github.com/prometheus/client_golang/prometheus"

// metrics of one App, labelled with its id. They are registered with the
// Registerer option, if any.
type metrics struct {
	recordsIn   prometheus.Counter
	recordsOut  prometheus.Counter
	dlq         prometheus.Counter
	retries     prometheus.Counter
	expired     prometheus.Counter
	restored    prometheus.Counter
	restoreSecs prometheus.Counter
	commits     prometheus.Counter
	tasksOpened prometheus.Counter
	tasksClosed prometheus.Counter
	tasks       prometheus.Gauge
	storeBytes  prometheus.Gauge
}

func newMetrics(appID string, reg prometheus.Registerer) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "stream", Name: name,
			Help: help, ConstLabels: prometheus.Labels{"app": appID}})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream", Name: name,
			Help: help, ConstLabels: prometheus.Labels{"app": appID}})
	}
	m := &metrics{
		recordsIn:   c("records_in_total", "Input records handled (processed or dead-lettered)."),
		recordsOut:  c("records_out_total", "Records produced: outputs, changelog, repartition, dead letters."),
		dlq:         c("dlq_records_total", "Records sent to a dead-letter topic."),
		retries:     c("retries_total", "Processing attempts that failed and were retried."),
		expired:     c("store_expired_keys_total", "Store keys removed by their TTL."),
		restored:    c("restored_records_total", "Changelog records applied while restoring stores."),
		restoreSecs: c("restore_seconds_total", "Time spent restoring stores."),
		commits:     c("commits_total", "Offset commits."),
		tasksOpened: c("tasks_opened_total", "Tasks created (and restored) on this instance."),
		tasksClosed: c("tasks_closed_total", "Tasks closed on this instance (revoked, lost or shut down)."),
		tasks:       g("tasks", "Tasks owned by this instance."),
		storeBytes:  g("store_bytes", "On-disk size of the local stores (sampled at commit)."),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.recordsIn, m.recordsOut, m.dlq, m.retries, m.expired,
			m.restored, m.restoreSecs, m.commits, m.tasksOpened, m.tasksClosed, m.tasks, m.storeBytes} {
			if err := reg.Register(col); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
