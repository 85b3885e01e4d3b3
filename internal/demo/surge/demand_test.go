package surge

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/streamtest"
)

// TestDemandWindows runs a generated stream and checks the event-time
// demand: every closed window's final count per zone equals the count of
// the (on-time) requests in it, each window once; and the generator's late
// requests went, unchanged, to LateRequestsTopic with the late headers.
func TestDemandWindows(t *testing.T) {
	b := stream.NewBuilder()
	Build(b, Config{})
	// One requests partition: the Driver interleaves several partitions by
	// record count, not by time, which skews the repartitioned requests
	// past the out-of-orderness bound (until upstream tasks send watermark
	// markers); the repartition still spreads the zones over 3 tasks.
	d := streamtest.New(t, AppID, b, streamtest.Partitions(RequestsTopic, 1), streamtest.Partitions(DriversTopic, 3),
		streamtest.AppOpts(EventTime()))
	w := DemandWindows()
	out := streamtest.NewOutput(d, DemandTopic, stream.WindowedKeys(stream.String(), w), stream.Int64())
	late := streamtest.NewOutput(d, LateRequestsTopic, stream.String(), stream.JSON[RideRequest]())
	events := generate(11, 40, 4000) // 200 s of event time
	reqs := streamtest.NewInput(d, RequestsTopic, stream.String(), stream.JSON[RideRequest]())
	drivers := streamtest.NewInput(d, DriversTopic, stream.String(), stream.JSON[DriverStatus]())
	want := map[string]int64{}
	wantLate := 0
	var last time.Time
	for i, e := range events {
		switch e.Topic {
		case RequestsTopic:
			var r RideRequest
			mustUnmarshal(e.Value, &r)
			reqs.Pipe(e.Key, r, e.At)
			gen := t0.Add(time.Duration(i-40) * 50 * time.Millisecond) // generate's event times (40 starts first)
			if gen.Sub(r.At) >= LateBy {
				wantLate++
				continue
			}
			// The windows holding r.At: starts every 10 s, 60 s long.
			for s := r.At.Truncate(DemandWindowAdvance); s.After(r.At.Add(-DemandWindowSize)); s = s.Add(-DemandWindowAdvance) {
				want[fmt.Sprintf("%s|%d", r.Zone, s.UnixMilli())]++
			}
			last = r.At
		case DriversTopic:
			var s DriverStatus
			mustUnmarshal(e.Value, &s)
			drivers.Pipe(e.Key, s, e.At)
		}
	}
	d.Process()
	if wantLate < 20 {
		t.Fatalf("the generator made %d late requests: not a useful test", wantLate)
	}
	got := map[string]int64{}
	for _, r := range out.Records() {
		k := fmt.Sprintf("%s|%d", r.Key.Key, r.Key.Start.UnixMilli())
		if _, dup := got[k]; dup {
			t.Fatalf("window %s emitted twice", k)
		}
		if r.Key.End.Sub(r.Key.Start) != DemandWindowSize {
			t.Fatalf("window %+v is not %v long", r.Key, DemandWindowSize)
		}
		got[k] = r.Value
	}
	// Windows that closed well before the end (the watermark lags the last
	// event by the out-of-orderness bound) are all there and exact; none
	// that could not have closed is.
	closedBy := last.Add(-2*time.Second - DemandGrace - 2*time.Second)
	checked := 0
	for k, n := range want {
		var zone string
		var start int64
		fmt.Sscanf(replaceBar(k), "%s %d", &zone, &start)
		end := time.UnixMilli(start).Add(DemandWindowSize)
		if !end.Before(closedBy) {
			continue
		}
		checked++
		if got[k] != n {
			t.Errorf("window %s: count %d, want %d", k, got[k], n)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d windows checked", checked)
	}
	if len(got) > len(want) {
		t.Errorf("%d windows emitted, %d with requests", len(got), len(want))
	}
	lates := late.Records()
	if len(lates) != wantLate {
		t.Fatalf("%d late requests routed, want %d", len(lates), wantLate)
	}
	for _, r := range lates {
		if r.Key != r.Value.Zone {
			t.Fatalf("late request keyed %q, want its zone %q", r.Key, r.Value.Zone)
		}
		if v, ok := header(r.Headers, stream.HeaderLateBy); !ok || v == "" || v[0] == '-' {
			t.Fatalf("late request without a positive %s header: %+v", stream.HeaderLateBy, r.Headers)
		}
	}
	if desc := d.App().Describe(); !containsAll(desc, "store zone-demand: windowed (hopping 1m0s advancing 10s), grace 5s",
		"late records: to topic "+LateRequestsTopic, "late records so far: topic "+fmt.Sprint(wantLate)) {
		t.Fatalf("Describe does not state the windows, the lateness bound and the late destination:\n%s", desc)
	}
}

func replaceBar(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '|' {
			b[i] = ' '
		}
	}
	return string(b)
}

func header(hs []stream.Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !contains(s, sub) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
