package ownerloop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// owner is a minimal owner: a deadline and a log of what ran, touched only
// on the loop (the race detector checks that).
type owner struct {
	deadline time.Time
	fired    []bool // force of each Fire that acted
	stopped  bool
}

func start(o *owner) *Loop {
	return Start(Options{
		Fire: func(now time.Time, force bool) {
			if force || (!o.deadline.IsZero() && !now.Before(o.deadline)) {
				o.fired = append(o.fired, force)
				o.deadline = time.Time{}
			}
		},
		Next:    func() time.Time { return o.deadline },
		Stopped: func() { o.stopped = true },
	})
}

func TestPostAndDoRunInOrder(t *testing.T) {
	o := &owner{}
	l := start(o)
	defer l.Stop()
	var got []int
	for i := range 5 {
		if !l.Post(func() { got = append(got, i) }) {
			t.Fatal("post refused on a running loop")
		}
	}
	var n int
	if err := l.Do(context.Background(), func() { n = len(got) }); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("Do ran before the posts: saw %d", n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("order %v", got)
		}
	}
}

// TestCallParkedReply: a closure keeps reply and a later closure answers.
func TestCallParkedReply(t *testing.T) {
	l := start(&owner{})
	defer l.Stop()
	var parked func(string)
	res := make(chan string, 1)
	go func() {
		v, err := Call(context.Background(), l, func(reply func(string)) { parked = reply })
		if err != nil {
			v = err.Error()
		}
		res <- v
	}()
	// Wait until the call is parked, then answer it twice (the second is
	// dropped without blocking the loop).
	for {
		var ok bool
		if err := l.Do(context.Background(), func() { ok = parked != nil }); err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	l.Post(func() { parked("first"); parked("second") })
	if v := <-res; v != "first" {
		t.Fatalf("got %q", v)
	}
}

// TestCallContextEnds: the caller gets ctx's error; a reply after that is
// dropped and does not block the loop.
func TestCallContextEnds(t *testing.T) {
	l := start(&owner{})
	defer l.Stop()
	var parked func(int)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := Call(ctx, l, func(reply func(int)) { parked = reply })
		errc <- err
	}()
	for {
		var ok bool
		_ = l.Do(context.Background(), func() { ok = parked != nil })
		if ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if err := l.Do(context.Background(), func() { parked(1); parked(2) }); err != nil {
		t.Fatal(err)
	}
}

// TestDoContextEndsBeforeHandOver: while the loop is busy, a Do whose
// context ends returns its error and its closure never runs.
func TestDoContextEndsBeforeHandOver(t *testing.T) {
	l := start(&owner{})
	defer l.Stop()
	release := make(chan struct{})
	busy := make(chan struct{})
	l.Post(func() { close(busy); <-release })
	<-busy
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Bool
	if err := l.Do(ctx, func() { ran.Store(true) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	close(release)
	_ = l.Do(context.Background(), func() {})
	if ran.Load() {
		t.Fatal("closure of an abandoned Do ran")
	}
}

// TestStop: parked calls get ErrStopped, Stopped runs on the loop after the
// last closure, and nothing runs after Stop returned.
func TestStop(t *testing.T) {
	o := &owner{}
	l := start(o)
	errc := make(chan error, 1)
	parkedc := make(chan struct{})
	go func() {
		_, err := Call(context.Background(), l, func(reply func(int)) { close(parkedc) })
		errc <- err
	}()
	<-parkedc
	if !l.Stop() {
		t.Fatal("first Stop did not report stopping")
	}
	if l.Stop() {
		t.Fatal("second Stop reported stopping")
	}
	if err := <-errc; !errors.Is(err, ErrStopped) {
		t.Fatalf("parked call: %v", err)
	}
	if !o.stopped {
		t.Fatal("Stopped did not run")
	}
	select {
	case <-l.Stopping():
	default:
		t.Fatal("Stopping not closed")
	}
	if l.Post(func() { t.Error("ran after Stop") }) {
		t.Fatal("Post accepted after Stop")
	}
	if err := l.Do(context.Background(), func() { t.Error("ran after Stop") }); !errors.Is(err, ErrStopped) {
		t.Fatalf("Do after Stop: %v", err)
	}
	if _, err := Call(context.Background(), l, func(func(int)) { t.Error("ran after Stop") }); !errors.Is(err, ErrStopped) {
		t.Fatalf("Call after Stop: %v", err)
	}
	l.Tick() // returns at once
}

// TestTimer: the real timer wakes the loop at the owner's deadline (time
// is synctest's fake clock), and not before.
func TestTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &owner{}
		l := start(o)
		defer l.Stop()
		_ = l.Do(context.Background(), func() { o.deadline = time.Now().Add(5 * time.Second) })
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		var fired []bool
		_ = l.Do(context.Background(), func() { fired = append(fired, o.fired...) })
		if len(fired) != 0 {
			t.Fatalf("fired early: %v", fired)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		_ = l.Do(context.Background(), func() { fired = append(fired[:0], o.fired...) })
		if len(fired) != 1 || fired[0] {
			t.Fatalf("fired %v, want one unforced", fired)
		}
		// No deadline: the loop sleeps until something happens.
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		l.Tick()
		_ = l.Do(context.Background(), func() { fired = append(fired[:0], o.fired...) })
		if len(fired) != 2 || !fired[1] {
			t.Fatalf("fired %v, want an unforced then a forced (Tick)", fired)
		}
	})
}

// TestInjectedClock: Fire gets Options.Now, and the timer sleeps
// Next-Now of that clock.
func TestInjectedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var nowNanos atomic.Int64
		now := func() time.Time { return base.Add(time.Duration(nowNanos.Load())) }
		var got []time.Time
		deadline := base.Add(time.Minute)
		l := Start(Options{
			Now: now,
			Fire: func(at time.Time, force bool) {
				if !at.Before(deadline) {
					got = append(got, at)
					deadline = time.Time{}
				}
			},
			Next: func() time.Time { return deadline },
		})
		defer l.Stop()
		// The fake clock has not moved: Tick acts on nothing.
		l.Tick()
		nowNanos.Store(int64(time.Minute))
		l.Tick()
		var n int
		_ = l.Do(context.Background(), func() { n = len(got) })
		if n != 1 || !got[0].Equal(base.Add(time.Minute)) {
			t.Fatalf("fired at %v", got)
		}
	})
}
