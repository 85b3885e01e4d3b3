// Package surge is the stream application `weir dev` runs, and weir's worked
// example of package stream: surge pricing for a ride-hailing service. It
// lives here, not under examples/, because the product (cmd/weir) runs it and
// nothing in the product imports examples/; examples/surge/cmd runs it
// against any Kafka-protocol cluster.
//
// Two input topics, both JSON with the event time in the payload:
//
//	ride-requests  key: rider id    value: {"rider","zone","at"}            a rider asks for a ride
//	driver-status  key: driver id   value: {"driver","zone","available","at"} a driver's position and availability
//
// Two output topics. An upsert stream keyed by zone (the latest record of a
// zone is its current state, so a consumer or a compacted topic stays
// correct whatever duplicates at-least-once delivery replays):
//
//	zone-surge     key: zone        value: ZoneStats {"requests","demand","drivers","surge",...}
//
// and the demand per zone in event time: the requests of each zone over
// hopping windows of DemandWindowSize advancing every DemandWindowAdvance,
// one final count per zone and window once the watermark (EventTime) has
// passed the window's end plus DemandGrace:
//
//	zone-demand    key: zone and window (Kafka Streams' time-windowed key)  value: int64 count
//
// A request that comes later than that is not dropped: it goes, unchanged
// (keyed by its zone), to ride-requests-late, with headers naming its
// window and how late it was.
//
// The topology (see Build):
//
//	driver-status ─► Aggregate by driver ("driver-state": last zone and availability)
//	                   └► FlatMap: ±1 available driver per zone it left / entered ─► KeyBy zone ─┐
//	ride-requests ─► KeyBy zone ─► Map: one request ──────────────────────────────────────────────┴► Merge
//	   ─► (repartition by zone) ─► Aggregate by zone ("zone-stats") ─► zone-surge
//
// Per zone it keeps the total number of requests, the demand (requests per
// minute over the last DemandWindow of event time, exponentially weighted,
// so it never depends on the processing clock) and the number of available
// drivers; the surge multiplier is the demand per available driver relative
// to BalancedRatio, clamped to [1, MaxSurge] and rounded to 0.1.
//
// Delivery is the App's: at-least-once by default. After a crash, replayed
// records may be applied twice. The per-driver stage absorbs its own replays
// (a status equal to the stored one emits no change), but a replayed
// repartition record counts a request twice or applies a driver change twice,
// so requests may exceed the truth and driver counts may drift by the number
// of replayed changes; stream.ExactlyOnce (on a broker serving transactions)
// makes both exact.
//
// The same Build function runs in `weir dev` (embedded broker, with the
// Generator), in examples/surge/cmd against any Kafka-protocol cluster, and
// in the tests under package streamtest (no broker) and weirtest (a real
// broker).
package surge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weirhq/weir/stream"
)

// Topic names.
const (
	RequestsTopic     = "ride-requests"
	DriversTopic      = "driver-status"
	SurgeTopic        = "zone-surge"
	DemandTopic       = "zone-demand"
	LateRequestsTopic = "ride-requests-late"
)

// The event-time demand windows: requests per zone over the last minute,
// every 10 seconds, with 5 seconds of allowed lateness.
const (
	DemandWindowSize    = time.Minute
	DemandWindowAdvance = 10 * time.Second
	DemandGrace         = 5 * time.Second
)

// DemandWindows are the windows of DemandTopic.
func DemandWindows() stream.TimeWindows { return stream.Hopping(DemandWindowSize, DemandWindowAdvance) }

// EventTime is the App's watermark strategy: events may arrive up to 2
// seconds out of order; an input partition silent for 10 seconds stops
// holding the watermark back.
func EventTime() stream.Opt { return stream.Watermarks(2*time.Second, 10*time.Second) }

// AppID is the default application id (consumer group and internal topic
// prefix).
const AppID = "surge"

// RideRequest is a rider asking for a ride in a zone at event time At.
type RideRequest struct {
	Rider string    `json:"rider"`
	Zone  string    `json:"zone"`
	At    time.Time `json:"at"`
}

// DriverStatus is a driver's position and availability at event time At.
// A driver that is not available (on a trip, or offline) does not count in
// any zone's supply.
type DriverStatus struct {
	Driver    string    `json:"driver"`
	Zone      string    `json:"zone"`
	Available bool      `json:"available"`
	At        time.Time `json:"at"`
}

// ZoneStats is the state of one zone, written to SurgeTopic on every change.
type ZoneStats struct {
	Zone     string `json:"zone"`
	Requests int64  `json:"requests"` // every request seen, ever (a count)
	// Demand is requests per minute over the last DemandWindow of event
	// time, exponentially weighted, as of DemandAt.
	Demand   float64   `json:"demand"`
	DemandAt time.Time `json:"demand_at"`
	Drivers  int64     `json:"drivers"` // available drivers in the zone now
	Surge    float64   `json:"surge"`   // price multiplier, 1.0 = normal price
}

// Config tunes the pricing rule. The zero value means the defaults.
type Config struct {
	// DemandWindow is the time constant of the demand estimate: shorter
	// reacts faster and is noisier. Default 20s.
	DemandWindow time.Duration
	// BalancedRatio is the demand (requests per minute) per available
	// driver priced at 1.0. Default 2.
	BalancedRatio float64
	// MaxSurge caps the multiplier. Default 3.
	MaxSurge float64
	// StateTTL bounds both stores: a driver or zone without events for this
	// long (event time) is forgotten. Default 24h. A forgotten driver
	// leaves its zone's supply; a forgotten zone's record in SurgeTopic is
	// deleted (a tombstone).
	StateTTL time.Duration
}

func (c Config) withDefaults() Config {
	if c.DemandWindow <= 0 {
		c.DemandWindow = 20 * time.Second
	}
	if c.BalancedRatio <= 0 {
		c.BalancedRatio = 2
	}
	if c.MaxSurge < 1 {
		c.MaxSurge = 3
	}
	if c.StateTTL <= 0 {
		c.StateTTL = 24 * time.Hour
	}
	return c
}

// zoneEvent is what the zone aggregate folds: one request or a change of
// available drivers. It crosses the repartition topic as JSON.
type zoneEvent struct {
	Request     bool  `json:"request,omitempty"`
	DriverDelta int64 `json:"driver_delta,omitempty"`
}

// driverState is the "driver-state" store's value: the driver's last status.
type driverState struct {
	Zone      string    `json:"zone"`
	Available bool      `json:"available"`
	At        time.Time `json:"at"`
}

// ErrNoZone is returned by the topology for an event without a zone; such a
// record goes to the input's dead-letter topic (after the App's attempts).
var ErrNoZone = errors.New("surge: event without a zone")

// Build adds the surge topology to b.
func Build(b *stream.Builder, cfg Config) {
	cfg = cfg.withDefaults()

	// Supply: per driver (the topic is keyed by driver id, so no
	// repartition), the last status wins; out-of-order older statuses are
	// ignored, by event time.
	drivers := stream.From(b, DriversTopic, stream.String(), stream.JSON[DriverStatus](),
		stream.Timestamps(func(r stream.Record[string, DriverStatus]) time.Time { return r.Value.At }))
	// The table's changes carry each driver's state as the zones last saw
	// it and its state now: the deltas stay exact however the table
	// collapses its updates between commits.
	states := stream.Aggregate(stream.GroupByKey(drivers),
		stream.StoreConfig{Name: "driver-state", TTL: cfg.StateTTL},
		func() driverState { return driverState{} },
		func(r stream.Record[string, DriverStatus], s driverState) (driverState, error) {
			if r.Value.Zone == "" {
				return s, ErrNoZone
			}
			return nextDriverState(s, r.Value), nil
		})
	deltas := stream.FlatMapValues(stream.Changes(states),
		func(r stream.Record[string, stream.Change[driverState]]) ([]zoneDelta, error) {
			return deltas(r.Value), nil
		})
	supply := stream.Map(
		stream.KeyBy(deltas, func(r stream.Record[string, zoneDelta]) (string, error) { return r.Value.Zone, nil }),
		func(r stream.Record[string, zoneDelta]) (zoneEvent, error) {
			return zoneEvent{DriverDelta: r.Value.Delta}, nil
		})

	// Demand: every request, keyed by its zone.
	requests := stream.From(b, RequestsTopic, stream.String(), stream.JSON[RideRequest](),
		stream.Timestamps(func(r stream.Record[string, RideRequest]) time.Time { return r.Value.At }))
	zoned := stream.KeyBy(requests, func(r stream.Record[string, RideRequest]) (string, error) {
		if r.Value.Zone == "" {
			return "", ErrNoZone
		}
		return r.Value.Zone, nil
	})
	demand := stream.Map(zoned,
		func(stream.Record[string, RideRequest]) (zoneEvent, error) { return zoneEvent{Request: true}, nil })

	// Demand in event time: requests per zone and hopping window, one
	// final count per window; late requests, as they came, to their own
	// topic.
	w := DemandWindows()
	stream.WindowedCount(stream.GroupByKey(zoned), w,
		stream.WindowedStore{Name: "zone-demand", Grace: DemandGrace, Late: stream.LateToTopic(LateRequestsTopic),
			Emit: stream.EmitFinal()}).
		ToStream().To(DemandTopic, stream.WindowedKeys(stream.String(), w), stream.Int64())

	// Per zone: fold both (after a repartition by zone: the two inputs are
	// keyed by rider and driver).
	stream.Aggregate(stream.GroupByKey(demand.Merge(supply)),
		stream.StoreConfig{Name: "zone-stats", TTL: cfg.StateTTL},
		func() ZoneStats { return ZoneStats{} },
		func(r stream.Record[string, zoneEvent], z ZoneStats) (ZoneStats, error) {
			return cfg.apply(z, r.Key, r.Value, r.Timestamp), nil
		}).
		ToStream().To(SurgeTopic, stream.String(), stream.JSON[ZoneStats]())
}

// nextDriverState applies status st to the stored state s.
func nextDriverState(s driverState, st DriverStatus) driverState {
	if !s.At.IsZero() && st.At.Before(s.At) {
		return s // older than what we know: ignore
	}
	return driverState{Zone: st.Zone, Available: st.Available, At: st.At}
}

type zoneDelta struct {
	Zone  string
	Delta int64
}

// deltas are the changes of available drivers per zone from a driver's
// state as the zones last counted it (c.Old) to its state now (c.New); a
// driver forgotten by the store's TTL (no New) leaves its zone's supply.
func deltas(c stream.Change[driverState]) []zoneDelta {
	was := c.HasOld && c.Old.Available
	is := c.HasNew && c.New.Available
	if was && is && c.Old.Zone == c.New.Zone {
		return nil
	}
	var out []zoneDelta
	if was {
		out = append(out, zoneDelta{Zone: c.Old.Zone, Delta: -1})
	}
	if is {
		out = append(out, zoneDelta{Zone: c.New.Zone, Delta: +1})
	}
	return out
}

// apply folds one event at event time ts into zone z's stats.
//
// Demand is an exponentially weighted rate: a request at time t contributes
// exp(-(now-t)/DemandWindow) / DemandWindow at time now (in requests per
// minute), so a steady rate r converges to r. Stored as a value at DemandAt, the
// latest event time seen, an event older than DemandAt is added already
// decayed, so the result does not depend on the order events arrive in
// (up to float rounding).
func (c Config) apply(z ZoneStats, zone string, e zoneEvent, ts time.Time) ZoneStats {
	z.Zone = zone
	switch {
	case z.DemandAt.IsZero():
		z.DemandAt = ts
	case ts.After(z.DemandAt):
		z.Demand *= math.Exp(-float64(ts.Sub(z.DemandAt)) / float64(c.DemandWindow))
		z.DemandAt = ts
	}
	if e.Request {
		z.Requests++
		z.Demand += math.Exp(-float64(z.DemandAt.Sub(ts))/float64(c.DemandWindow)) * float64(time.Minute) /
			float64(c.DemandWindow)
	}
	z.Drivers += e.DriverDelta
	z.Surge = c.Surge(z.Demand, z.Drivers)
	return z
}

// Surge is the price multiplier for a demand (requests per minute)
// and a number of available drivers: demand per driver relative to
// BalancedRatio, at least 1, at most MaxSurge, rounded to 0.1. No driver
// counts as one (a zone with demand and no supply surges to the cap soon).
func (c Config) Surge(demand float64, drivers int64) float64 {
	c = c.withDefaults()
	ratio := demand / float64(max(drivers, 1)) / c.BalancedRatio
	return math.Round(min(max(ratio, 1), c.MaxSurge)*10) / 10
}

// CreateTopics creates the input and output topics with the given number of
// partitions (existing topics are left as they are). The App creates its
// internal topics itself.
func CreateTopics(ctx context.Context, adm *kadm.Client, partitions int32) error {
	resps, err := adm.CreateTopics(ctx, partitions, -1, nil, RequestsTopic, DriversTopic, SurgeTopic, DemandTopic,
		LateRequestsTopic)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}
