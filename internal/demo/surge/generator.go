package surge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Zones of the generated city, with their base share of the demand.
var zones = []struct {
	name   string
	weight float64
}{
	{"downtown", 5}, {"airport", 3}, {"stadium", 1}, {"harbor", 2},
	{"old-town", 2}, {"university", 2}, {"suburbs", 1.5}, {"tech-park", 2.5},
}

// Zones returns the generator's zone names.
func Zones() []string {
	out := make([]string, len(zones))
	for i, z := range zones {
		out[i] = z.name
	}
	return out
}

// demandPeriod is how long one zone's demand takes to swing from calm to
// busy and back, so a short demo shows surges come and go.
const demandPeriod = 90 * time.Second

// Event is one generated record: topic, key, JSON value and event time.
type Event struct {
	Topic string
	Key   string
	Value []byte
	At    time.Time
}

// Record returns the event as a franz-go record (timestamp = event time).
func (e Event) Record() *kgo.Record {
	return &kgo.Record{Topic: e.Topic, Key: []byte(e.Key), Value: e.Value, Timestamp: e.At}
}

// Generator makes a realistic stream of ride requests and driver statuses:
// demand per zone swings over time (each zone on its own phase) while the
// driver fleet drifts around the city more evenly, so busy zones surge. It is
// deterministic: the same seed and the same event times give the same events.
// Not safe for concurrent use.
type Generator struct {
	rng     *rand.Rand
	drivers []genDriver
	start   time.Time
	started bool
}

type genDriver struct {
	zone      int
	available bool
}

// DriversFor is a fleet size for a total event rate (events/s, of which
// about three quarters are requests) such that, at the default
// BalancedRatio, the city as a whole is about balanced: the zones at the
// peak of their demand cycle surge, calm ones do not.
func DriversFor(rate float64) int {
	return max(12, int(rate*0.75*60/Config{}.withDefaults().BalancedRatio*1.2))
}

// NewGenerator returns a generator with a fleet of drivers.
func NewGenerator(seed uint64, drivers int) *Generator {
	return &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), drivers: make([]genDriver, max(drivers, 1))}
}

// Start returns the first status of every driver (available, spread over
// the zones), all at event time at, which also anchors the demand cycle.
func (g *Generator) Start(at time.Time) []Event {
	g.start, g.started = at, true
	out := make([]Event, len(g.drivers))
	for i := range g.drivers {
		g.drivers[i] = genDriver{zone: g.rng.IntN(len(zones)), available: true}
		out[i] = g.driverEvent(i, at)
	}
	return out
}

// LateEvery and LateBy: one ride request in LateEvery is sent LateBy after
// it happened (a phone that was offline), far past the demand windows'
// grace, so the demo shows late records routed to LateRequestsTopic.
const (
	LateEvery = 50
	LateBy    = 2 * time.Minute
)

// Next returns the next event at event time at: three in four are ride
// requests (one in LateEvery of them from LateBy earlier: late), the rest a
// driver taking a ride, dropping a rider off (and becoming available
// wherever that was) or moving to another zone.
func (g *Generator) Next(at time.Time) Event {
	if !g.started {
		g.start, g.started = at, true
	}
	if g.rng.Float64() < 0.75 {
		zone := g.pickZone(at)
		rider := fmt.Sprintf("rider-%04d", g.rng.IntN(5000))
		when := at
		if g.rng.IntN(LateEvery) == 0 {
			when = at.Add(-LateBy)
		}
		return event(RequestsTopic, rider, RideRequest{Rider: rider, Zone: zones[zone].name, At: when}, when)
	}
	i := g.rng.IntN(len(g.drivers))
	d := &g.drivers[i]
	switch {
	case !d.available: // drop-off somewhere, available again
		d.zone, d.available = g.rng.IntN(len(zones)), true
	case g.rng.Float64() < 0.6: // takes a ride where it is
		d.available = false
	default: // repositions
		d.zone = g.rng.IntN(len(zones))
	}
	return g.driverEvent(i, at)
}

func (g *Generator) driverEvent(i int, at time.Time) Event {
	id := fmt.Sprintf("driver-%04d", i)
	d := g.drivers[i]
	return event(DriversTopic, id, DriverStatus{Driver: id, Zone: zones[d.zone].name, Available: d.available, At: at}, at)
}

// pickZone draws a zone by its demand weight at event time at.
func (g *Generator) pickZone(at time.Time) int {
	phase := 2 * math.Pi * float64(at.Sub(g.start)) / float64(demandPeriod)
	w := make([]float64, len(zones))
	var sum float64
	for i, z := range zones {
		w[i] = z.weight * (1 + 0.9*math.Sin(phase+float64(i)*2*math.Pi/float64(len(zones))))
		sum += w[i]
	}
	x := g.rng.Float64() * sum
	for i := range w {
		if x < w[i] {
			return i
		}
		x -= w[i]
	}
	return len(w) - 1
}

func event(topic, key string, v any, at time.Time) Event {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings, bools and times always marshal
	}
	return Event{Topic: topic, Key: key, Value: b, At: at}
}

// Counts are the events a Run produced so far (acknowledged by the broker).
type Counts struct {
	Requests, Statuses atomic.Int64
}

// Run produces g's events with cl at rate events per second, stamped with
// now(), until ctx is done or d elapses (d <= 0: until ctx is done), then
// waits for every produced record to be acknowledged. It returns nil after a
// clean stop, or the first produce error. counts, if not nil, is updated as
// acknowledgements arrive.
func Run(ctx context.Context, cl *kgo.Client, g *Generator, rate float64, d time.Duration,
	now func() time.Time, counts *Counts,
) error {
	if rate <= 0 {
		return fmt.Errorf("surge generator: rate %v <= 0", rate)
	}
	if counts == nil {
		counts = &Counts{}
	}
	var firstErr atomic.Pointer[error]
	produce := func(e Event) {
		cl.Produce(context.Background(), e.Record(), func(r *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			if r.Topic == RequestsTopic {
				counts.Requests.Add(1)
			} else {
				counts.Statuses.Add(1)
			}
		})
	}
	begin := now()
	for _, e := range g.Start(begin) {
		produce(e)
	}
	var deadline <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var sent int64
loop:
	for firstErr.Load() == nil {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case <-tick.C:
		}
		at := now()
		due := int64(at.Sub(begin).Seconds() * rate)
		// After a stall (a slow broker, a suspended laptop) catch up by at
		// most one second's worth, not in one burst.
		if due-sent > int64(rate)+1 {
			sent = due - int64(rate) - 1
		}
		for ; sent < due; sent++ {
			produce(g.Next(at))
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ferr := cl.Flush(fctx)
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("surge generator: produce: %w", *p)
	}
	if ferr != nil && !errors.Is(ferr, context.Canceled) {
		return fmt.Errorf("surge generator: flush: %w", ferr)
	}
	return nil
}
