package errorfs

import (
	"sync"
	"sync/atomic"
)

// Gate holds the operations its predicate selects while held: each one
// blocks until Release, then passes (or fails with the error set by
// FailWith). It lets a test stop, say, an fsync half-way and look at what
// the code does meanwhile. A new Gate is released.
type Gate struct {
	p       Predicate
	entered chan struct{}
	count   atomic.Int64
	fail    atomic.Pointer[error]

	mu      sync.Mutex
	held    bool
	release chan struct{} // closed by Release
}

// NewGate returns a released Gate over the operations p selects.
func NewGate(p Predicate) *Gate {
	return &Gate{p: p, entered: make(chan struct{}, 1024), release: make(chan struct{})}
}

// Hold makes the selected operations wait from now on.
func (g *Gate) Hold() {
	g.mu.Lock()
	g.held = true
	g.mu.Unlock()
}

// Release lets the waiting operations and every later one through. It is a
// no-op on a released Gate.
func (g *Gate) Release() {
	g.mu.Lock()
	if g.held {
		g.held = false
		close(g.release)
		g.release = make(chan struct{})
	}
	g.mu.Unlock()
}

// Entered receives a value each time a selected operation starts waiting.
func (g *Gate) Entered() <-chan struct{} { return g.entered }

// Count returns how many operations the gate has selected.
func (g *Gate) Count() int64 { return g.count.Load() }

// FailWith makes the selected operations fail with err once through the
// gate (nil: they pass).
func (g *Gate) FailWith(err error) {
	if err == nil {
		g.fail.Store(nil)
		return
	}
	g.fail.Store(&err)
}

// MaybeError implements Injector.
func (g *Gate) MaybeError(op Op) error {
	if !g.p(op) {
		return nil
	}
	g.count.Add(1)
	g.mu.Lock()
	held, release := g.held, g.release
	g.mu.Unlock()
	if held {
		g.entered <- struct{}{}
		<-release
	}
	if err := g.fail.Load(); err != nil {
		return *err
	}
	return nil
}
