package log

import (
	"runtime"
	"time"
)

// The cleaner's pacing. A pass shares two cores and one disk with the
// appenders, whose durable produce latency must stay close to its idle
// figure. The cleaner therefore works in small steps:
//
//   - it reads and writes in pieces of cleanIOChunk bytes, so that no single
//     read, parse or write holds a CPU (or the disk queue) for long;
//   - its I/O rate is a token bucket refilled at BytesPerSec whose credit is
//     capped at cleanBurstBytes: after a stall (a swap, a slow disk) it
//     resumes at the rate instead of catching up in one burst;
//   - it yields the processor after every piece when it did not sleep;
//   - its output's writeback is started piece by piece as it is written
//     (see cleanWriteback), so the fdatasync before the swap finds little
//     dirty data and no appender's fdatasync queues behind a large flush.

const (
	// cleanIOChunk is the cleaner's read size and output write size.
	cleanIOChunk = 256 << 10
	// cleanBurstBytes caps the throttle's accumulated credit.
	cleanBurstBytes = 8 << 20
)

// throttle bounds a byte rate (nil-safe; rate 0 means unlimited). It uses
// the wall clock: it paces real I/O. Invariant: over any interval, the
// bytes let through are at most rate*interval + cleanBurstBytes.
type throttle struct {
	rate int64
	// paid is the time at which every byte let through so far is paid
	// for at the rate; never earlier than now minus the burst allowance.
	paid  time.Time
	burst time.Duration
	now   func() time.Time
	sleep func(time.Duration)
}

func newThrottle(rate int64) *throttle {
	if rate <= 0 {
		return nil
	}
	return newThrottleClock(rate, time.Now, time.Sleep)
}

// newThrottleClock is newThrottle with an injected clock (tests).
func newThrottleClock(rate int64, now func() time.Time, sleep func(time.Duration)) *throttle {
	burst := time.Duration(float64(cleanBurstBytes) / float64(rate) * float64(time.Second))
	return &throttle{rate: rate, paid: now().Add(-burst), burst: burst, now: now, sleep: sleep}
}

// wait accounts n bytes and sleeps until they are within the rate. A nil
// throttle (unlimited) only yields the processor.
func (t *throttle) wait(n int64) {
	if t == nil {
		runtime.Gosched()
		return
	}
	now := t.now()
	if floor := now.Add(-t.burst); t.paid.Before(floor) {
		t.paid = floor // unused credit beyond the burst is lost
	}
	t.paid = t.paid.Add(time.Duration(float64(n) / float64(t.rate) * float64(time.Second)))
	if d := t.paid.Sub(now); d > 0 {
		t.sleep(d)
		return
	}
	runtime.Gosched()
}

// yield gives the processor to others between two steps of work that the
// rate does not account for (dropping a replaced segment's cache).
func (t *throttle) yield() {
	if t == nil {
		runtime.Gosched()
		return
	}
	t.sleep(50 * time.Microsecond)
}
