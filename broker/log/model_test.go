package log

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weirhq/weir/vfs"
)

// modelRec is one record of the reference model.
type modelRec struct{ off, ts int64 }

// TestModelRandom compares reads and lookups against a brute-force model
// over random appends (in- and out-of-order timestamps, some without
// timestamps), random configs, DeleteRecords, retention, index unloading,
// clean reopens and crash reopens.
func TestModelRandom(t *testing.T) {
	for seed := range 30 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { modelRun(t, uint64(seed)) })
	}
}

func modelRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	mem := vfs.NewCrashableMem()
	clk := newClock()
	cfg := Config{SegmentBytes: int64(400 + rng.IntN(4000)), IndexIntervalBytes: int32(1 + rng.IntN(2000)), RetentionMs: -1}
	open := func(fs vfs.FS) *Log {
		return mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg, Now: clk.Now})
	}
	l := open(mem)
	defer func() { l.Close() }()
	var recs []modelRec
	batchOf := map[int64][2]int64{} // record offset -> batch base, last
	for step := 0; step < 300; step++ {
		hw := l.HighWatermark()
		ls := l.LogStartOffset()
		switch op := rng.IntN(100); {
		case op < 45:
			n := 1 + rng.IntN(5)
			first := int64(rng.IntN(10000))
			stepTs := int64(rng.IntN(200)) - 50
			if rng.IntN(10) == 0 {
				first, stepTs = -1, 0
			}
			if first+stepTs*int64(n) < 0 {
				stepTs = 0
			}
			r := mustAppend(t, l, testBatch{records: n, valueSize: rng.IntN(200), firstTs: first, tsStep: stepTs}.build(), rng.IntN(5) > 0)
			for i := 0; i < n; i++ {
				recs = append(recs, modelRec{r.BaseOffset + int64(i), first + stepTs*int64(i)})
				batchOf[r.BaseOffset+int64(i)] = [2]int64{r.BaseOffset, r.LastOffset}
			}
			if rng.IntN(3) == 0 {
				waitHWAtLeast(t, l, r.LastOffset+1)
			}
		case op < 65:
			if hw == ls {
				continue
			}
			off := ls + rng.Int64N(hw-ls+1)
			upTo := off + rng.Int64N(hw-off+1)
			maxBytes := rng.IntN(3000)
			res, err := l.Read(off, maxBytes, upTo)
			if err != nil {
				t.Fatalf("step %d: read %d: %v", step, off, err)
			}
			checkRead(t, res.Data, off, upTo, maxBytes, batchOf)
			res.Release()
		case op < 80:
			ts := int64(rng.IntN(10500))
			gotOff, gotTs, err := l.OffsetForTimestamp(ts)
			if err != nil {
				t.Fatal(err)
			}
			wantOff, wantTs := int64(-1), int64(-1)
			for _, r := range recs {
				if r.off >= ls && r.off < hw && r.ts >= ts {
					wantOff, wantTs = r.off, r.ts
					break
				}
			}
			if gotOff != wantOff || gotTs != wantTs {
				t.Fatalf("step %d: OffsetForTimestamp(%d) = %d,%d want %d,%d", step, ts, gotOff, gotTs, wantOff, wantTs)
			}
		case op < 85:
			segs := l.segments()
			if ls != segs[0].base {
				continue // the max counts whole segments; compare only then
			}
			gotOff, gotTs := l.MaxTimestamp()
			wantOff, wantTs := int64(-1), int64(-1)
			for _, r := range recs {
				if r.off >= ls && r.off < hw && r.ts > wantTs {
					wantOff, wantTs = r.off, r.ts
				}
			}
			if gotOff != wantOff || gotTs != wantTs {
				t.Fatalf("step %d: MaxTimestamp = %d,%d want %d,%d", step, gotOff, gotTs, wantOff, wantTs)
			}
		case op < 88:
			if hw > ls {
				if _, err := l.DeleteRecords(ls + rng.Int64N(min(hw-ls, 5)+1)); err != nil {
					t.Fatal(err)
				}
			}
		case op < 90:
			l.SetConfig(Config{SegmentBytes: cfg.SegmentBytes, IndexIntervalBytes: cfg.IndexIntervalBytes, RetentionMs: -1, RetentionBytes: int64(rng.IntN(20000))})
			if _, err := l.ApplyRetention(); err != nil {
				t.Fatal(err)
			}
			l.SetConfig(cfg)
		case op < 93:
			l.indexBudget = rng.IntN(2000)
			l.unloadIndexes()
		case op < 96:
			l.Close()
			l = open(mem)
		default:
			waitHWAtLeast(t, l, l.LogEndOffset())
			img := mem.CrashClone()
			l.Close()
			mem = img
			l = open(mem)
		}
		if l.HighWatermark() > l.LogEndOffset() || l.LogStartOffset() > l.HighWatermark() {
			t.Fatalf("step %d: ls %d hw %d leo %d", step, l.LogStartOffset(), l.HighWatermark(), l.LogEndOffset())
		}
	}
}

// checkRead checks a Read result against the batch boundaries of the model.
func checkRead(t *testing.T, d []byte, off, upTo int64, maxBytes int, batchOf map[int64][2]int64) {
	t.Helper()
	if off >= upTo {
		if len(d) != 0 {
			t.Fatalf("read at %d with upTo %d returned %d bytes", off, upTo, len(d))
		}
		return
	}
	if len(d) == 0 {
		t.Fatalf("read at %d (upTo %d) returned nothing", off, upTo)
	}
	first := true
	next := int64(0)
	n := 0
	for len(d) > 0 {
		h, err := validateStored(d[:parseHeader(d).Size()])
		if err != nil {
			t.Fatalf("bad batch: %v", err)
		}
		b := batchOf[h.BaseOffset]
		if b[0] != h.BaseOffset || b[1] != h.LastOffset() {
			t.Fatalf("batch %d-%d not a model batch %v", h.BaseOffset, h.LastOffset(), b)
		}
		if first {
			if h.BaseOffset > off || h.LastOffset() < off {
				t.Fatalf("first batch %d-%d does not contain %d", h.BaseOffset, h.LastOffset(), off)
			}
		} else if h.BaseOffset != next {
			t.Fatalf("gap: %d after %d", h.BaseOffset, next)
		}
		if h.BaseOffset >= upTo {
			t.Fatalf("batch %d at or beyond upTo %d", h.BaseOffset, upTo)
		}
		next = h.LastOffset() + 1
		n++
		first = false
		d = d[h.Size():]
	}
	_ = n
	_ = maxBytes
}
