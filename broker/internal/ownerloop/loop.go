// Package ownerloop is the single-owner event loop of the group and
// transaction coordinators: one goroutine owns all of a coordinator's state
// and runs, one at a time, the closures other goroutines hand it, plus the
// coordinator's timers (deadlines on an injected clock), in the style of
// kfake's coordinators and etcd raft's Tick.
//
// # Guarantees
//
//   - Every closure given to Post, Do or Call, and every Options.Fire and
//     Options.Stopped, runs on the owner goroutine, one at a time, so the
//     owner's state needs no lock. Closures handed over by one goroutine run
//     in the order it handed them over.
//   - Hand-over is synchronous (an unbuffered channel): when Post returns
//     true or Do returns nil, the loop has taken the closure and will run
//     it (Do: has run it). Nothing is ever queued inside the loop, so there
//     is nothing to drain at Stop.
//   - Time comes only from Options.Now. The loop arms one real timer for
//     the deadline Options.Next reports (re-read after every event and every
//     Fire) and calls Fire(now, false) when it expires; with a fake clock
//     the real timer may fire early or late, so Fire must act only on
//     deadlines passed by now. Tick runs Fire(now, true) at once and waits
//     for it: tests advance their clock and Tick, without sleeping.
//   - Stop closes Stopping, lets the closure that is running (if any)
//     finish, runs Options.Stopped on the owner goroutine (the owner
//     answers the requests it parked) and returns once the goroutine has
//     exited. A closure handed over before the loop saw Stop still runs;
//     after Stop returns none does: Post returns false, Do and Call return
//     ErrStopped, Tick returns at once.
//
// # What a caller may do
//
// Post, Do, Call, Tick and Stop are safe for concurrent use from any
// goroutine except the owner's: a closure must never call them (it would
// wait for itself). To answer later, a closure keeps the reply function
// Call gave it, or a channel of its own, and a later closure uses it.
// Goroutines the owner starts (I/O, timers) report back with Post, which
// fails harmlessly once the loop stopped.
package ownerloop

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrStopped is returned by Do and Call once the loop stopped.
var ErrStopped = errors.New("ownerloop: stopped")

// Options are the owner's clock and timer hooks. Every hook is optional
// and runs on the owner goroutine.
type Options struct {
	// Now is the owner's clock (default time.Now).
	Now func() time.Time
	// Fire acts on the owner's deadlines passed by now. force is set by
	// Tick (run every check now); the real timer passes false.
	Fire func(now time.Time, force bool)
	// Next is the earliest deadline at which Fire should run; zero means
	// none. The real timer sleeps until it (at least 1ms).
	Next func() time.Time
	// Stopped runs once, after the last closure, when Stop was called.
	Stopped func()
}

// Loop is a running owner goroutine; see the package doc for what is safe
// from where.
type Loop struct {
	opts     Options
	events   chan func()
	quit     chan struct{} // closed by Stop
	done     chan struct{} // closed when the goroutine exited
	stopOnce sync.Once
}

// minSleep bounds how often the real timer wakes the loop.
const minSleep = time.Millisecond

// Start starts the owner goroutine.
func Start(opts Options) *Loop {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Loop{
		opts:   opts,
		events: make(chan func()),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go l.run()
	return l
}

func (l *Loop) run() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.arm(timer)
		select {
		case <-l.quit:
			if l.opts.Stopped != nil {
				l.opts.Stopped()
			}
			return
		case fn := <-l.events:
			fn()
		case <-timer.C:
			if l.opts.Fire != nil {
				l.opts.Fire(l.opts.Now(), false)
			}
		}
	}
}

// arm sets timer for the owner's next deadline (stopped when there is
// none).
func (l *Loop) arm(timer *time.Timer) {
	timer.Stop()
	var next time.Time
	if l.opts.Next != nil {
		next = l.opts.Next()
	}
	if next.IsZero() {
		return
	}
	timer.Reset(max(next.Sub(l.opts.Now()), minSleep))
}

// Post hands fn to the loop without waiting for it to run. It returns false,
// and fn never runs, once the loop stopped.
func (l *Loop) Post(fn func()) bool {
	select {
	case l.events <- fn:
		return true
	case <-l.quit:
		return false
	}
}

// Do runs fn on the loop and returns once it ran. ctx bounds only the
// hand-over (ctx.Err() is returned if it ends first, and fn never runs):
// once the loop took fn, Do waits for it, so what fn wrote is the caller's
// to read when Do returns nil. It returns ErrStopped if the loop stopped
// before fn ran.
func (l *Loop) Do(ctx context.Context, fn func()) error {
	ran := make(chan struct{})
	select {
	case l.events <- func() { fn(); close(ran) }:
	case <-l.quit:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ran:
		return nil
	case <-l.quit:
		// The loop may have run fn before it saw quit.
		select {
		case <-ran:
			return nil
		default:
			return ErrStopped
		}
	}
}

// Call runs fn on the loop and returns the value fn passes to reply, which
// fn may keep and call later, from another closure (a parked request).
// ctx bounds the hand-over and the wait; a reply after the caller returned
// (ctx ended, or the loop stopped) is dropped, and reply never blocks.
// Only the first reply counts.
func Call[T any](ctx context.Context, l *Loop, fn func(reply func(T))) (T, error) {
	var zero T
	ch := make(chan T, 1)
	reply := func(v T) {
		select {
		case ch <- v:
		default:
		}
	}
	select {
	case l.events <- func() { fn(reply) }:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-l.quit:
		return zero, ErrStopped
	}
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-l.quit:
		return zero, ErrStopped
	}
}

// Tick runs Fire(Now(), true) on the loop and waits for it. It returns at
// once if the loop stopped.
func (l *Loop) Tick() {
	if l.opts.Fire == nil {
		return
	}
	_ = l.Do(context.Background(), func() { l.opts.Fire(l.opts.Now(), true) })
}

// Stopping is closed when Stop is called: a caller waiting for a parked
// reply selects on it so that it never waits for a loop that is gone.
func (l *Loop) Stopping() <-chan struct{} { return l.quit }

// Stop stops the loop (see the package doc) and waits for its goroutine to
// exit. It is safe to call more than once and from several goroutines; it
// reports whether this call stopped the loop.
func (l *Loop) Stop() bool {
	first := false
	l.stopOnce.Do(func() {
		first = true
		close(l.quit)
	})
	<-l.done
	return first
}
