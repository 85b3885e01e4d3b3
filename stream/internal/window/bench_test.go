package window

import (
	"syscall"
	"testing"
	"time"
)

// benchPair times AssignTo of base and target windows over the same stream
// of increasing record times, alternating batches of 10,000 records so both
// see the same conditions, and reports ns per record of each and their
// ratio.
func benchPair(b *testing.B, base, target TimeWindows, baseName, targetName string) {
	buf := make([]Window, 0, 16)
	const ts0, batch = int64(1764633600000), 10000
	var baseNs, targetNs int64
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		for k, w := range [2]TimeWindows{base, target} {
			start := processCPU(b)
			for i := done; i < done+n; i++ {
				buf = w.AssignTo(buf[:0], ts0+int64(i)*37)
			}
			if k == 0 {
				baseNs += int64(processCPU(b) - start)
			} else {
				targetNs += int64(processCPU(b) - start)
			}
		}
	}
	if len(buf) == 0 {
		b.Fatal("no window")
	}
	b.ReportMetric(float64(baseNs)/float64(b.N), baseName+"-ns/op")
	b.ReportMetric(float64(targetNs)/float64(b.N), targetName+"-ns/op")
	b.ReportMetric(float64(targetNs)/float64(baseNs), "x-"+baseName)
}

// BenchmarkAssignHopping: hopping windows of size/advance = 5 (60 s
// advancing 12 s: five windows per record) against tumbling 60 s windows.
func BenchmarkAssignHopping(b *testing.B) {
	benchPair(b, Tumbling(time.Minute), Hopping(time.Minute, 12*time.Second), "tumbling", "hopping")
}

// BenchmarkAssignCalendar: hourly windows on Europe/Berlin's clock against
// plain (UTC epoch) hourly windows.
func BenchmarkAssignCalendar(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	benchPair(b, Tumbling(time.Hour), TimeWindows{Size: time.Hour, Location: berlin}, "plain", "calendar")
}

// processCPU returns the process's CPU time (user + system) so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
