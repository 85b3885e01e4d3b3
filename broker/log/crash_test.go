package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// crashModel tracks what the log must hold across crashes: the bytes of the
// latest batch appended at each base offset, and which were acknowledged
// durable (must survive every crash).
type crashModel struct {
	batches map[int64][]byte
	acked   map[int64]bool
}

// check reopens nothing; it verifies l against the model and then forgets
// batches at or beyond the recovered log end (they may be reused).
func (m *crashModel) check(t *testing.T, l *Log, where string) {
	t.Helper()
	leo := l.LogEndOffset()
	if hw := l.HighWatermark(); hw != leo {
		t.Fatalf("%s: after open hw %d != leo %d", where, hw, leo)
	}
	for off := range m.acked {
		if off >= leo {
			t.Fatalf("%s: acknowledged batch at %d lost (log end %d)", where, off, leo)
		}
	}
	for _, h := range readAllRaw(t, l, where) {
		want, ok := m.batches[h.off]
		if !ok {
			t.Fatalf("%s: batch at %d was never appended", where, h.off)
		}
		if !bytes.Equal(want, h.b) {
			t.Fatalf("%s: batch at %d differs from the one appended", where, h.off)
		}
	}
	for off := range m.batches {
		if off >= leo {
			delete(m.batches, off)
			delete(m.acked, off)
		}
	}
}

type rawBatch struct {
	off int64
	b   []byte
}

// readAllRaw reads every batch from the log start to the high watermark,
// checking CRC and contiguity, and returns copies.
func readAllRaw(t *testing.T, l *Log, where string) []rawBatch {
	t.Helper()
	var out []rawBatch
	off := l.LogStartOffset()
	hw := l.HighWatermark()
	for off < hw {
		r, err := l.Read(off, 32<<10, hw)
		if err != nil {
			t.Fatalf("%s: read at %d: %v", where, off, err)
		}
		if len(r.Data) == 0 {
			t.Fatalf("%s: empty read at %d < hw %d", where, off, hw)
		}
		for d := r.Data; len(d) > 0; {
			h, err := validateStored(d[:parseHeader(d).Size()])
			if err != nil {
				t.Fatalf("%s: served a bad batch at %d: %v", where, h.BaseOffset, err)
			}
			if h.LastOffset() >= off {
				if h.BaseOffset != off && len(out) > 0 {
					t.Fatalf("%s: offsets not contiguous: batch %d, expected %d", where, h.BaseOffset, off)
				}
				out = append(out, rawBatch{h.BaseOffset, bytes.Clone(d[:h.Size()])})
				off = h.LastOffset() + 1
			}
			d = d[h.Size():]
		}
		r.Release()
	}
	return out
}

// TestCrashRandom drives random appends (durable or not), syncs, clean
// reopens and crashes (strict, with torn writes, with unsynced directory
// entries) on the crashable FS, and checks after every reopen that every
// acknowledged durable batch is present and unchanged, offsets are
// contiguous, and only batches that were appended are served.
func TestCrashRandom(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashRun(t, uint64(seed)) })
	}
}

func crashRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	fs := vfs.NewCrashableMem()
	clk := newClock()
	cfg := Config{SegmentBytes: int64(2048 + rng.IntN(8192)), IndexIntervalBytes: int32(64 + rng.IntN(1024))}
	opts := func() Options {
		return Options{FS: fs, Dir: "/d/t-0", Now: clk.Now, Config: cfg, Logger: testLogger(t)}
	}
	l := mustOpen(t, opts())
	m := &crashModel{batches: map[int64][]byte{}, acked: map[int64]bool{}}
	for step := 0; step < 150; step++ {
		switch op := rng.IntN(100); {
		case op < 70:
			durable := rng.IntN(3) > 0
			b := testBatch{records: 1 + rng.IntN(5), valueSize: rng.IntN(300), firstTs: clk.Now().UnixMilli(), codec: rng.IntN(5)}.build()
			r, err := l.Append(b, durable)
			if err != nil {
				t.Fatalf("step %d: append: %v", step, err)
			}
			m.batches[r.BaseOffset] = b // b now holds the stored bytes
			if durable {
				m.acked[r.BaseOffset] = true
			}
			clk.Advance(10)
		case op < 80:
			// Several concurrent durable appenders (group commit).
			var wg sync.WaitGroup
			var mu sync.Mutex
			for range 4 {
				wg.Go(func() {
					b := testBatch{records: 2, valueSize: 50, firstTs: clk.Now().UnixMilli()}.build()
					r, err := l.Append(b, true)
					if err != nil {
						t.Errorf("concurrent append: %v", err)
						return
					}
					mu.Lock()
					m.batches[r.BaseOffset] = b
					m.acked[r.BaseOffset] = true
					mu.Unlock()
				})
			}
			wg.Wait()
		case op < 85:
			if err := l.Close(); err != nil {
				t.Fatalf("step %d: close: %v", step, err)
			}
			l = mustOpen(t, opts())
			m.check(t, l, fmt.Sprintf("seed %d step %d clean reopen", seed, step))
		case op < 88:
			if err := l.checkpoint(true); err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
		default:
			var co vfs.CrashOptions
			switch rng.IntN(3) {
			case 1:
				co = vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, uint64(step))), TornWrites: true}
			case 2:
				co = vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, uint64(step))), TornWrites: true, UnsyncedEntries: true}
			}
			crashed := fs.CrashCloneWith(co)
			l.Close() // the old FS is discarded
			fs = crashed
			l = mustOpen(t, opts())
			m.check(t, l, fmt.Sprintf("seed %d step %d crash %+v", seed, step, co.TornWrites))
		}
	}
	l.Close()
}

// TestCrashDuringConcurrentAppends takes a crash image while appenders are
// running: every append that returned before the image was taken must be in
// it.
func TestCrashDuringConcurrentAppends(t *testing.T) {
	for seed := range 5 {
		fs := vfs.NewCrashableMem()
		l := mustOpen(t, Options{FS: fs, Dir: "/d/p", Config: Config{SegmentBytes: 16 << 10}})
		var (
			mu      sync.Mutex
			acked   = map[int64][]byte{}
			crashed bool
			stop    = make(chan struct{})
			wg      sync.WaitGroup
		)
		for range 6 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					b := testBatch{records: 3, valueSize: 40}.build()
					r, err := l.Append(b, true)
					if err != nil {
						t.Errorf("append: %v", err)
						return
					}
					mu.Lock()
					if !crashed {
						acked[r.BaseOffset] = b
					}
					mu.Unlock()
				}
			})
		}
		for {
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n > 50+seed*20 {
				break
			}
			waitHW(l)
		}
		// Appends that returned before this point are in `acked`; the
		// crash image is taken after marking, so it must hold them all.
		mu.Lock()
		crashed = true
		snapshot := make(map[int64][]byte, len(acked))
		for k, v := range acked {
			snapshot[k] = v
		}
		mu.Unlock()
		img := fs.CrashCloneWith(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(seed), 1)), TornWrites: true})
		close(stop)
		wg.Wait()
		l.Close()
		l2 := mustOpen(t, Options{FS: img, Dir: "/d/p"})
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

// waitHW waits for the next high watermark change.
func waitHW(l *Log) {
	select {
	case <-l.Changed():
	case <-time.After(100 * time.Millisecond):
	}
}
