package log

import (
	"testing"
	"time"
)

// sleepClock is a manual clock whose sleep advances it.
type sleepClock struct {
	t      time.Time
	slept  time.Duration
	sleeps int
}

func (c *sleepClock) now() time.Time { return c.t }
func (c *sleepClock) sleep(d time.Duration) {
	c.t = c.t.Add(d)
	c.slept += d
	c.sleeps++
}

// The throttle lets through the rate in small steps: one sleep per piece,
// the long-run rate exact.
func TestThrottlePacesInSteps(t *testing.T) {
	c := &sleepClock{t: time.Unix(1000, 0)}
	const rate = 100 << 20 // 100 MiB/s
	thr := newThrottleClock(rate, c.now, c.sleep)
	start := c.t
	const pieces = 400 // 100 MiB
	for range pieces {
		thr.wait(cleanIOChunk)
	}
	elapsed := c.t.Sub(start)
	want := time.Second - time.Duration(float64(cleanBurstBytes)/rate*float64(time.Second)) // the initial burst is free
	if d := elapsed - want; d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("100 MiB at 100 MiB/s took %v, want %v", elapsed, want)
	}
	// After the burst it sleeps at least every few pieces: no long
	// bursts, no long sleeps.
	perSleep := int(throttleMinSleep*rate/time.Second)/cleanIOChunk + 1
	if min := (pieces - cleanBurstBytes/cleanIOChunk) / perSleep; c.sleeps < min {
		t.Fatalf("%d sleeps for %d pieces, want at least %d", c.sleeps, pieces, min)
	}
	if avg := c.slept / time.Duration(c.sleeps); avg > 2*throttleMinSleep {
		t.Fatalf("average sleep %v", avg)
	}
}

// After a stall the throttle catches up at twice the rate, not in one
// burst: the pieces it lets through without sleeping are bounded by the
// burst, and the lost time is made up.
func TestThrottleBoundsBurstAfterStall(t *testing.T) {
	c := &sleepClock{t: time.Unix(1000, 0)}
	const rate = 100 << 20
	thr := newThrottleClock(rate, c.now, c.sleep)
	thr.wait(cleanIOChunk)
	c.t = c.t.Add(10 * time.Second) // a long stall: 1000 MiB of unused budget
	c.sleeps, c.slept = 0, 0
	run, longest := 0, 0
	for range 64 {
		before := c.sleeps
		thr.wait(cleanIOChunk)
		if c.sleeps == before {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	if limit := cleanBurstBytes/cleanIOChunk + 1; longest > limit {
		t.Fatalf("%d pieces in a row without sleeping after a stall, want at most %d", longest, limit)
	}
	// 64 pieces (16 MiB) at twice the rate: 80 ms of sleep, less what is
	// still owed.
	if c.slept < 64*cleanIOChunk*time.Second/(2*rate)-throttleMinSleep {
		t.Fatalf("catching up slept %v for 64 pieces: faster than twice the rate", c.slept)
	}
	// Then it catches up (10 s behind, 1.25 ms made up per piece) and the
	// long-run rate is exact: 2500 MiB more pieces
	// end about when the budget says (stall included).
	start := c.t
	for range 10000 {
		thr.wait(cleanIOChunk)
	}
	if c.t.Before(thr.paid.Add(-thr.burst)) || c.t.After(thr.paid.Add(time.Millisecond)) {
		t.Fatalf("after catching up: clock %v, paid %v", c.t.Sub(start), thr.paid.Sub(start))
	}
}

// A nil throttle (unlimited) never sleeps.
func TestThrottleUnlimited(t *testing.T) {
	if newThrottle(0) != nil {
		t.Fatal("rate 0 must be unlimited")
	}
	var thr *throttle
	thr.wait(1 << 30) // must not block
}
