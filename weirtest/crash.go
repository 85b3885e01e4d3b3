package weirtest

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/weirhq/weir/vfs"
)

// MemStorage keeps the broker's data in memory (vfs.NewCrashableMem)
// instead of a temporary directory: no disk I/O, and CrashRestart becomes
// available. The memory file system tracks what was fsynced, so acks=all
// still means "survives a crash" within the simulation. Restart keeps the
// data (same in-memory file system).
//
// Clients reach the broker through an in-process TCP relay so that
// CrashRestart can cut every connection at the instant of the simulated
// power loss; Addr is the relay's address.
func MemStorage() Opt {
	return optionFunc(func(o *options) { o.mem = true })
}

// CrashRestart simulates a power loss and a restart, for tests of how an
// application copes with its broker crashing: every client connection is
// cut at once (no response in flight reaches its client), the broker's
// storage is replaced by exactly what had been fsynced at that instant
// (vfs.MemFS.CrashClone), and a new broker recovers from it on the same
// address. Every produce acknowledged with acks=all before the cut
// survives; anything else may be lost. Clients reconnect by themselves.
//
// It requires MemStorage and fails the test otherwise.
func (b *Broker) CrashRestart() {
	b.t.Helper()
	if b.mem == nil {
		b.t.Fatalf("weirtest: CrashRestart needs the MemStorage option")
	}
	// Order matters: cut first, so that no acknowledgement written after
	// the crash instant reaches a client; then take the durable state;
	// then dispose of the old broker (its shutdown writes go to the old,
	// discarded file system).
	b.relay.cut()
	b.mu.Lock()
	crashed := b.mem.CrashClone()
	b.mem = crashed
	b.mu.Unlock()
	_ = b.stop() // the "crashed" broker's shutdown outcome is irrelevant
	b.cfg.FS = crashed
	if err := b.start(); err != nil {
		b.t.Fatalf("weirtest: crash restart: recovery failed: %v", err)
	}
}

// MemFS is the in-memory file system holding the broker's data with
// MemStorage (nil otherwise); after CrashRestart, the recovered one.
func (b *Broker) MemFS() *vfs.MemFS {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem
}

// relay forwards client connections to the current broker and can cut them
// all at once. It is goroutine-safe.
type relay struct {
	ln net.Listener

	mu     sync.Mutex
	target string // "" while no broker is up: new connections are refused
	gen    int    // incremented by every cut
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newRelay() (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) setTarget(addr string) {
	r.mu.Lock()
	r.target = addr
	r.mu.Unlock()
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		r.mu.Lock()
		target, gen := r.target, r.gen
		r.mu.Unlock()
		if target == "" {
			c.Close() // broker between lives: the client retries
			continue
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		if !r.track(gen, c, up) {
			// A cut happened while dialing: this pair must not outlive it.
			c.Close()
			up.Close()
			continue
		}
		r.wg.Add(2)
		go r.pipe(up, c)
		go r.pipe(c, up)
	}
}

// track registers a client/broker connection pair dialed in generation
// gen; false if a cut (or close) happened since.
func (r *relay) track(gen int, cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || gen != r.gen {
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	_, _ = io.Copy(dst, src)
	// One direction ended: end the pair, as a broker or client would.
	dst.Close()
	src.Close()
	r.mu.Lock()
	delete(r.conns, dst)
	delete(r.conns, src)
	r.mu.Unlock()
}

// cut closes every relayed connection, both sides, at once, and refuses
// new ones until setTarget names the next broker.
func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target = ""
	r.gen++
	for c := range r.conns {
		// SetLinger(0): reset rather than flush what the kernel still
		// buffers, so bytes written before the cut but not yet sent do
		// not reach the client after it.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}

func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.ln.Close()
	r.cut()
	r.wg.Wait()
}
