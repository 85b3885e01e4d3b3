package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// powerCut is an injector that, at the n-th file system operation, takes a
// crash image of the underlying MemFS (the state a power cut at that moment
// leaves, with torn writes) and fails every operation from then on.
type powerCut struct {
	mu    sync.Mutex
	mem   *vfs.MemFS
	n     int
	seen  int
	img   *vfs.MemFS
	rng   *rand.Rand
	torn  bool
	after bool
}

func (p *powerCut) MaybeError(op errorfs.Op) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.after {
		return syscall.EIO
	}
	p.seen++
	if p.seen == p.n {
		p.img = p.mem.CrashCloneWith(vfs.CrashOptions{Rand: p.rng, TornWrites: p.torn, UnsyncedEntries: p.torn})
		p.after = true
		return syscall.EIO
	}
	return nil
}

// crashWorkload runs a fixed workload: durable appends with rolls, forced
// checkpoints, DeleteRecords, retention, a clean close and reopen. It
// records what was acknowledged and stops at the first error from Open.
type crashWorkload struct {
	batches  map[int64][][]byte // every batch that may be at an offset
	acked    map[int64]bool
	logStart int64
}

func (w *crashWorkload) run(fs vfs.FS, clk *fakeClock) {
	cfg := Config{SegmentBytes: 1200, IndexIntervalBytes: 200, RetentionMs: int64(time.Hour / time.Millisecond)}
	l, err := Open(Options{FS: fs, Dir: "/d/p", Config: cfg, Now: clk.Now})
	if err != nil {
		return
	}
	for i := 0; i < 40; i++ {
		b := testBatch{records: 1 + i%4, valueSize: 80, firstTs: clk.Now().UnixMilli()}.build()
		binary.BigEndian.PutUint64(b, ^uint64(0)) // base -1: set by Append before it writes
		r, err := l.Append(b, true)
		if err == nil {
			w.acked[r.BaseOffset] = true
		}
		if off := parseHeader(b).BaseOffset; off >= 0 {
			// A failed append may still be on disk after a crash (it
			// was written, its fsync failed and the power went before
			// the rollback): the client sees an error and retries.
			w.batches[off] = append(w.batches[off], b)
		}
		clk.Advance(5 * time.Minute)
		switch i {
		case 10, 25:
			l.checkpoint(true)
		case 15:
			if ls, err := l.DeleteRecords(7); err == nil {
				w.logStart = ls
			}
		case 20:
			l.ApplyRetention()
		case 30:
			l.Close()
			if l, err = Open(Options{FS: fs, Dir: "/d/p", Config: cfg, Now: clk.Now}); err != nil {
				return
			}
		}
	}
	l.Close()
}

// TestPowerCutAtEveryOperation cuts power before each file system operation
// of the workload in turn (strict and torn/unsynced-entry images) and checks
// the image reopens with every acknowledged batch, offsets contiguous, only
// appended batches served, and the acknowledged log start kept.
func TestPowerCutAtEveryOperation(t *testing.T) {
	// Count the operations of an uncut run.
	counter := &powerCut{mem: vfs.NewCrashableMem(), n: -1}
	counter.mem.MkdirAll("/d", 0o755)
	(&crashWorkload{batches: map[int64][][]byte{}, acked: map[int64]bool{}}).run(errorfs.Wrap(counter.mem, counter), newClock())
	total := counter.seen
	if total < 100 {
		t.Fatalf("workload did only %d operations", total)
	}
	step := 1
	if testing.Short() {
		step = 7
	}
	for n := 1; n <= total+1; n += step {
		for _, torn := range []bool{false, true} {
			mem := vfs.NewCrashableMem()
			pc := &powerCut{mem: mem, n: n, torn: torn, rng: rand.New(rand.NewPCG(uint64(n), 3))}
			w := &crashWorkload{batches: map[int64][][]byte{}, acked: map[int64]bool{}}
			w.run(errorfs.Wrap(mem, pc), newClock())
			img := pc.img
			if img == nil {
				img = mem.CrashClone()
			}
			where := fmt.Sprintf("cut at op %d/%d torn=%v", n, total, torn)
			l, err := Open(Options{FS: img, Dir: "/d/p", Logger: testLogger(t)})
			if err != nil {
				t.Fatalf("%s: reopen: %v", where, err)
			}
			if l.LogStartOffset() < w.logStart {
				t.Fatalf("%s: log start %d below acknowledged %d", where, l.LogStartOffset(), w.logStart)
			}
			got := map[int64][]byte{}
			for _, b := range readAllRaw(t, l, where) {
				got[b.off] = b.b
				if !slices.ContainsFunc(w.batches[b.off], func(c []byte) bool { return bytes.Equal(c, b.b) }) {
					t.Fatalf("%s: served batch %d that was not appended", where, b.off)
				}
			}
			for off := range w.acked {
				if off >= l.LogStartOffset() && got[off] == nil {
					t.Fatalf("%s: acknowledged batch %d lost (log %d..%d)", where, off, l.LogStartOffset(), l.LogEndOffset())
				}
			}
			// The recovered log accepts appends.
			if _, err := l.Append(testBatch{records: 1}.build(), true); err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("%s: append after recovery: %v", where, err)
			}
			l.Close()
		}
	}
}

// cutRun runs run once on a crash clone of mem, counting its file
// operations, and returns the image it leaves and the count.
func cutRun(mem *vfs.MemFS, run func(vfs.FS)) (*vfs.MemFS, int) {
	counter := &powerCut{mem: mem.CrashClone(), n: -1}
	run(errorfs.Wrap(counter.mem, counter))
	return counter.mem.CrashClone(), counter.seen
}

// eachPowerCut reruns run on a crash clone of mem with a power cut before
// each of its ops file operations (and one past the last), plain and with a
// torn last write, and calls check with the image each cut leaves.
func eachPowerCut(mem *vfs.MemFS, ops int, seed uint64, run func(vfs.FS), check func(img *vfs.MemFS, where string)) {
	for n := 1; n <= ops+1; n++ {
		for _, torn := range []bool{false, true} {
			m := mem.CrashClone()
			pc := &powerCut{mem: m, n: n, torn: torn, rng: rand.New(rand.NewPCG(uint64(n), seed))}
			run(errorfs.Wrap(m, pc))
			img := pc.img
			if img == nil {
				img = m.CrashClone()
			}
			check(img, fmt.Sprintf("cut at op %d/%d torn=%v", n, ops, torn))
		}
	}
}
