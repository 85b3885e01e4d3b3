package group

import (
	"context"
	"time"
)

// The loop owns every group. It runs closures sent by Handle, and before
// each one it fires the timers whose deadline has passed (by Options.Now),
// so a request never observes a state a timer should already have changed.
//
// Checking every group's deadlines costs O(members), so it is not done on
// every request: the loop remembers the earliest deadline found by the last
// full check (nextTick) and, since a request may have set an earlier one,
// checks again at most scanEvery after any request. A deadline is thus
// acted on at most scanEvery late (and exactly on time when nothing
// happened since the last check); a heartbeat costs O(1) however many
// groups there are.
const scanEvery = 10 * time.Millisecond

// loop runs until Close.
func (c *Coordinator) loop() {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-c.quit:
			c.failAllWaiters()
			return
		case fn := <-c.events:
			c.fireTimers(false)
			fn()
			c.dirty = true
		case <-timer.C:
			c.fireTimers(false)
		case <-c.wake:
			c.fireTimers(true)
		}
		// Re-arm the real timer for the earliest deadline. With a fake
		// clock the real timer may fire early or late; fireTimers only
		// acts on deadlines passed by Options.Now, so that is harmless.
		next := c.nextTick
		if c.dirty {
			next = earliest(next, c.lastScan.Add(scanEvery))
		}
		d := time.Hour
		if !next.IsZero() {
			d = max(next.Sub(c.opts.Now()), time.Millisecond)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(d)
	}
}

// do runs fn on the loop and waits for it. It returns ErrClosed if the
// coordinator is closed and ctx.Err() if ctx ends first (fn may still run).
func (c *Coordinator) do(ctx context.Context, fn func()) error {
	ran := make(chan struct{})
	select {
	case c.events <- func() { fn(); close(ran) }:
	case <-c.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ran:
		return nil
	case <-c.quit:
		// The loop may have run fn before seeing quit.
		select {
		case <-ran:
			return nil
		default:
		}
		return ErrClosed
	}
}

// tick makes the loop fire expired timers now and waits for it; tests call
// it after advancing their clock.
func (c *Coordinator) tick() {
	_ = c.do(context.Background(), func() { c.fireTimers(true) })
}

// fireTimers applies every deadline that has passed (see scanEvery; force
// checks now).
func (c *Coordinator) fireTimers(force bool) {
	now := c.opts.Now()
	if !force && !c.nextTick.IsZero() && now.Before(c.nextTick) && (!c.dirty || now.Sub(c.lastScan) < scanEvery) {
		return
	}
	// Deadlines can cascade (a member expiring completes a join whose
	// completion arms new deadlines); bound the passes.
	for range 8 {
		fired := false
		for _, g := range c.groups {
			if g.fireTimers(now) {
				fired = true
			}
		}
		if !fired {
			break
		}
	}
	if !now.Before(c.nextRetentionCheck) {
		c.nextRetentionCheck = now.Add(c.opts.RetentionCheckInterval)
		c.expireOffsets(now)
	}
	c.collectDeadGroups()
	c.lastScan, c.dirty = now, false
	c.nextTick = c.nextDeadline()
}

// nextDeadline is the earliest pending deadline (zero if none).
func (c *Coordinator) nextDeadline() time.Time {
	next := c.nextRetentionCheck
	for _, g := range c.groups {
		if d := g.nextDeadline(); !d.IsZero() && d.Before(next) {
			next = d
		}
	}
	return next
}

// collectDeadGroups forgets groups that are Dead or Empty with nothing
// left (no offsets, no members, no pending writes).
func (c *Coordinator) collectDeadGroups() {
	for id, g := range c.groups {
		if g.removable() {
			delete(c.groups, id)
			c.met.forgetGroup(id)
		}
	}
}

// failAllWaiters answers every parked request on shutdown.
func (c *Coordinator) failAllWaiters() {
	for _, g := range c.groups {
		g.failWaiters()
	}
}

// earliest returns the earlier non-zero time.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	if b.IsZero() || a.Before(b) {
		return a
	}
	return b
}
