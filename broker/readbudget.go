package broker

import (
	"context"
	"runtime/debug"
	"sync"
	"time"
)

// The memory of requests being read, across all connections, is bounded
// (Kafka's queued.max.request.bytes): a connection that reads the size of a
// frame larger than readBudgetMin reserves the whole frame from the
// broker's readBudget before it reads the body, and gives the reservation
// back once the body is read (or the read failed). While the budget is
// spent, reading stops: the connection waits (its client sees a slow
// broker, not an error) until other frames are read. A reservation is
// granted while anything is left, so a single frame of up to
// socket.request.max.bytes is always readable and memory stays below the
// budget plus one frame. Reserving whole frames up front cannot deadlock:
// every granted frame can be read to its end without more budget.
//
// Frames of at most readBudgetMin bytes are read in one allocation and are
// not counted: they bound themselves per connection, and metadata,
// heartbeats and fetches keep flowing while large frames wait.
//
// Memory is given back: a large frame whose connection ended before it
// was read whole leaves garbage the Go runtime would keep mapped (RSS
// stayed at 540 MB after 20 connections each sent 10 MB of a 100 MB
// frame); once such waste reaches readWasteFree the broker returns freed
// memory to the OS (debug.FreeOSMemory, at most once per
// readWasteInterval, off the read path).
const (
	readBudgetMin = 1 << 20

	// DefaultQueuedMaxRequestBytes is weir's default bound (Kafka's is
	// unbounded).
	DefaultQueuedMaxRequestBytes = 256 << 20

	readWasteFree     = 16 << 20
	readWasteInterval = time.Second
)

// readBudget counts the bytes reserved by frames being read. Goroutine-safe.
type readBudget struct {
	capacity int64

	mu      sync.Mutex
	used    int64
	changed chan struct{} // closed and replaced whenever used drops
	peak    int64         // largest used, for tests

	wasteMu   sync.Mutex
	waste     int64     // bytes of abandoned frames since the last free
	lastFree  time.Time // of the last FreeOSMemory
	freeing   bool      // a free is scheduled or running
	freeCount int       // FreeOSMemory calls, for tests
	freeOS    func()    // debug.FreeOSMemory; tests may replace it
}

func newReadBudget(capacity int64) *readBudget {
	return &readBudget{capacity: capacity, changed: make(chan struct{}), freeOS: debug.FreeOSMemory}
}

// acquire reserves n bytes, waiting while the budget is spent (used >=
// capacity). It returns false, reserving nothing, if ctx ends first.
func (rb *readBudget) acquire(ctx context.Context, n int64) bool {
	for {
		rb.mu.Lock()
		if rb.used < rb.capacity {
			rb.used += n
			rb.peak = max(rb.peak, rb.used)
			rb.mu.Unlock()
			return true
		}
		ch := rb.changed
		rb.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// release gives back a reservation of n bytes.
func (rb *readBudget) release(n int64) {
	rb.mu.Lock()
	rb.used -= n
	close(rb.changed)
	rb.changed = make(chan struct{})
	rb.mu.Unlock()
}

// peakUse is the most bytes ever reserved at once.
func (rb *readBudget) peakUse() int64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.peak
}

// inUse is the bytes reserved now.
func (rb *readBudget) inUse() int64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.used
}

// wasted records an abandoned frame of n bytes (as announced), and returns
// memory to the OS once enough has been wasted (asynchronously, rate
// limited).
func (rb *readBudget) wasted(n int64) {
	rb.wasteMu.Lock()
	defer rb.wasteMu.Unlock()
	rb.waste += n
	if rb.waste < readWasteFree || rb.freeing {
		return
	}
	rb.freeing = true
	wait := max(readWasteInterval-time.Since(rb.lastFree), 0)
	time.AfterFunc(wait, func() {
		rb.freeOS()
		rb.wasteMu.Lock()
		rb.waste, rb.lastFree, rb.freeing = 0, time.Now(), false
		rb.freeCount++
		rb.wasteMu.Unlock()
	})
}

// settled reports whether memory was returned to the OS at least once and
// no abandoned frame has been recorded since (none pending).
func (rb *readBudget) settled() bool {
	rb.wasteMu.Lock()
	defer rb.wasteMu.Unlock()
	return rb.freeCount > 0 && rb.waste == 0 && !rb.freeing
}
