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
	// Every piece after the burst sleeps about one piece's time: no long
	// bursts, no long sleeps.
	if c.sleeps < pieces-cleanBurstBytes/cleanIOChunk-1 {
		t.Fatalf("%d sleeps for %d pieces", c.sleeps, pieces)
	}
}

// After a stall the throttle resumes at the rate: the credit it may use at
// once is bounded by the burst.
func TestThrottleBoundsBurstAfterStall(t *testing.T) {
	c := &sleepClock{t: time.Unix(1000, 0)}
	const rate = 100 << 20
	thr := newThrottleClock(rate, c.now, c.sleep)
	thr.wait(cleanIOChunk)
	c.t = c.t.Add(10 * time.Second) // a long stall: 1000 MiB of unused budget
	c.sleeps, c.slept = 0, 0
	free := 0
	for range 64 {
		before := c.sleeps
		thr.wait(cleanIOChunk)
		if c.sleeps == before {
			free++
		}
	}
	if max := cleanBurstBytes/cleanIOChunk + 1; free > max {
		t.Fatalf("%d pieces passed without sleeping after a stall, want at most %d", free, max)
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
