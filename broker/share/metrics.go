package share

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics:
//
//	weir_share_records_acquired_total          counter records handed to members
//	weir_share_records_redelivered_total       counter of those, acquired again (delivery count > 1)
//	weir_share_records_acknowledged_total{type} counter accept, release, reject, gap, renew
//	weir_share_records_released_total          counter released by a closing session or leaving member
//	weir_share_lock_expired_total              counter acquisition locks that timed out
//	weir_share_acknowledge_errors_total        counter acknowledgements refused (INVALID_RECORD_STATE)
//	weir_share_state_writes_total              counter durable writes to __share_group_state
//	weir_share_joins_total                     counter members that joined a share group
//	weir_share_assignments_total               counter assignments computed
//	weir_share_sessions_closed_by_disconnect_total
//	                                           counter share sessions ended by their connection closing
//	weir_share_group_members{group}            gauge   members per share group
//	weir_share_partition_records{group,topic,partition,state}
//	                                           gauge   in-flight records by state (available,
//	                                           acquired, acknowledged, archived)
//	weir_share_partition_lag{group,topic,partition}
//	                                           gauge   high watermark minus start offset minus
//	                                           records settled in flight
//
// The gauges are computed at scrape time under the coordinator's lock.

type metrics struct {
	c           *Coordinator
	reg         prometheus.Registerer
	acquired    prometheus.Counter
	redelivered prometheus.Counter
	acks        *prometheus.CounterVec
	released    prometheus.Counter
	lockExpired prometheus.Counter
	ackErrors   prometheus.Counter
	stateWrites prometheus.Counter
	joins       prometheus.Counter
	assignments prometheus.Counter
	connClosed  prometheus.Counter
	members     *prometheus.Desc
	records     *prometheus.Desc
	lag         *prometheus.Desc
}

func newMetrics(c *Coordinator, reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &metrics{
		c:           c,
		reg:         reg,
		acquired:    counter("weir_share_records_acquired_total", "Records acquired by share group members."),
		redelivered: counter("weir_share_records_redelivered_total", "Records acquired with a delivery count above 1."),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_share_records_acknowledged_total", Help: "Records acknowledged by share group members, by acknowledge type.",
		}, []string{"type"}),
		released:    counter("weir_share_records_released_total", "Acquired records released because their member's share session closed or the member left."),
		lockExpired: counter("weir_share_lock_expired_total", "Acquisition locks that timed out (records released or archived)."),
		ackErrors:   counter("weir_share_acknowledge_errors_total", "Acknowledgements refused with INVALID_RECORD_STATE."),
		stateWrites: counter("weir_share_state_writes_total", "Durable writes to __share_group_state."),
		joins:       counter("weir_share_joins_total", "Members that joined a share group."),
		assignments: counter("weir_share_assignments_total", "Share group assignments computed."),
		connClosed:  counter("weir_share_sessions_closed_by_disconnect_total", "Share sessions closed because the connection that opened them closed."),
		members:     prometheus.NewDesc("weir_share_group_members", "Members per share group.", []string{"group"}, nil),
		records: prometheus.NewDesc("weir_share_partition_records", "In-flight records of a share-partition by delivery state.",
			[]string{"group", "topic", "partition", "state"}, nil),
		lag: prometheus.NewDesc("weir_share_partition_lag", "Records of a share-partition not yet acknowledged or archived: high watermark minus start offset minus settled in-flight records.",
			[]string{"group", "topic", "partition"}, nil),
	}
	if reg != nil {
		for _, col := range m.collectors() {
			if err := reg.Register(col); err != nil {
				m.unregister()
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.acquired, m.redelivered, m.acks, m.released, m.lockExpired, m.ackErrors,
		m.stateWrites, m.joins, m.assignments, m.connClosed, (*gaugeCollector)(m)}
}

func (m *metrics) unregister() {
	if m == nil || m.reg == nil {
		return
	}
	for _, col := range m.collectors() {
		m.reg.Unregister(col)
	}
}

var ackTypeNames = [5]string{"gap", "accept", "release", "reject", "renew"}

func (m *metrics) acked(counts [5]int) {
	for t, n := range counts {
		if n > 0 {
			m.acks.WithLabelValues(ackTypeNames[t]).Add(float64(n))
		}
	}
}

type gaugeCollector metrics

func (g *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.members
	ch <- g.records
	ch <- g.lag
}

func (g *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	c := g.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, gr := range c.groups {
		ch <- prometheus.MustNewConstMetric(g.members, prometheus.GaugeValue, float64(len(gr.members)), id)
	}
	for _, p := range c.parts {
		var by [4]int
		for _, r := range p.recs {
			by[r.state]++
		}
		part := strconv.Itoa(int(p.key.part))
		for st, n := range by {
			ch <- prometheus.MustNewConstMetric(g.records, prometheus.GaugeValue, float64(n), p.key.group, p.topic, part, deliveryState(st).String())
		}
		if lag, ok := c.lagOf(p); ok {
			ch <- prometheus.MustNewConstMetric(g.lag, prometheus.GaugeValue, float64(lag), p.key.group, p.topic, part)
		}
	}
}

// lagOf is the records of p not yet settled. Lock must be held.
func (c *Coordinator) lagOf(p *sharePartition) (int64, bool) {
	l, ok := c.opts.Topics.Log(p.topic, p.key.part)
	if !ok {
		return 0, false
	}
	start := max(p.start, l.LogStartOffset())
	lag := l.HighWatermark() - start
	for i, r := range p.recs {
		if p.start+int64(i) >= start && (r.state == stAcknowledged || r.state == stArchived) {
			lag--
		}
	}
	return max(lag, 0), true
}
