package window

import (
	"testing"
	"time"
)

// benchAssign times AssignTo over a stream of increasing record times and
// returns ns per record.
func benchAssign(b *testing.B, w TimeWindows) float64 {
	buf := make([]Window, 0, 16)
	ts := int64(1764633600000)
	start := time.Now()
	for i := 0; i < b.N; i++ {
		buf = w.AssignTo(buf[:0], ts+int64(i)*37)
	}
	if len(buf) == 0 {
		b.Fatal("no window")
	}
	return float64(time.Since(start).Nanoseconds()) / float64(b.N)
}

// BenchmarkAssignHopping assigns a record to hopping windows of size/advance
// = 5 (60 s advancing 12 s: five windows) and reports the ratio to tumbling
// 60 s windows (one window) measured in the same run.
func BenchmarkAssignHopping(b *testing.B) {
	base := benchAssign(b, Tumbling(time.Minute))
	hop := benchAssign(b, Hopping(time.Minute, 12*time.Second))
	b.ReportMetric(base, "tumbling-ns/op")
	b.ReportMetric(hop, "hopping-ns/op")
	b.ReportMetric(hop/base, "x-tumbling")
}

// BenchmarkAssignCalendar assigns a record to hourly windows in
// Europe/Berlin and reports the ratio to plain (UTC epoch) hourly windows.
func BenchmarkAssignCalendar(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	base := benchAssign(b, Tumbling(time.Hour))
	cal := benchAssign(b, TimeWindows{Size: time.Hour, Location: berlin})
	b.ReportMetric(base, "plain-ns/op")
	b.ReportMetric(cal, "calendar-ns/op")
	b.ReportMetric(cal/base, "x-plain")
}
