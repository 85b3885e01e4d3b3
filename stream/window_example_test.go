package stream_test

import (
	"fmt"
	"os"
	"time"

	"github.com/weirhq/weir/stream"
)

// Rides per zone and minute of event time, one result per window when it
// closes, without a broker. The watermark trails the largest event time by
// 5 s; a window closes when the watermark passes its end plus the 10 s
// grace, and a ride that arrives after that goes, unchanged, to the
// rides-late topic with headers naming its window, the watermark and how
// far past the window's close it came (milliseconds).
func ExampleWindowedCount() {
	b := stream.NewBuilder()
	rides := stream.From(b, "rides", stream.String(), stream.String()) // key: zone, value: rider
	perMinute := stream.Tumbling(time.Minute)
	stream.WindowedCount(stream.GroupByKey(rides), perMinute, stream.WindowedStore{
		Name:  "rides-per-minute",
		Grace: 10 * time.Second,
		Late:  stream.LateToTopic("rides-late"),
		Emit:  stream.EmitFinal(),
	}).ToStream().To("rides-per-minute", stream.WindowedKeys(stream.String(), perMinute), stream.Int64())

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("rides", b, nil, stream.StateDir(dir), stream.Watermarks(5*time.Second, 0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	at := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		zone string
		sec  int
	}{
		{"north", 10}, {"south", 30}, {"north", 50}, {"north", 65},
		{"south", 55}, // out of order, within the 5 s bound: on time
		{"north", 80}, // watermark 08:01:15: the 08:00 windows close
		{"south", 40}, // its window closed: late
		{"north", 150},
	} {
		d.Pipe("rides", []byte(r.zone), []byte("rider"), at.Add(time.Duration(r.sec)*time.Second))
		if err := d.Process(); err != nil { // a processing round: the watermark moves at its end
			fmt.Println(err)
			return
		}
	}
	if err := d.EndOfInput(); err != nil { // the end of a bounded input: every window closes
		fmt.Println(err)
		return
	}
	keys := stream.WindowedKeys(stream.String(), perMinute)
	for _, r := range d.Records("rides-per-minute") {
		w, _ := keys.Decode(r.Key)
		n, _ := stream.Int64().Decode(r.Value)
		fmt.Printf("%s [%s, %s): %d\n", w.Key, w.Start.UTC().Format("15:04"), w.End.UTC().Format("15:04"), n)
	}
	for _, r := range d.Records("rides-late") {
		fmt.Printf("late: %s at %s,", r.Key, r.Timestamp.UTC().Format("15:04:05"))
		for _, h := range r.Headers {
			fmt.Printf(" %s=%s", h.Key, h.Value)
		}
		fmt.Println()
	}
	// Output:
	// north [08:00, 08:01): 2
	// south [08:00, 08:01): 2
	// north [08:01, 08:02): 2
	// north [08:02, 08:03): 1
	// late: south at 08:00:40, weir.late.store=rides-per-minute weir.late.window.start=1767254400000 weir.late.window.end=1767254460000 weir.late.watermark=1767254475000 weir.late.by=5000
}

// Daily counts on the calendar of Berlin: the day the clocks spring forward
// has 23 hours, and its window ends at the next local midnight.
func ExampleWindowIn() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	b := stream.NewBuilder()
	orders := stream.From(b, "orders", stream.String(), stream.String()) // key: shop
	daily := stream.Tumbling(24*time.Hour, stream.WindowIn(berlin))
	stream.WindowedCount(stream.GroupByKey(orders), daily, stream.WindowedStore{
		Name: "orders-per-day", Late: stream.DropLate(), Emit: stream.EmitFinal(),
	}).ToStream().To("orders-per-day", stream.WindowedKeys(stream.String(), daily), stream.Int64())

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("shop", b, nil, stream.StateDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	for _, local := range []string{"2026-03-28 23:30", "2026-03-29 00:30", "2026-03-29 23:30", "2026-03-30 00:10"} {
		t, _ := time.ParseInLocation("2006-01-02 15:04", local, berlin)
		d.Pipe("orders", []byte("bakery"), []byte("order"), t)
	}
	if err := d.Process(); err != nil {
		fmt.Println(err)
		return
	}
	if err := d.EndOfInput(); err != nil {
		fmt.Println(err)
		return
	}
	keys := stream.WindowedKeys(stream.String(), daily)
	for _, r := range d.Records("orders-per-day") {
		w, _ := keys.Decode(r.Key)
		n, _ := stream.Int64().Decode(r.Value)
		fmt.Printf("%s %s (%v): %d\n", w.Key, w.Start.In(berlin).Format("Mon 2 Jan"), w.End.Sub(w.Start), n)
	}
	// Output:
	// bakery Sat 28 Mar (24h0m0s): 1
	// bakery Sun 29 Mar (23h0m0s): 2
	// bakery Mon 30 Mar (24h0m0s): 1
}

// Clicks per user session (a session ends after 10 minutes without a click),
// every change emitted. A session's key holds its start and end, so a click
// that extends a session, or bridges two and merges them, replaces keys: the
// replaced sessions' results are retracted (a null value, for a consumer
// upserting by key) before the new session's.
func ExampleSession() {
	b := stream.NewBuilder()
	clicks := stream.From(b, "clicks", stream.String(), stream.String()) // key: user
	sessions := stream.Session(10 * time.Minute)
	stream.WindowedCount(stream.GroupByKey(clicks), sessions, stream.WindowedStore{
		Name: "sessions", Late: stream.DropLate(), Emit: stream.EmitUpdates(),
	}).ToStream().To("sessions", stream.WindowedKeys(stream.String(), sessions), stream.Int64())

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("web", b, nil, stream.StateDir(dir),
		stream.Watermarks(time.Hour, 0)) // clicks come up to an hour out of order: no session closes here
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	at := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	for _, min := range []int{0, 5, 20, 12} { // the click at 08:12 bridges 08:00–08:05 and 08:20
		d.Pipe("clicks", []byte("ann"), []byte("/"), at.Add(time.Duration(min)*time.Minute))
		if err := d.Process(); err != nil {
			fmt.Println(err)
			return
		}
	}
	keys := stream.WindowedKeys(stream.String(), sessions)
	for _, r := range d.Records("sessions") {
		w, _ := keys.Decode(r.Key)
		result := "retracted"
		if r.Value != nil {
			n, _ := stream.Int64().Decode(r.Value)
			result = fmt.Sprint("clicks: ", n)
		}
		fmt.Printf("%s [%s, %s]: %s\n", w.Key, w.Start.UTC().Format("15:04"), w.End.UTC().Format("15:04"), result)
	}
	// Output:
	// ann [08:00, 08:00]: clicks: 1
	// ann [08:00, 08:00]: retracted
	// ann [08:00, 08:05]: clicks: 2
	// ann [08:20, 08:20]: clicks: 1
	// ann [08:00, 08:05]: retracted
	// ann [08:20, 08:20]: retracted
	// ann [08:00, 08:20]: clicks: 4
}
