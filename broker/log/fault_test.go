package log

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// TestDiskFullOnWrite: ENOSPC on the segment write (whole and partial)
// fails the append with ErrStorage, leaves the log readable and unchanged,
// and appends succeed again once space returns; a crash afterwards keeps
// every acknowledged batch.
func TestDiskFullOnWrite(t *testing.T) {
	for _, partial := range []bool{false, true} {
		mem := vfs.NewCrashableMem()
		var inj errorfs.Injector = errorfs.FailIf(errorfs.And(errorfs.OnOps(errorfs.OpWrite), errorfs.PathMatch("*.log")), syscall.ENOSPC)
		if partial {
			inj = errorfs.FailIf(errorfs.And(errorfs.OnOps(errorfs.OpWrite), errorfs.PathMatch("*.log")), errorfs.Partial(70, syscall.ENOSPC))
		}
		tog := errorfs.NewToggle(inj)
		fs := errorfs.Wrap(mem, tog)
		l := mustOpen(t, Options{FS: fs, Dir: "/d/p"})
		var acked [][]byte
		for range 5 {
			b := testBatch{records: 2, valueSize: 100}.build()
			mustAppend(t, l, b, true)
			acked = append(acked, b)
		}
		hw, size := l.HighWatermark(), l.Size()
		tog.On()
		for range 3 {
			_, err := l.Append(testBatch{records: 2, valueSize: 100}.build(), true)
			if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("partial=%v: append on full disk: %v", partial, err)
			}
		}
		if l.HighWatermark() != hw || l.LogEndOffset() != hw || l.Size() != size {
			t.Fatalf("partial=%v: failed appends changed the log: hw %d leo %d size %d, want %d %d", partial, l.HighWatermark(), l.LogEndOffset(), l.Size(), hw, size)
		}
		if got := readAllRaw(t, l, "while full"); len(got) != 5 {
			t.Fatalf("read %d batches while disk full", len(got))
		}
		tog.Off()
		b := testBatch{records: 2, valueSize: 100}.build()
		r := mustAppend(t, l, b, true)
		if r.BaseOffset != hw {
			t.Fatalf("append after space returned at %d, want %d", r.BaseOffset, hw)
		}
		acked = append(acked, b)
		img := mem.CrashClone()
		l.Close()
		l2 := mustOpen(t, Options{FS: img, Dir: "/d/p"})
		got := readAllRaw(t, l2, "after crash")
		if len(got) != len(acked) {
			t.Fatalf("partial=%v: %d batches after crash, want %d", partial, len(got), len(acked))
		}
		for i := range got {
			if string(got[i].b) != string(acked[i]) {
				t.Fatalf("batch %d differs after crash", i)
			}
		}
		l2.Close()
	}
}

// TestSyncFailure: EIO on fsync fails every durable append it covered with
// ErrStorage, rolls back the unsynced appends (never visible to readers),
// and the log recovers when fsync works again.
func TestSyncFailure(t *testing.T) {
	mem := vfs.NewCrashableMem()
	tog := errorfs.NewToggle(errorfs.FailIf(errorfs.And(errorfs.OnOps(errorfs.OpSync), errorfs.PathMatch("*.log")), syscall.EIO))
	fs := errorfs.Wrap(mem, tog)
	l := mustOpen(t, Options{FS: fs, Dir: "/d/p"})
	defer l.Close()
	for range 3 {
		mustAppend(t, l, testBatch{records: 1}.build(), true)
	}
	hw := l.HighWatermark()
	tog.On()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = l.Append(testBatch{records: 1, valueSize: 10}.build(), true)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("appender %d: %v", i, err)
		}
	}
	if l.HighWatermark() != hw || l.LogEndOffset() != hw {
		t.Fatalf("after failed syncs: hw %d leo %d, want %d", l.HighWatermark(), l.LogEndOffset(), hw)
	}
	tog.Off()
	r := mustAppend(t, l, testBatch{records: 1}.build(), true)
	if r.BaseOffset != hw || l.HighWatermark() != hw+1 {
		t.Fatalf("after recovery: base %d hw %d", r.BaseOffset, l.HighWatermark())
	}
	if got := readAllRaw(t, l, "after"); len(got) != 4 {
		t.Fatalf("%d batches, want 4", len(got))
	}
}

// TestRandomFaults injects ENOSPC/EIO at random into every kind of
// operation while appending, then crashes; acknowledged batches survive and
// the log reopens.
func TestRandomFaults(t *testing.T) {
	for seed := range 20 {
		mem := vfs.NewCrashableMem()
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		var mu sync.Mutex
		on := false
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			mu.Lock()
			defer mu.Unlock()
			if !on || rng.IntN(8) != 0 {
				return nil
			}
			if op.Kind == errorfs.OpWrite && rng.IntN(2) == 0 {
				return errorfs.Partial(rng.IntN(100), syscall.ENOSPC)
			}
			if rng.IntN(2) == 0 {
				return syscall.EIO
			}
			return syscall.ENOSPC
		})
		fs := errorfs.Wrap(mem, inj)
		cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 100}
		l := mustOpen(t, Options{FS: fs, Dir: "/d/p", Config: cfg, Logger: testLogger(t).With("seed", seed)})
		mu.Lock()
		on = true
		mu.Unlock()
		acked := map[int64][]byte{}
		for i := 0; i < 200; i++ {
			b := testBatch{records: 1 + i%3, valueSize: 60}.build()
			r, err := l.Append(b, true)
			if err != nil {
				if !errors.Is(err, ErrStorage) {
					t.Fatalf("seed %d: append error not ErrStorage: %v", seed, err)
				}
				continue
			}
			acked[r.BaseOffset] = b
			if i%50 == 0 {
				_ = l.checkpoint(true)
			}
		}
		mu.Lock()
		on = false
		mu.Unlock()
		// Readable while it all happened, and now.
		readAllRaw(t, l, "live")
		img := mem.CrashCloneWith(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(seed), 9)), TornWrites: true})
		l.Close()
		l2 := mustOpen(t, Options{FS: img, Dir: "/d/p", Config: cfg, Logger: testLogger(t).With("seed", seed, "after", "crash")})
		got := map[int64][]byte{}
		for _, b := range readAllRaw(t, l2, "after crash") {
			got[b.off] = b.b
		}
		for off, b := range acked {
			if string(got[off]) != string(b) {
				t.Fatalf("seed %d: acknowledged batch %d lost or changed", seed, off)
			}
		}
		l2.Close()
	}
}

// TestReadersDuringRollbacks: readers running while fsyncs fail and appends
// are rolled back never see an error or a batch that is not durable.
func TestReadersDuringRollbacks(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var n atomic.Int64
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpSync && strings.HasSuffix(op.Path, ".log") && n.Add(1)%3 == 0 {
			return syscall.EIO
		}
		return nil
	})
	l := mustOpen(t, Options{FS: errorfs.Wrap(mem, inj), Dir: "/p", Config: Config{SegmentBytes: 3000}})
	defer l.Close()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				hw := l.HighWatermark()
				off := l.LogStartOffset()
				for off < hw {
					r, err := l.Read(off, 700, hw)
					if err != nil {
						t.Errorf("read %d (hw %d): %v", off, hw, err)
						return
					}
					for d := r.Data; len(d) > 0; {
						h, err := validateStored(d[:parseHeader(d).Size()])
						if err != nil {
							t.Errorf("bad batch: %v", err)
							return
						}
						off = h.LastOffset() + 1
						d = d[h.Size():]
					}
					r.Release()
				}
			}
		})
	}
	var writers sync.WaitGroup
	for range 3 {
		writers.Go(func() {
			for i := 0; i < 100; i++ {
				_, err := l.Append(testBatch{records: 2, valueSize: 80}.build(), i%4 != 0)
				if err != nil && !errors.Is(err, ErrStorage) {
					t.Errorf("append: %v", err)
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
}

// TestGroupCommitSharesFsync: 16 durable appenders waiting behind one
// fsync are all covered by the next single fsync.
func TestGroupCommitSharesFsync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var l *Log
	var syncs atomic.Int64
	var ready atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind != errorfs.OpSync || !strings.HasSuffix(op.Path, ".log") || !ready.Load() {
			return nil
		}
		if syncs.Add(1) == 1 {
			// Hold the first fsync until every appender has written.
			deadline := time.Now().Add(10 * time.Second)
			for l.LogEndOffset() < 16 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		return nil
	})
	l = mustOpen(t, Options{FS: errorfs.Wrap(mem, inj), Dir: "/p"})
	defer l.Close()
	ready.Store(true)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := l.Append(testBatch{records: 1}.build(), true); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// The held fsync covers the appends written before it started (at
	// least the first); all others share the next one.
	if n := syncs.Load(); n < 1 || n > 2 {
		t.Fatalf("16 durable appends took %d fsyncs, want 1 or 2", n)
	}
	if l.HighWatermark() != 16 {
		t.Fatalf("hw %d", l.HighWatermark())
	}
}
