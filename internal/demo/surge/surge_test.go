package surge

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/streamtest"
)

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

func newDriver(t *testing.T, partitions int32) (*streamtest.Driver, *streamtest.Input[string, RideRequest],
	*streamtest.Input[string, DriverStatus], *streamtest.Output[string, ZoneStats],
) {
	b := stream.NewBuilder()
	Build(b, Config{})
	d := streamtest.New(t, AppID, b, streamtest.Partitions(RequestsTopic, partitions),
		streamtest.Partitions(DriversTopic, partitions), streamtest.Partitions(SurgeTopic, partitions),
		streamtest.AppOpts(stream.MaxAttempts(1)))
	return d,
		streamtest.NewInput(d, RequestsTopic, stream.String(), stream.JSON[RideRequest]()),
		streamtest.NewInput(d, DriversTopic, stream.String(), stream.JSON[DriverStatus]()),
		streamtest.NewOutput(d, SurgeTopic, stream.String(), stream.JSON[ZoneStats]())
}

func request(in *streamtest.Input[string, RideRequest], rider, zone string, at time.Time) {
	in.Pipe(rider, RideRequest{Rider: rider, Zone: zone, At: at}, at)
}

func status(in *streamtest.Input[string, DriverStatus], driver, zone string, available bool, at time.Time) {
	in.Pipe(driver, DriverStatus{Driver: driver, Zone: zone, Available: available, At: at}, at)
}

// TestExactResults checks the whole pipeline on a small fixed input against
// values worked out by hand: counts, supply per zone (drivers moving,
// taking rides, stale statuses ignored), the decayed demand and the surge.
func TestExactResults(t *testing.T) {
	d, reqs, drivers, out := newDriver(t, 3)
	status(drivers, "d1", "downtown", true, t0)
	status(drivers, "d2", "downtown", true, t0)
	status(drivers, "d3", "airport", true, t0)
	for i := range 4 {
		request(reqs, fmt.Sprint("r", i), "downtown", t0) // 4 requests at t0: 4 per 20s window = 12/min
	}
	request(reqs, "r100", "airport", t0)
	d.Process()

	got := streamtest.Latest(out)
	want := map[string]ZoneStats{
		// 12/min / 2 drivers / BalancedRatio 2 = 3.0 (the cap); airport 3/min / 1 / 2 = 1.5.
		"downtown": {Zone: "downtown", Requests: 4, Demand: 12, DemandAt: t0, Drivers: 2, Surge: 3},
		"airport":  {Zone: "airport", Requests: 1, Demand: 3, DemandAt: t0, Drivers: 1, Surge: 1.5},
	}
	checkStats(t, got, want)

	// One DemandWindow (20s) later: d1 takes a ride, d2 moves to the airport, and a
	// stale status of d3 (older than its last one) changes nothing.
	t1 := t0.Add(20 * time.Second)
	status(drivers, "d1", "downtown", false, t1)
	status(drivers, "d2", "airport", true, t1)
	status(drivers, "d3", "stadium", true, t0.Add(-time.Second))
	d.Process()
	got = streamtest.Latest(out)
	decayed := 12 * math.Exp(-1) // 4.41/min after one DemandWindow
	want["downtown"] = ZoneStats{Zone: "downtown", Requests: 4, Demand: decayed, DemandAt: t1, Drivers: 0,
		Surge: 2.2} // no driver counts as one: 4.41 / 1 / 2 = 2.2
	want["airport"] = ZoneStats{Zone: "airport", Requests: 1, Demand: 3 * math.Exp(-1), DemandAt: t1, Drivers: 2, Surge: 1}
	checkStats(t, got, want)
	if _, ok := got["stadium"]; ok {
		t.Errorf("stale driver status reached stadium: %+v", got["stadium"])
	}

	// A late request (event time before the zone's latest) adds its
	// already-decayed weight: demand does not depend on arrival order.
	request(reqs, "late", "downtown", t0)
	d.Process()
	got = streamtest.Latest(out)
	want["downtown"] = ZoneStats{Zone: "downtown", Requests: 5, Demand: 15 * math.Exp(-1), DemandAt: t1, Drivers: 0, Surge: 2.8}
	checkStats(t, got, want)
}

func checkStats(t *testing.T, got, want map[string]ZoneStats) {
	t.Helper()
	for zone, w := range want {
		g, ok := got[zone]
		if !ok {
			t.Errorf("%s: no output", zone)
			continue
		}
		if math.Abs(g.Demand-w.Demand) > 1e-9 {
			t.Errorf("%s: demand %v, want %v", zone, g.Demand, w.Demand)
		}
		g.Demand, w.Demand = 0, 0
		if !g.DemandAt.Equal(w.DemandAt) {
			t.Errorf("%s: demand at %v, want %v", zone, g.DemandAt, w.DemandAt)
		}
		g.DemandAt, w.DemandAt = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("%s: got %+v, want %+v", zone, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("zones %v, want %v", keys(got), keys(want))
	}
}

func keys(m map[string]ZoneStats) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestBadEventsGoToDLQ: an event without a zone and one that is not JSON
// each land in their input's dead-letter topic; the rest is processed.
func TestBadEventsGoToDLQ(t *testing.T) {
	d, reqs, drivers, out := newDriver(t, 2)
	request(reqs, "r1", "", t0)
	reqs.PipeRaw([]byte("r2"), []byte("{not json"), t0)
	status(drivers, "d1", "", true, t0)
	request(reqs, "r3", "harbor", t0)
	d.Process()
	if n := len(d.Records(RequestsTopic + ".dlq")); n != 2 {
		t.Errorf("%s.dlq has %d records, want 2", RequestsTopic, n)
	}
	if n := len(d.Records(DriversTopic + ".dlq")); n != 1 {
		t.Errorf("%s.dlq has %d records, want 1", DriversTopic, n)
	}
	got := streamtest.Latest(out)
	if len(got) != 1 || got["harbor"].Requests != 1 {
		t.Errorf("outputs %+v, want only harbor with 1 request", got)
	}
}

// model is the surge result computed directly from the generator's events,
// without the stream library: requests per zone, and available drivers per
// zone from each driver's latest status.
func model(events []Event) (requests, drivers map[string]int64) {
	requests, drivers = map[string]int64{}, map[string]int64{}
	last := map[string]DriverStatus{}
	for _, e := range events {
		switch e.Topic {
		case RequestsTopic:
			var r RideRequest
			mustUnmarshal(e.Value, &r)
			requests[r.Zone]++
		case DriversTopic:
			var s DriverStatus
			mustUnmarshal(e.Value, &s)
			last[s.Driver] = s
		}
	}
	for _, s := range last {
		if s.Available {
			drivers[s.Zone]++
		}
	}
	return requests, drivers
}

func generate(seed uint64, fleet, n int) []Event {
	g := NewGenerator(seed, fleet)
	events := g.Start(t0)
	for i := range n {
		events = append(events, g.Next(t0.Add(time.Duration(i)*50*time.Millisecond)))
	}
	return events
}

// TestGeneratedStreamMatchesModel runs a generated stream (with several
// partitions and two repartition hops) and compares every zone with the
// model.
func TestGeneratedStreamMatchesModel(t *testing.T) {
	d, _, _, out := newDriver(t, 4)
	events := generate(7, 40, 3000)
	for _, e := range events {
		if _, err := d.Pipe(e.Topic, []byte(e.Key), e.Value, e.At); err != nil {
			t.Fatal(err)
		}
	}
	d.Process()
	wantReq, wantDrv := model(events)
	got := streamtest.Latest(out)
	for _, zone := range Zones() {
		if got[zone].Requests != wantReq[zone] || got[zone].Drivers != wantDrv[zone] {
			t.Errorf("%s: requests %d drivers %d, want %d and %d", zone, got[zone].Requests, got[zone].Drivers,
				wantReq[zone], wantDrv[zone])
		}
		if s := got[zone].Surge; s < 1 || s > 3 {
			t.Errorf("%s: surge %v outside [1, 3]", zone, s)
		}
	}
	var total int64
	for _, n := range wantReq {
		total += n
	}
	if total < 2000 || len(wantReq) != len(Zones()) {
		t.Fatalf("generator made %d requests over %d zones: not a useful test", total, len(wantReq))
	}
}

func TestGeneratorDeterministic(t *testing.T) {
	a, b := generate(42, 30, 500), generate(42, 30, 500)
	if !slices.EqualFunc(a, b, func(x, y Event) bool {
		return x.Topic == y.Topic && x.Key == y.Key && string(x.Value) == string(y.Value) && x.At.Equal(y.At)
	}) {
		t.Fatal("same seed, different events")
	}
	c := generate(43, 30, 500)
	if slices.EqualFunc(a, c, func(x, y Event) bool { return string(x.Value) == string(y.Value) }) {
		t.Fatal("different seeds, same events")
	}
}

func TestSurgeRule(t *testing.T) {
	c := Config{}
	for _, tc := range []struct {
		demand  float64
		drivers int64
		want    float64
	}{
		{0, 0, 1}, {2, 1, 1}, {3, 1, 1.5}, {6, 1, 3}, {100, 1, 3}, {4.41, 0, 2.2}, {10, 5, 1}, {13, 5, 1.3},
	} {
		if got := c.Surge(tc.demand, tc.drivers); got != tc.want {
			t.Errorf("Surge(%v, %d) = %v, want %v", tc.demand, tc.drivers, got, tc.want)
		}
	}
	if got := (Config{MaxSurge: 2}).Surge(100, 1); got != 2 {
		t.Errorf("MaxSurge 2: got %v", got)
	}
}

func mustUnmarshal(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(err)
	}
}

// TestREADMESnippet is the README's streamtest example, kept compiling and true.
func TestREADMESnippet(t *testing.T) {
	b := stream.NewBuilder()
	Build(b, Config{})
	d := streamtest.New(t, "surge", b, streamtest.Partitions(RequestsTopic, 3))
	reqs := streamtest.NewInput(d, RequestsTopic, stream.String(), stream.JSON[RideRequest]())
	reqs.Pipe("rider-1", RideRequest{Rider: "rider-1", Zone: "airport", At: t0}, t0)
	d.Process()
	zones := streamtest.Latest(streamtest.NewOutput(d, SurgeTopic, stream.String(), stream.JSON[ZoneStats]()))
	if zones["airport"].Requests != 1 {
		t.Fatalf("airport: %+v", zones["airport"])
	}
}

// TestPrinterLiveRedraw: in live mode the second drawing first moves the
// cursor back over exactly the lines of the first one and clears them; in
// plain mode drawings are appended, separated by a blank line.
func TestPrinterLiveRedraw(t *testing.T) {
	b := NewBoard()
	for _, z := range []string{"airport", "downtown"} {
		if err := b.Apply(&kgo.Record{Key: []byte(z), Value: []byte(`{"zone":"` + z + `","requests":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	p := &printer{out: &out, live: true}
	p.draw("first", b)
	first := out.String()
	if n := strings.Count(first, "\n"); n != 4 || strings.Contains(first, "\x1b") {
		t.Fatalf("first live drawing: %d lines %q; want status + header + 2 zones, no escapes", n, first)
	}
	out.Reset()
	p.draw("second", b)
	if !strings.HasPrefix(out.String(), "\x1b[4F\x1b[J") {
		t.Fatalf("second live drawing starts %q, want cursor up 4 lines and clear", out.String()[:min(12, out.Len())])
	}
	out.Reset()
	p = &printer{out: &out}
	p.draw("a", b)
	p.draw("b", b)
	if strings.Contains(out.String(), "\x1b") || strings.Count(out.String(), "\n\n") != 1 {
		t.Fatalf("plain drawings: %q", out.String())
	}
}
