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
	// throttleMinSleep: shorter sleeps are deferred and merged (a timer
	// sleep of well under a millisecond takes about one on a VM: sleeping
	// for every piece would lose the rate).
	throttleMinSleep = 2 * time.Millisecond
)

// throttle bounds a byte rate (nil-safe; rate 0 means unlimited). It uses
// the wall clock: it paces real I/O. Invariants: over any interval the
// bytes let through are at most 2*rate*interval + cleanBurstBytes (a
// cleaner that fell behind, descheduled or stalled, catches up at twice the
// rate, never in one long burst); over a whole pass the average is the rate
// (time lost is made up, so a loaded machine does not slow the cleaner
// below its budget).
type throttle struct {
	rate int64
	// paid is the time at which every byte let through so far is paid
	// for at the rate.
	paid  time.Time
	burst time.Duration
	// owed is catch-up sleep not taken yet (below throttleMinSleep).
	owed  time.Duration
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
	cost := time.Duration(float64(n) / float64(t.rate) * float64(time.Second))
	t.paid = t.paid.Add(cost)
	if t.paid.Before(now.Add(-t.burst)) {
		// Behind by more than the burst: catch up at twice the rate.
		if t.owed += cost / 2; t.owed >= throttleMinSleep {
			t.sleep(t.owed)
			t.owed = 0
			return
		}
		runtime.Gosched()
		return
	}
	t.owed = 0
	if d := t.paid.Sub(now); d >= throttleMinSleep {
		t.sleep(d)
		return
	}
	runtime.Gosched()
}
