package quota

import (
	"sync"
	"time"
)

// DefaultBurst is how much of its quota, in time, a client may use at once
// after being idle: one second (Kafka's quota.window.size.seconds).
const DefaultBurst = time.Second

// MaxThrottle caps one throttle time (Kafka caps at its measuring window,
// quota.window.num × quota.window.size.seconds = 11 s). A longer debt is
// not forgiven: the next request pays the rest.
const MaxThrottle = 11 * time.Second

// bucket is a token bucket in the quota's unit (bytes, or percent-seconds
// of request time), refilled at the bound per second up to bound × burst.
// Tokens go negative (debt) when a request takes more than there is; the
// debt divided by the bound is the throttle time.
type bucket struct {
	tokens float64
	last   time.Time
}

// Sensors keeps one bucket per (quota key, user, client id) and computes
// throttle times. Safe for concurrent use.
type Sensors struct {
	burst time.Duration

	mu      sync.Mutex
	buckets map[sensorKey]*bucket
}

type sensorKey struct{ key, user, clientID string }

// NewSensors returns sensors allowing bursts of burst (0: DefaultBurst).
func NewSensors(burst time.Duration) *Sensors {
	if burst <= 0 {
		burst = DefaultBurst
	}
	return &Sensors{burst: burst, buckets: map[sensorKey]*bucket{}}
}

// sensorIdle is how long an unused sensor is kept (Kafka: one hour). A
// bucket idle that long is full, so forgetting it changes nothing.
const sensorIdle = time.Hour

// Record charges v to the sensor of (key, a.User, a.ClientID) at now and
// returns the throttle time the request earns: zero while the sensor has
// tokens left, else the time the bound takes to pay the debt back, at most
// MaxThrottle. A client that waits every throttle time out sends, over
// any span T, at most a.Bound × T plus one burst plus one request.
func (s *Sensors) Record(now time.Time, key string, a Applied, v float64) time.Duration {
	if a.Bound <= 0 {
		return 0
	}
	k := sensorKey{key, a.User, a.ClientID}
	capacity := a.Bound * s.burst.Seconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[k]
	if !ok {
		if len(s.buckets) >= 1024 {
			for kk, o := range s.buckets {
				if now.Sub(o.last) > sensorIdle {
					delete(s.buckets, kk)
				}
			}
		}
		b = &bucket{tokens: capacity, last: now}
		s.buckets[k] = b
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(capacity, b.tokens+el.Seconds()*a.Bound)
		b.last = now
	}
	b.tokens -= v
	if b.tokens >= 0 {
		return 0
	}
	return min(time.Duration(-b.tokens/a.Bound*float64(time.Second)), MaxThrottle)
}
