package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are registered on Config.Registerer (nothing is registered when
// it is nil). Partition gauges are collected on scrape from the registry,
// so creating and deleting topics needs no metric bookkeeping.
type metrics struct {
	reg prometheus.Registerer
	cs  []prometheus.Collector

	requests          *prometheus.CounterVec   // api
	requestErrors     *prometheus.CounterVec   // api, error
	latency           *prometheus.HistogramVec // api
	bytesIn           prometheus.Counter
	bytesOut          prometheus.Counter
	connections       prometheus.Gauge
	badFrames         prometheus.Counter
	topicsAutoCreated prometheus.Counter
	producedBytes     prometheus.Counter
	producedBatches   prometheus.Counter
	fetchedBytes      prometheus.Counter
	authzDenied       *prometheus.CounterVec // resource type, operation (authz.go)
	quota             quotaMetrics           // quota_enforce.go
	authentications   *prometheus.CounterVec // mechanism (or "TLS"), result
}

func newMetrics(reg prometheus.Registerer, b *Broker) *metrics {
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_requests_total", Help: "Requests received, by API.",
		}, []string{"api"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_request_errors_total", Help: "Error codes returned (top-level and per partition), by API and Kafka error name.",
		}, []string{"api", "error"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weir_broker_request_duration_seconds", Help: "Time from a request being read to its response being ready, by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"api"}),
		bytesIn:           prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_received_bytes_total", Help: "Request bytes read from clients."}),
		bytesOut:          prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_sent_bytes_total", Help: "Response bytes written to clients."}),
		connections:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_broker_connections", Help: "Open client connections."}),
		badFrames:         prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_bad_requests_total", Help: "Connections closed for a malformed, oversized or unsupported request."}),
		topicsAutoCreated: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_topics_auto_created_total", Help: "Topics created by Metadata/Produce auto-creation."}),
		producedBytes:     prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_produced_bytes_total", Help: "Record batch bytes appended by Produce."}),
		producedBatches:   prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_produced_batches_total", Help: "Produce partition requests appended."}),
		fetchedBytes:      prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_fetched_bytes_total", Help: "Record batch bytes returned by Fetch."}),
		authentications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_authentications_total", Help: "SASL authentications and re-authentications by mechanism, TLS handshakes (mechanism TLS) and HTTP logins (mechanisms HTTP_BASIC, HTTP_BEARER), by result (success, failure).",
		}, []string{"mechanism", "result"}),
	}
	m.authzDenied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_broker_authorization_denied_total", Help: "Authorization checks refused, by resource type and operation.",
	}, []string{"resource_type", "operation"})
	m.quota = newQuotaMetrics()
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_broker_fetch_sessions", Help: "Open incremental fetch sessions (KIP-227).",
	}, func() float64 { return float64(b.sessions.count()) })
	m.cs = []prometheus.Collector{m.requests, m.requestErrors, m.latency, m.bytesIn, m.bytesOut, m.connections,
		m.badFrames, m.topicsAutoCreated, m.producedBytes, m.producedBatches, m.fetchedBytes, m.authentications, sessions, partitionCollector{b}, cleanerCollector{b}, m.authzDenied}
	m.cs = append(m.cs, m.quota.collectors()...)
	if reg != nil {
		for _, c := range m.cs {
			if err := reg.Register(c); err != nil {
				b.logger.Warn("metric registration failed", "err", err)
			}
		}
	}
	return m
}

func (m *metrics) unregister() {
	if m == nil || m.reg == nil {
		return
	}
	for _, c := range m.cs {
		m.reg.Unregister(c)
	}
}

// partitionError counts a non-zero error code for api.
func (m *metrics) partitionError(api string, code int16) {
	if code != 0 {
		m.requestErrors.WithLabelValues(api, errorName(code)).Inc()
	}
}

var (
	hwDesc    = prometheus.NewDesc("weir_partition_high_watermark", "High watermark (next offset visible to consumers).", []string{"topic", "partition"}, nil)
	startDesc = prometheus.NewDesc("weir_partition_log_start_offset", "First offset still in the log.", []string{"topic", "partition"}, nil)
	sizeDesc  = prometheus.NewDesc("weir_partition_size_bytes", "Bytes on disk of the partition's segments.", []string{"topic", "partition"}, nil)
	topicDesc = prometheus.NewDesc("weir_topics", "Topics in the registry.", nil, nil)
)

type partitionCollector struct{ b *Broker }

func (pc partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hwDesc
	ch <- startDesc
	ch <- sizeDesc
	ch <- topicDesc
}

func (pc partitionCollector) Collect(ch chan<- prometheus.Metric) {
	if pc.b.topics == nil {
		return
	}
	ts := pc.b.topics.all()
	ch <- prometheus.MustNewConstMetric(topicDesc, prometheus.GaugeValue, float64(len(ts)))
	for _, t := range ts {
		for p, l := range t.parts {
			ps := strconv.Itoa(p)
			ch <- prometheus.MustNewConstMetric(hwDesc, prometheus.GaugeValue, float64(l.HighWatermark()), t.name, ps)
			ch <- prometheus.MustNewConstMetric(startDesc, prometheus.GaugeValue, float64(l.LogStartOffset()), t.name, ps)
			ch <- prometheus.MustNewConstMetric(sizeDesc, prometheus.GaugeValue, float64(l.Size()), t.name, ps)
		}
	}
}

// The log cleaner's metrics (Kafka's kafka.log:type=LogCleaner and
// LogCleanerManager), read from the log Manager on scrape.
var (
	cleanerReadDesc     = prometheus.NewDesc("weir_log_cleaner_read_bytes_total", "Bytes read by the log cleaner (both passes).", nil, nil)
	cleanerWrittenDesc  = prometheus.NewDesc("weir_log_cleaner_written_bytes_total", "Bytes written by the log cleaner (cleaned segments).", nil, nil)
	cleanerPassesDesc   = prometheus.NewDesc("weir_log_cleaner_passes_total", "Cleaning passes that rewrote segments.", nil, nil)
	cleanerErrorsDesc   = prometheus.NewDesc("weir_log_cleaner_errors_total", "Cleaning passes that failed (I/O, corruption).", nil, nil)
	cleanerRemovedDesc  = prometheus.NewDesc("weir_log_cleaner_records_removed_total", "Records removed by the cleaner (superseded, expired tombstones, aborted).", nil, nil)
	cleanerMarkersDesc  = prometheus.NewDesc("weir_log_cleaner_markers_removed_total", "Transaction markers removed by the cleaner.", nil, nil)
	cleanerPrunedDesc   = prometheus.NewDesc("weir_log_cleaner_aborted_index_pruned_total", "Aborted-transaction index entries dropped (their data is gone).", nil, nil)
	cleanerLastDurDesc  = prometheus.NewDesc("weir_log_cleaner_last_pass_duration_seconds", "Duration of the last cleaning pass.", nil, nil)
	cleanerDirtyDesc    = prometheus.NewDesc("weir_log_cleaner_max_dirty_ratio", "Highest dirty ratio over the compacted partitions at the cleaner's last look.", nil, nil)
	cleanerDelayDesc    = prometheus.NewDesc("weir_log_cleaner_max_compaction_delay_seconds", "How far the most overdue compacted partition is past its max.compaction.lag.ms, at the cleaner's last look.", nil, nil)
	cleanerSinceRunDesc = prometheus.NewDesc("weir_log_cleaner_time_since_last_look_seconds", "Time since the cleaner last looked for work (-1 before the first look).", nil, nil)
)

type cleanerCollector struct{ b *Broker }

func (cc cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cleanerReadDesc, cleanerWrittenDesc, cleanerPassesDesc, cleanerErrorsDesc, cleanerRemovedDesc,
		cleanerMarkersDesc, cleanerPrunedDesc, cleanerLastDurDesc, cleanerDirtyDesc, cleanerDelayDesc, cleanerSinceRunDesc} {
		ch <- d
	}
}

func (cc cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	if cc.b.logs == nil {
		return
	}
	st := cc.b.logs.CleanerStats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(cleanerReadDesc, st.BytesRead)
	counter(cleanerWrittenDesc, st.BytesWritten)
	counter(cleanerPassesDesc, st.Passes)
	counter(cleanerErrorsDesc, st.Errors)
	counter(cleanerRemovedDesc, st.RecordsRemoved)
	counter(cleanerMarkersDesc, st.MarkersRemoved)
	counter(cleanerPrunedDesc, st.AbortedPruned)
	gauge(cleanerLastDurDesc, st.LastPassDuration.Seconds())
	gauge(cleanerDirtyDesc, st.MaxDirtyRatio)
	gauge(cleanerDelayDesc, st.MaxCompactionDelay.Seconds())
	since := -1.0
	if !st.LastLook.IsZero() {
		since = cc.b.cfg.Now().Sub(st.LastLook).Seconds()
	}
	gauge(cleanerSinceRunDesc, since)
}
