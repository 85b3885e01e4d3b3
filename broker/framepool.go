package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// Produce request frames are the bulk of the bytes a broker reads. They are
// read into recycled buffers: a fresh 10 MiB allocation is zeroed by the
// runtime and then overwritten by the read, and on first use every page of
// it is a page fault (on a VM whose idle memory went back to the host, a
// host fault too, charged to the broker as system time). A frame returns to
// the pool as soon as its request's appends are done (Produce calls
// slot.frameDone) and at the latest once its response is written: the log
// keeps no reference to the appended bytes and the Produce response holds
// none.
//
// Unlike a sync.Pool, the free list survives garbage collections (a GC
// would otherwise drop the buffers and the next requests would fault fresh
// memory in again) and serves a request from any free buffer large enough
// (best fit), so requests of varying sizes share a few buffers instead of
// filling one size class each. It is bounded (framePoolMaxFree buffers,
// framePoolMaxBytes of capacity) and given back to the runtime once unused
// for framePoolIdle.
//
// A new buffer for a frame of more than a quarter of the largest one the
// pool handed out since it was last idle is as large as that one: a
// producer's requests vary in size (a 5 MiB one between 12 MiB ones), and a
// buffer sized for a smaller one could not serve the next large one, which
// would then fault in a buffer of its own. Only the pages a request fills
// are touched (fresh memory from the OS is not zeroed by the runtime), so
// the larger buffer costs no faults until a larger request reuses it.
// Much smaller frames (another client's) keep their own size class.
//
// A connection holds at most maxPooledFramesPerConn pooled frames at once
// (conn.frameSlots): the read loop reads the next large Produce request
// while the previous one is appended, and waits for a frame to come back
// before reading further ahead. Requests waiting behind the append of the
// same partitions would otherwise each hold a frame of fresh memory
// (measured: 5 frames of up to 12 MiB in use at once by one franz-go
// producer with 5 requests in flight). Two appends of one connection can
// still run at once (Kafka handles one request of a connection at a time),
// and requests too small for the pool are not limited.
const (
	pooledFrameMin = 64 << 10
	pooledFrameMax = 64 << 20

	framePoolMaxFree  = 8
	framePoolMaxBytes = 64 << 20
	framePoolIdle     = 10 * time.Second

	maxPooledFramesPerConn = 2
)

// framePool is a bounded free list of frame buffers. Goroutine-safe. The
// zero value is ready to use.
type framePool struct {
	mu    sync.Mutex
	free  []freeFrame
	bytes int // total capacity of free
	// trim is armed while free is not empty: it drops buffers idle for
	// framePoolIdle.
	trim *time.Timer
	// largest is the capacity of the largest buffer handed out since the
	// pool was last empty and idle; new buffers are at least this large.
	largest int
	// stats, for tests and metrics
	allocs int
	// slotTimeouts counts Produce frames read into a buffer of their own
	// because the connection's frame slots stayed taken (conn.go).
	slotTimeouts atomic.Int64
}

type freeFrame struct {
	b    *[]byte
	last time.Time // when it was put back
}

// frameSize is the capacity allocated for a frame of n bytes: a power of
// two up to 1 MiB, then whole MiB (the pages past n are never touched, but
// a reused buffer may be asked for more).
func frameSize(n int) int {
	const mib = 1 << 20
	if n > mib {
		return (n + mib - 1) / mib * mib
	}
	c := pooledFrameMin
	for c < n {
		c <<= 1
	}
	return c
}

// get returns a buffer with capacity >= n: the smallest free one that
// fits, or a new one.
func (p *framePool) get(n int) *[]byte {
	p.mu.Lock()
	best := -1
	for i, f := range p.free {
		if c := cap(*f.b); c >= n && (best < 0 || c < cap(*p.free[best].b)) {
			best = i
		}
	}
	if best >= 0 {
		b := p.free[best].b
		p.free = append(p.free[:best], p.free[best+1:]...)
		p.bytes -= cap(*b)
		p.mu.Unlock()
		return b
	}
	p.allocs++
	size := frameSize(n)
	if size < p.largest && size > p.largest/4 {
		size = p.largest
	}
	p.largest = max(p.largest, size)
	p.mu.Unlock()
	b := make([]byte, size)
	return &b
}

// put returns b, which must come from get and no longer be used, to the
// free list, evicting the smallest free buffers if the bounds require.
func (p *framePool) put(b *[]byte) {
	p.putAt(b, time.Now())
}

func (p *framePool) putAt(b *[]byte, now time.Time) {
	c := cap(*b)
	if c > framePoolMaxBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.free) >= framePoolMaxFree || p.bytes+c > framePoolMaxBytes {
		small := 0
		for i, f := range p.free {
			if cap(*f.b) < cap(*p.free[small].b) {
				small = i
			}
		}
		if cap(*p.free[small].b) > c {
			return // b is the smallest: drop it instead
		}
		p.bytes -= cap(*p.free[small].b)
		p.free = append(p.free[:small], p.free[small+1:]...)
	}
	p.free = append(p.free, freeFrame{b: b, last: now})
	p.bytes += c
	if p.trim == nil {
		p.trim = time.AfterFunc(framePoolIdle, func() { p.trimIdle(time.Now()) })
	}
}

// trimIdle drops the buffers put back before now-framePoolIdle, and
// re-arms the trim while any remain.
func (p *framePool) trimIdle(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.free[:0]
	var oldest time.Time
	for _, f := range p.free {
		if now.Sub(f.last) >= framePoolIdle {
			p.bytes -= cap(*f.b)
			continue
		}
		if len(kept) == 0 || f.last.Before(oldest) {
			oldest = f.last
		}
		kept = append(kept, f)
	}
	clear(p.free[len(kept):])
	p.free = kept
	if p.trim == nil {
		return
	}
	if len(p.free) == 0 {
		p.trim.Stop()
		p.trim = nil
		p.largest = 0
		return
	}
	p.trim.Reset(oldest.Add(framePoolIdle).Sub(now))
}
