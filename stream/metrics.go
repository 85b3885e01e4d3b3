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
	restoreLeft prometheus.Gauge
	commits     prometheus.Counter
	fenced      prometheus.Counter
	txnAborts   prometheus.Counter
	tasksOpened prometheus.Counter
	tasksClosed prometheus.Counter
	tasks       prometheus.Gauge
	storeBytes  prometheus.Gauge

	// Per task (label "task" = "<topic>-<partition>"); children are
	// removed when the task closes.
	taskIn  *prometheus.CounterVec
	taskOut *prometheus.CounterVec
	taskDLQ *prometheus.CounterVec
	// taskRedelivered counts records a task skipped because they were below
	// its next offset (the client moved its position back on its own).
	taskRedelivered *prometheus.CounterVec
	taskLag         *prometheus.GaugeVec
	// event time (eventtime.go)
	taskWatermark  *prometheus.GaugeVec
	taskEventLag   *prometheus.GaugeVec
	taskIdleInputs *prometheus.GaugeVec
	// per input partition of a task (labels task, topic, partition)
	inputWatermark *prometheus.GaugeVec
	inputIdle      *prometheus.GaugeVec
	// watermark markers written to and read from repartition topics
	markersOut prometheus.Counter
	markersIn  prometheus.Counter
	// windowLate counts late records of windowed stores (window_agg.go),
	// labels store and policy.
	windowLate *prometheus.CounterVec
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
		restoreLeft: g("restore_remaining_records", "Changelog records left to apply by the restore in progress (0 when none)."),
		commits:     c("commits_total", "Offset commits (transactions committed under ExactlyOnce)."),
		fenced:      c("fenced_total", "Sessions restarted because the instance was fenced (ExactlyOnce)."),
		txnAborts:   c("transactions_aborted_total", "Transactions aborted (ExactlyOnce): their records are processed again."),
		tasksOpened: c("tasks_opened_total", "Tasks created (and restored) on this instance."),
		tasksClosed: c("tasks_closed_total", "Tasks closed on this instance (revoked, lost or shut down)."),
		tasks:       g("tasks", "Tasks owned by this instance."),
		storeBytes:  g("store_bytes", "On-disk size of the local stores (sampled at commit)."),
		markersOut:  c("watermark_markers_out_total", "Watermark markers written to repartition topics (one per partition)."),
		markersIn:   c("watermark_markers_in_total", "Watermark markers read from repartition topics (never handed to operators)."),
	}
	labels := []string{"task"}
	m.taskIn = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_records_in_total", Help: "Input records handled by the task.",
		ConstLabels: prometheus.Labels{"app": appID}}, labels)
	m.taskOut = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_records_out_total", Help: "Records produced by the task (all topics).",
		ConstLabels: prometheus.Labels{"app": appID}}, labels)
	m.taskRedelivered = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "weir", Subsystem: "stream",
		Name:        "task_redelivered_records_total",
		Help:        "Records a task skipped because the client delivered them again below the task's position (its state already holds them).",
		ConstLabels: prometheus.Labels{"app": appID}}, labels)
	m.taskDLQ = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_dlq_records_total", Help: "Records the task sent to a dead-letter topic.",
		ConstLabels: prometheus.Labels{"app": appID}}, labels)
	m.taskLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_input_lag", Help: "Records between the task's position and its input's high watermark (at the last poll).",
		ConstLabels: prometheus.Labels{"app": appID}}, labels)
	m.taskWatermark = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_watermark_seconds", Help: "The task's event-time watermark, Unix seconds (absent until the task has one).",
		ConstLabels: prometheus.Labels{"app": appID}}, labels)
	m.taskEventLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_event_time_lag_seconds", Help: "Processing clock minus the task's watermark, at its last batch (absent until the task has a watermark).",
		ConstLabels: prometheus.Labels{"app": appID}}, labels)
	m.taskIdleInputs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_idle_inputs", Help: "Input partitions of the task idle past the idle timeout (not holding its watermark back).",
		ConstLabels: prometheus.Labels{"app": appID}}, labels)
	inLabels := []string{"task", "topic", "partition"}
	m.inputWatermark = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_input_watermark_seconds", Help: "An input partition's own watermark, Unix seconds (for a repartition topic the minimum over its active upstream writers; absent until it has one).",
		ConstLabels: prometheus.Labels{"app": appID}}, inLabels)
	m.inputIdle = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream",
		Name: "task_input_idle", Help: "1 if the input partition is idle past the idle timeout (holds the task's watermark back no more), else 0.",
		ConstLabels: prometheus.Labels{"app": appID}}, inLabels)
	m.windowLate = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "weir", Subsystem: "stream",
		Name:        "window_late_records_total",
		Help:        "Late records of windowed stores, by late policy (drop, topic, dlq, updates-expired: past the retention of LateUpdates); partial: windows a record that was not late skipped because they were closed.",
		ConstLabels: prometheus.Labels{"app": appID}}, []string{"store", "policy"})
	if reg != nil {
		for _, col := range []prometheus.Collector{m.recordsIn, m.recordsOut, m.dlq, m.retries, m.expired,
			m.restored, m.restoreSecs, m.restoreLeft, m.commits, m.fenced, m.txnAborts, m.tasksOpened, m.tasksClosed, m.tasks, m.storeBytes,
			m.taskIn, m.taskOut, m.taskDLQ, m.taskRedelivered, m.taskLag, m.taskWatermark, m.taskEventLag, m.taskIdleInputs,
			m.inputWatermark, m.inputIdle, m.markersOut, m.markersIn, m.windowLate} {
			if err := reg.Register(col); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// taskMetrics are one task's children of the per-task vectors.
type taskMetrics struct {
	in, out, dlq, redelivered prometheus.Counter
	lag                       prometheus.Gauge
}

func (m *metrics) forTask(task string) taskMetrics {
	return taskMetrics{in: m.taskIn.WithLabelValues(task), out: m.taskOut.WithLabelValues(task),
		dlq: m.taskDLQ.WithLabelValues(task), redelivered: m.taskRedelivered.WithLabelValues(task),
		lag: m.taskLag.WithLabelValues(task)}
}

func (m *metrics) dropTask(task string) {
	m.taskIn.DeleteLabelValues(task)
	m.taskOut.DeleteLabelValues(task)
	m.taskDLQ.DeleteLabelValues(task)
	m.taskRedelivered.DeleteLabelValues(task)
	m.taskLag.DeleteLabelValues(task)
	m.taskWatermark.DeleteLabelValues(task)
	m.taskEventLag.DeleteLabelValues(task)
	m.taskIdleInputs.DeleteLabelValues(task)
	m.inputWatermark.DeletePartialMatch(prometheus.Labels{"task": task})
	m.inputIdle.DeletePartialMatch(prometheus.Labels{"task": task})
}
