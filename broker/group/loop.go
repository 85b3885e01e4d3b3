package group

import (
	"context"
	"errors"
	"time"

	"github.com/weirhq/weir/broker/internal/ownerloop"
)

// The loop (broker/internal/ownerloop) owns every group. Every closure the
// coordinator hands it goes through event, which first fires the timers
// whose deadline has passed (by Options.Now), so a request never observes
// a state a timer should already have changed.
//
// Checking every group's deadlines costs O(members), so it is not done on
// every request: the loop remembers the earliest deadline found by the last
// full check (nextTick) and, since a request may have set an earlier one,
// checks again at most scanEvery after any request. A deadline is thus
// acted on at most scanEvery late (and exactly on time when nothing
// happened since the last check); a heartbeat costs O(1) however many
// groups there are.
const scanEvery = 10 * time.Millisecond

// startLoop starts the goroutine that owns the groups.
func (c *Coordinator) startLoop() {
	c.loop = ownerloop.Start(ownerloop.Options{
		Now:     c.opts.Now,
		Fire:    func(_ time.Time, force bool) { c.fireTimers(force) },
		Next:    c.timerDeadline,
		Stopped: c.failAllWaiters,
	})
}

// event wraps fn for the loop: passed deadlines fire first, and the next
// full check comes at most scanEvery after it.
func (c *Coordinator) event(fn func()) func() {
	return func() {
		c.fireTimers(false)
		fn()
		c.dirty = true
	}
}

// timerDeadline is when the loop's real timer wakes it: the earliest
// deadline, or the next full check after a request. With a fake clock the
// real timer may fire early or late; fireTimers only acts on deadlines
// passed by Options.Now, so that is harmless.
func (c *Coordinator) timerDeadline() time.Time {
	next := c.nextTick
	if c.dirty {
		next = earliest(next, c.lastScan.Add(scanEvery))
	}
	return next
}

// do runs fn on the loop and waits for it. It returns ErrClosed if the
// coordinator is closed and ctx.Err() if ctx ends before the loop took fn
// (then fn never runs).
func (c *Coordinator) do(ctx context.Context, fn func()) error {
	err := c.loop.Do(ctx, c.event(fn))
	if errors.Is(err, ownerloop.ErrStopped) {
		return ErrClosed
	}
	return err
}

// post hands fn to the loop without waiting; it is dropped once Close
// began. Never call it from the loop.
func (c *Coordinator) post(fn func()) {
	c.loop.Post(c.event(fn))
}

// stopping is closed when Close begins: a request parked on the loop
// selects on it.
func (c *Coordinator) stopping() <-chan struct{} { return c.loop.Stopping() }

// tick makes the loop fire expired timers now and waits for it; tests call
// it after advancing their clock.
func (c *Coordinator) tick() { c.loop.Tick() }

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
