package group

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics (all labelled by group):
//
//	weir_group_members                         gauge   members per group
//	weir_group_generation                      gauge   current generation (classic)
//	                                           or group epoch (KIP-848)
//	weir_group_rebalances_total                counter completed rebalances
//	weir_group_rebalance_duration_seconds      histogram from the start of a
//	                                           rebalance to Stable
//	weir_group_lag_records{topic,partition,from}  log end - committed offset
//	weir_group_lag_seconds{topic,partition,from}  age of the oldest unconsumed record
//
// Lag is computed at scrape time (Collect) from a snapshot of the
// committed offsets, so it keeps growing for a stopped consumer. It covers
// the partitions with a committed offset (from="committed") and every
// partition of the topics the group subscribes to that has none
// (from="log_start": counted from the log start, what a consumer starting
// at the earliest offset would read).

type metrics struct {
	c          *Coordinator
	reg        prometheus.Registerer
	rebalances *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	members    *prometheus.Desc
	generation *prometheus.Desc
	lagRecords *prometheus.Desc
	lagSeconds *prometheus.Desc
	inProgress map[string]bool // loop only
}

func newMetrics(c *Coordinator, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		c:   c,
		reg: reg,
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_group_rebalances_total", Help: "Completed consumer group rebalances.",
		}, []string{"group"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_group_rebalance_duration_seconds",
			Help:    "Time from the start of a rebalance until the group is stable.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"group"}),
		members: prometheus.NewDesc("weir_group_members", "Members per consumer group.", []string{"group"}, nil),
		generation: prometheus.NewDesc("weir_group_generation",
			"Current generation of a classic group, or group epoch of a KIP-848 consumer group.", []string{"group"}, nil),
		lagRecords: prometheus.NewDesc("weir_group_lag_records",
			`Log end offset minus the committed offset (from="committed"), or minus the log start offset for a subscribed partition with no committed offset (from="log_start").`,
			[]string{"group", "topic", "partition", "from"}, nil),
		lagSeconds: prometheus.NewDesc("weir_group_lag_seconds",
			`Age of the oldest unconsumed record (0 when caught up); from as for weir_group_lag_records.`,
			[]string{"group", "topic", "partition", "from"}, nil),
		inProgress: map[string]bool{},
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.rebalances, m.duration, (*lagCollector)(m)} {
			if err := reg.Register(col); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	m.reg.Unregister(m.rebalances)
	m.reg.Unregister(m.duration)
	m.reg.Unregister((*lagCollector)(m))
}

// rebalanceStarted / rebalanceEnded: loop only.
func (m *metrics) rebalanceStarted(group string) { m.inProgress[group] = true }

func (m *metrics) rebalanceEnded(group string, took time.Duration) {
	if !m.inProgress[group] {
		return
	}
	delete(m.inProgress, group)
	m.rebalances.WithLabelValues(group).Inc()
	m.duration.WithLabelValues(group).Observe(took.Seconds())
}

func (m *metrics) forgetGroup(group string) {
	delete(m.inProgress, group)
	m.rebalances.DeleteLabelValues(group)
	m.duration.DeleteLabelValues(group)
}

type lagCollector metrics

func (l *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.members
	ch <- l.generation
	ch <- l.lagRecords
	ch <- l.lagSeconds
}

func (l *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	snap, err := l.c.snapshot(ctx)
	if err != nil {
		return
	}
	for _, g := range snap {
		ch <- prometheus.MustNewConstMetric(l.members, prometheus.GaugeValue, float64(g.Members), g.Group)
		ch <- prometheus.MustNewConstMetric(l.generation, prometheus.GaugeValue, float64(g.Generation), g.Group)
		for _, p := range l.c.lagOf(g) {
			part, from := strconv.Itoa(int(p.Partition)), "committed"
			if p.Uncommitted {
				from = "log_start"
			}
			ch <- prometheus.MustNewConstMetric(l.lagRecords, prometheus.GaugeValue, float64(p.Lag), g.Group, p.Topic, part, from)
			if p.LagTime >= 0 {
				ch <- prometheus.MustNewConstMetric(l.lagSeconds, prometheus.GaugeValue, p.LagTime.Seconds(), g.Group, p.Topic, part, from)
			}
		}
	}
}
