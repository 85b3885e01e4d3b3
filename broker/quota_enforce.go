package broker

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/quota"
)

// Client quota enforcement (broker/quota holds the configs and sensors).
//
// After a request is handled, conn.chargeQuota charges it to the quotas
// that apply to its principal's user name and client id:
//
//   - producer_byte_rate: the record bytes of a Produce request;
//   - consumer_byte_rate: the record bytes of a Fetch response (consumer
//     fetches; a replica's fetch is not charged);
//   - request_percentage: the handler's wall time, as percent-seconds (one
//     second of handling per second is 100%). Go gives no per-goroutine CPU
//     time, so this is wall time: a Produce waiting for its fsync counts
//     its wait. APIs that wait by design are not charged: Fetch (its long
//     poll), JoinGroup and SyncGroup (rebalances); nor are ApiVersions,
//     SaslHandshake and SaslAuthenticate, which Kafka exempts.
//
// The request's throttle time is the largest any of them earns. As Kafka
// since KIP-219, a response whose version lets the client apply the
// throttle is sent at once with ThrottleMillis set, and the connection is
// muted for that time: the next request read from it is not handled
// before the time is over (waitUnmuted). A response of an older version
// is held back for the throttle time instead (the client did not know to
// wait), and the connection is not muted.
//
// Kafka reads one request per connection at a time; weir pipelines up to
// MaxInFlightPerConn, so requests a client pipelined before the mute began
// are still handled. Their bytes go into the same sensor, so the debt they
// add lengthens the next mute: over time the client is held to its quota,
// with bursts up to one in-flight window.

// openQuotas loads the quota configs.
func (b *Broker) openQuotas() error {
	s, err := quota.Open(b.cfg.FS, b.cfg.DataDir)
	if err != nil {
		return err
	}
	b.quotas = s
	b.sensors = quota.NewSensors(0)
	return nil
}

// openSecurity opens the authorizer (if configured) and the quotas.
func (b *Broker) openSecurity() error {
	if err := b.openAuthorizer(); err != nil {
		return err
	}
	return b.openQuotas()
}

// quotaExempt lists the APIs never charged request time.
var quotaExempt = map[kmsg.Key]bool{
	kmsg.ApiVersions: true, kmsg.SASLHandshake: true, kmsg.SASLAuthenticate: true,
	kmsg.Fetch: true, kmsg.JoinGroup: true, kmsg.SyncGroup: true,
}

// quotaUser is the user name quotas know a principal by ("User:alice" ->
// "alice").
func quotaUser(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}

// chargeQuota charges a handled request to its quotas and applies the
// throttle (see above). It runs on the request's goroutine after the
// handler; resp may be nil (acks=0 produce).
func (c *conn) chargeQuota(ctx context.Context, s *slot, req kmsg.Request, resp kmsg.Response, start time.Time) {
	if c.b.quotas == nil {
		return
	}
	user, clientID := quotaUser(s.principal), s.clientID
	now := c.b.cfg.Now()
	var throttle time.Duration
	charge := func(key string, v float64) {
		if v <= 0 {
			return
		}
		a, ok := c.b.quotas.Resolve(key, user, clientID)
		if !ok {
			return
		}
		if d := c.b.sensors.Record(now, key, a, v); d > 0 {
			c.b.metrics.quota.throttled(key, a, d)
			throttle = max(throttle, d)
		}
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		var n int
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				n += len(p.Records)
			}
		}
		charge(quota.ProducerByteRate, float64(n))
	case *kmsg.FetchRequest:
		if fr, ok := resp.(*kmsg.FetchResponse); ok && !fetchReplica(r) {
			var n int
			for _, t := range fr.Topics {
				for _, p := range t.Partitions {
					n += len(p.RecordBatches)
				}
			}
			charge(quota.ConsumerByteRate, float64(n))
		}
	}
	if !quotaExempt[s.api.key] {
		charge(quota.RequestPercentage, time.Since(start).Seconds()*100)
	}
	if throttle <= 0 {
		return
	}
	ms := int32(min(throttle, quota.MaxThrottle) / time.Millisecond)
	after := true
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		var cur int32
		cur, after = tr.Throttle()
		if st, ok := resp.(kmsg.SetThrottleResponse); ok && ms > cur {
			st.SetThrottle(ms)
		}
	}
	if !after {
		t := time.NewTimer(throttle)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return
	}
	until := time.Now().Add(throttle).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitUnmuted returns once the connection's mute (the throttle time of an
// earlier response) is over, or the connection ends. Read loop only.
func (c *conn) waitUnmuted() {
	d := time.Until(time.Unix(0, c.mutedUntil.Load()))
	if d <= 0 {
		return
	}
	c.b.metrics.quota.mutes.Inc()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
}

// quotaMetrics: throttling by quota key and entity. The labels name the
// user and client id the quota is measured for ("" where the matching
// quota entity does not name one), so only clients with quotas appear.
type quotaMetrics struct {
	throttledTotal  *prometheus.CounterVec
	throttleSeconds *prometheus.CounterVec
	mutes           prometheus.Counter
}

func newQuotaMetrics() quotaMetrics {
	return quotaMetrics{
		throttledTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_quota_throttled_requests_total", Help: "Requests that earned a throttle time, by quota key, user and client id.",
		}, []string{"quota", "user", "client_id"}),
		throttleSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_quota_throttle_seconds_total", Help: "Throttle time given, by quota key, user and client id.",
		}, []string{"quota", "user", "client_id"}),
		mutes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_broker_quota_muted_reads_total", Help: "Requests whose reading waited for the connection's throttle time to end.",
		}),
	}
}

func (m quotaMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.throttledTotal, m.throttleSeconds, m.mutes}
}

func (m quotaMetrics) throttled(key string, a quota.Applied, d time.Duration) {
	m.throttledTotal.WithLabelValues(key, a.User, a.ClientID).Inc()
	m.throttleSeconds.WithLabelValues(key, a.User, a.ClientID).Add(d.Seconds())
}
