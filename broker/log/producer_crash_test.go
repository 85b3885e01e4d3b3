package log

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// psWorkload appends idempotent and transactional batches and markers with
// segment rolls, checkpoints and a clean reopen; it remembers each
// producer's last acknowledged data batch.
type psWorkload struct {
	lastAcked map[int64]struct {
		off int64
		b   []byte
	}
}

func (w *psWorkload) run(fs vfs.FS, clk *fakeClock) {
	cfg := Config{SegmentBytes: 900, IndexIntervalBytes: 200}
	l, err := Open(Options{FS: fs, Dir: "/d/p", Config: cfg, Now: clk.Now})
	if err != nil {
		return
	}
	seq := map[int64]int32{}
	for i := range 45 {
		pid := int64(1 + i%3)
		var b []byte
		if i%5 == 4 && pid != 1 {
			b = markerBatch(pid, 0, i%2 == 0, 0)
		} else {
			b = pb(pid, 0, seq[pid], 1+i%2, pid != 1)
		}
		r, err := l.Append(append([]byte(nil), b...), true)
		if err == nil && !r.Duplicate && parseHeader(b).Attributes&attrControl == 0 {
			seq[pid] += int32(1 + i%2)
			w.lastAcked[pid] = struct {
				off int64
				b   []byte
			}{r.BaseOffset, b}
		}
		clk.Advance(time.Second)
		switch i {
		case 12, 30:
			l.checkpoint(true)
		case 22:
			l.Close()
			if l, err = Open(Options{FS: fs, Dir: "/d/p", Config: cfg, Now: clk.Now}); err != nil {
				return
			}
		}
	}
	l.Close()
}

// TestPowerCutProducerState cuts power before each file system operation of
// a producer workload (strict and torn images) and checks that the
// recovered producer state (sequences, ongoing transactions, LSO, aborted
// index) equals a full replay of the recovered log (snapshots and .txnindex
// files removed), and that retrying each producer's last acknowledged
// batch is answered as a duplicate with its original offset.
func TestPowerCutProducerState(t *testing.T) {
	counter := &powerCut{mem: vfs.NewCrashableMem(), n: -1}
	counter.mem.MkdirAll("/d", 0o755)
	(&psWorkload{lastAcked: map[int64]struct {
		off int64
		b   []byte
	}{}}).run(errorfs.Wrap(counter.mem, counter), newClock())
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
			pc := &powerCut{mem: mem, n: n, torn: torn, rng: rand.New(rand.NewPCG(uint64(n), 5))}
			w := &psWorkload{lastAcked: map[int64]struct {
				off int64
				b   []byte
			}{}}
			w.run(errorfs.Wrap(mem, pc), newClock())
			img := pc.img
			if img == nil {
				img = mem.CrashClone()
			}
			where := fmt.Sprintf("cut at op %d/%d torn=%v", n, total, torn)
			full := img.CrashClone() // the same image, for the full replay
			l, err := Open(Options{FS: img, Dir: "/d/p", Logger: testLogger(t)})
			if err != nil {
				t.Fatalf("%s: reopen: %v", where, err)
			}
			got := viewOf(l)
			names, _ := full.List("/d/p")
			for _, nm := range names {
				if strings.HasSuffix(nm, snapshotSuffix) || strings.HasSuffix(nm, txnIndexSuffix) {
					full.Remove(filepath.Join("/d/p", nm))
				}
			}
			lf, err := Open(Options{FS: full, Dir: "/d/p", Logger: testLogger(t)})
			if err != nil {
				t.Fatalf("%s: reopen for full replay: %v", where, err)
			}
			if want := viewOf(lf); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: recovered state differs from a full replay:\n got %+v\nwant %+v", where, got, want)
			}
			lf.Close()
			for pid, a := range w.lastAcked {
				r, err := l.Append(append([]byte(nil), a.b...), true)
				if err != nil || !r.Duplicate || r.BaseOffset != a.off {
					t.Fatalf("%s: retry of producer %d's last acknowledged batch (offset %d): %+v, %v", where, pid, a.off, r, err)
				}
			}
			l.Close()
		}
	}
}
