package log

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// newSyncGate returns a gate on the fsyncs of segment (.log) files.
func newSyncGate() *errorfs.Gate {
	return errorfs.NewGate(errorfs.And(errorfs.OnOps(errorfs.OpSync), errorfs.PathMatch("*"+logSuffix)))
}

func waitEntered(t *testing.T, g *errorfs.Gate) {
	t.Helper()
	select {
	case <-g.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync started")
	}
}

// TestWaitDurableSharesOneSync: appends written while an fsync runs are
// not visible and not durable; once it finishes, one more fsync covers all
// of them, and WaitDurable returns for each.
func TestWaitDurableSharesOneSync(t *testing.T) {
	g := newSyncGate()
	l := mustOpen(t, Options{FS: errorfs.Wrap(vfs.NewCrashableMem(), g), Dir: "/d/p"})
	defer l.Close()
	ctx := context.Background()

	g.Hold()
	first := mustAppend(t, l, testBatch{records: 2}.build(), false)
	waitEntered(t, g) // the background fsync of the first append is running
	var rest []AppendResult
	for range 4 {
		rest = append(rest, mustAppend(t, l, testBatch{records: 2}.build(), false))
	}
	if hw := l.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before any fsync finished", hw)
	}
	before := g.Count()
	g.Release()
	if err := l.WaitDurable(ctx, &first); err != nil {
		t.Fatalf("wait first: %v", err)
	}
	for i := range rest {
		if err := l.WaitDurable(ctx, &rest[i]); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
	if hw := l.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d after the waits, want 10", hw)
	}
	// The four appends written during the first fsync needed one more.
	if n := g.Count() - before; n > 1 {
		t.Fatalf("%d more segment fsyncs after the first, want at most 1", n)
	}
}

// TestWaitDurableContext: a waiter gives up when its context ends while
// the fsync is stuck; the data stays appended and becomes durable and
// visible once the fsync finishes. A crash image taken after that keeps it.
func TestWaitDurableContext(t *testing.T) {
	g := newSyncGate()
	mem := vfs.NewCrashableMem()
	l := mustOpen(t, Options{FS: errorfs.Wrap(mem, g), Dir: "/d/p"})
	defer l.Close()
	g.Hold()
	r := mustAppend(t, l, testBatch{records: 3}.build(), false)
	waitEntered(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.WaitDurable(ctx, &r); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with a stuck fsync: %v, want deadline exceeded", err)
	}
	if l.LogEndOffset() != 3 || l.HighWatermark() != 0 {
		t.Fatalf("after the timeout: leo %d hw %d, want 3 0", l.LogEndOffset(), l.HighWatermark())
	}
	g.Release()
	if err := l.WaitDurable(context.Background(), &r); err != nil {
		t.Fatalf("wait after release: %v", err)
	}
	img := mem.CrashClone()
	l2 := mustOpen(t, Options{FS: img, Dir: "/d/p"})
	defer l2.Close()
	if l2.LogEndOffset() != 3 {
		t.Fatalf("after crash: leo %d, want 3", l2.LogEndOffset())
	}
}

// TestWaitDurableRollback: a failed fsync rolls back every append it did
// not cover; their waiters get ErrStorage, and appends afterwards work.
func TestWaitDurableRollback(t *testing.T) {
	g := newSyncGate()
	l := mustOpen(t, Options{FS: errorfs.Wrap(vfs.NewCrashableMem(), g), Dir: "/d/p"})
	defer l.Close()
	ok := mustAppend(t, l, testBatch{records: 1}.build(), true)
	g.Hold()
	a := mustAppend(t, l, testBatch{records: 2}.build(), false)
	waitEntered(t, g)
	b := mustAppend(t, l, testBatch{records: 2}.build(), false)
	g.FailWith(syscall.EIO)
	g.Release()
	for i, r := range []*AppendResult{&a, &b} {
		if err := l.WaitDurable(context.Background(), r); !errors.Is(err, ErrStorage) {
			t.Fatalf("wait %d after a failed fsync: %v, want ErrStorage", i, err)
		}
	}
	if err := l.WaitDurable(context.Background(), &ok); err != nil {
		t.Fatalf("wait of the durable append: %v", err)
	}
	if l.LogEndOffset() != 1 || l.HighWatermark() != 1 {
		t.Fatalf("after rollback: leo %d hw %d, want 1 1", l.LogEndOffset(), l.HighWatermark())
	}
	g.FailWith(nil)
	c := mustAppend(t, l, testBatch{records: 2}.build(), false)
	if c.BaseOffset != 1 {
		t.Fatalf("append after rollback at %d, want 1", c.BaseOffset)
	}
	if err := l.WaitDurable(context.Background(), &c); err != nil {
		t.Fatalf("wait after rollback: %v", err)
	}
}

// TestWaitDurableClose: Close syncs what was written, so a waiter on
// written data returns nil or ErrClosed, never hangs; a later reopen
// has the data.
func TestWaitDurableClose(t *testing.T) {
	mem := vfs.NewCrashableMem()
	g := newSyncGate()
	l := mustOpen(t, Options{FS: errorfs.Wrap(mem, g), Dir: "/d/p"})
	g.Hold()
	r := mustAppend(t, l, testBatch{records: 2}.build(), false)
	waitEntered(t, g)
	errc := make(chan error, 1)
	go func() { errc <- l.WaitDurable(context.Background(), &r) }()
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	g.Release()
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("wait across close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter hung across Close")
	}
	l2 := mustOpen(t, Options{FS: mem.CrashClone(), Dir: "/d/p"})
	defer l2.Close()
	if l2.LogEndOffset() != 2 {
		t.Fatalf("reopened leo %d, want 2", l2.LogEndOffset())
	}
}

// TestWaitDurableSyncInterval: under SyncInterval nothing waits.
func TestWaitDurableSyncInterval(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/d/p", Sync: SyncInterval, SyncInterval: time.Hour})
	defer l.Close()
	r := mustAppend(t, l, testBatch{records: 1}.build(), false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.WaitDurable(ctx, &r); err != nil {
		t.Fatalf("wait under SyncInterval: %v", err)
	}
}

// TestCrashDuringSplitAppends: writers append two batches without waiting,
// then wait for both (as a connection with pipelined requests does), while
// segments roll. A crash image taken while they run holds every batch
// whose WaitDurable had returned nil before it was taken.
func TestCrashDuringSplitAppends(t *testing.T) {
	for seed := range 4 {
		fs := vfs.NewCrashableMem()
		l := mustOpen(t, Options{FS: fs, Dir: "/d/p", Config: Config{SegmentBytes: 2 << 10}})
		var (
			mu      sync.Mutex
			acked   = map[int64][]byte{}
			crashed bool
			stop    = make(chan struct{})
			wg      sync.WaitGroup
		)
		for range 4 {
			wg.Go(func() {
				ctx := context.Background()
				for {
					select {
					case <-stop:
						return
					default:
					}
					var bs [2][]byte
					var rs [2]AppendResult
					for i := range bs {
						bs[i] = testBatch{records: 2, valueSize: 60}.build()
						r, err := l.Append(bs[i], false)
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
						rs[i] = r
					}
					for i := range rs {
						if err := l.WaitDurable(ctx, &rs[i]); err != nil {
							if errors.Is(err, ErrClosed) {
								return
							}
							t.Errorf("wait: %v", err)
							return
						}
					}
					mu.Lock()
					if !crashed {
						for i := range rs {
							acked[rs[i].BaseOffset] = bs[i]
						}
					}
					mu.Unlock()
				}
			})
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n > 60+seed*20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d: only %d batches acknowledged", seed, n)
			}
			waitHW(l)
		}
		mu.Lock()
		crashed = true
		snapshot := make(map[int64][]byte, len(acked))
		for k, v := range acked {
			snapshot[k] = v
		}
		mu.Unlock()
		img := fs.CrashCloneWith(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(seed), 7)), TornWrites: true})
		close(stop)
		wg.Wait()
		l.Close()
		l2 := mustOpen(t, Options{FS: img, Dir: "/d/p"})
		if n := len(l2.segments()); n < 3 {
			t.Fatalf("seed %d: %d segments after crash, want rolls during the run", seed, n)
		}
		got := map[int64][]byte{}
		for _, b := range readAllRaw(t, l2, "after crash") {
			got[b.off] = b.b
		}
		for off, b := range snapshot {
			if !bytes.Equal(got[off], b) {
				t.Fatalf("seed %d: acknowledged batch %d missing or different after crash", seed, off)
			}
		}
		l2.Close()
	}
}
