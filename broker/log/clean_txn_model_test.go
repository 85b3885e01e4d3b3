package log

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// committedView reads l as a read_committed consumer does: data batches up
// to the last stable offset, dropping those of transactions listed by
// AbortedTransactions for the range read (the list the Fetch response
// carries), and returns the latest value per key (nil: tombstone).
func committedView(t testing.TB, l *Log) map[string]*string {
	t.Helper()
	out := map[string]*string{}
	upTo := l.LastStableOffset()
	aborted := l.AbortedTransactions(l.LogStartOffset(), upTo)
	isAborted := func(h *batchHeader) bool {
		if h.Attributes&attrTransactional == 0 || h.Attributes&attrControl != 0 {
			return false
		}
		for _, a := range aborted {
			if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset < a.LastOffset {
				return true
			}
		}
		return false
	}
	off := l.LogStartOffset()
	for off < upTo {
		rr, err := l.Read(off, 1<<20, upTo)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(rr.Data) == 0 {
			rr.Release()
			break
		}
		for b := rr.Data; len(b) > 0; {
			h := parseHeader(b)
			batch := b[:h.Size()]
			b = b[h.Size():]
			if h.LastOffset() < off {
				continue
			}
			off = h.LastOffset() + 1
			if h.Attributes&attrControl != 0 || isAborted(&h) {
				continue
			}
			err := forEachRecord(batch, h, &l.codecs, func(body []byte) error {
				r, ok := parseRecordBody(body)
				if !ok {
					return errors.New("bad record")
				}
				if r.valueNull {
					out[string(r.key)] = nil
				} else {
					v := string(recordValue(body))
					out[string(r.key)] = &v
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		rr.Release()
	}
	return out
}

// TestCleanTxnModel: random transactional (committed and aborted) and plain
// writes with tombstones, cleans, clock advances and reopens, against a
// model of the committed state: a read_committed reader always sees exactly
// the latest committed value of each key (so no aborted-index entry was
// pruned while its data could still be read), the log never has an open
// transaction after all ended, and the markers and index entries shrink
// once the transactions' data is superseded.
func TestCleanTxnModel(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 7))
		clk := newClock()
		fs := vfs.NewCrashableMem()
		cfg := compactCfg()
		cfg.SegmentBytes = int64(300 + rng.IntN(500))
		cfg.DeleteRetentionMs = int64(rng.IntN(3)) * int64(5*time.Minute/time.Millisecond)
		if cfg.DeleteRetentionMs == 0 {
			cfg.DeleteRetentionMs = -1
		}
		open := func() *Log { return mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg, Now: clk.Now}) }
		l := open()
		model := map[string]*string{}
		seqs := map[int64]int32{}
		maxMarkers := 0
		for step := range 500 {
			switch op := rng.IntN(20); {
			case op < 8: // a transaction of producer 1..3: one or two batches, then a marker
				pid := int64(1 + rng.IntN(3))
				commit := rng.IntN(3) != 0
				staged := map[string]*string{}
				for range 1 + rng.IntN(2) {
					var recs []kv
					for range 1 + rng.IntN(3) {
						k := fmt.Sprint("k", rng.IntN(12))
						v := fmt.Sprint("t", seed, "-", step, "-", rng.IntN(100))
						recs = append(recs, kv{k, &v})
						staged[k] = &v
					}
					mustAppend(t, l, kvBatch(testBatch{producerID: pid, seq: seqs[pid], txn: true, firstTs: clk.Now().UnixMilli()}, recs...), true)
					seqs[pid] += int32(len(recs))
				}
				mustAppend(t, l, markerBatch(pid, 0, commit, 1), true)
				if commit {
					for k, v := range staged {
						model[k] = v
					}
				}
			case op < 14: // plain writes and tombstones
				var recs []kv
				for range 1 + rng.IntN(4) {
					k := fmt.Sprint("k", rng.IntN(12))
					if rng.IntN(5) == 0 {
						recs = append(recs, kv{k, nil})
						model[k] = nil
					} else {
						v := fmt.Sprint("p", seed, "-", step, "-", rng.IntN(100))
						recs = append(recs, kv{k, &v})
						model[k] = &v
					}
				}
				mustAppend(t, l, kvBatch(testBatch{firstTs: clk.Now().UnixMilli()}, recs...), true)
			case op < 17:
				if _, err := l.Clean(CleanOptions{Force: rng.IntN(2) == 0}); err != nil {
					t.Fatalf("seed %d step %d: clean: %v", seed, step, err)
				}
			case op < 18:
				l.Close()
				l = open()
			default:
				clk.Advance(time.Duration(rng.IntN(4)) * time.Minute)
			}
			if l.LastStableOffset() != l.HighWatermark() {
				t.Fatalf("seed %d step %d: LSO %d < HW %d with every transaction ended", seed, step, l.LastStableOffset(), l.HighWatermark())
			}
			if step%25 == 24 {
				got := committedView(t, l)
				for k, want := range model {
					g, ok := got[k]
					switch {
					case want == nil && ok && g != nil:
						t.Fatalf("seed %d step %d: deleted key %s reads %q", seed, step, k, *g)
					case want != nil && (!ok || g == nil || *g != *want):
						t.Fatalf("seed %d step %d: key %s reads %v, want %q", seed, step, k, g, *want)
					}
				}
				maxMarkers = max(maxMarkers, len(controlBatches(t, l)))
			}
		}
		// Everything superseded by plain writes, then passes 6 minutes
		// apart: the data goes, the markers are stamped, and once past
		// delete.retention.ms (at most 10 minutes) removed.
		for i := range 12 {
			v := fmt.Sprint("final", i)
			mustAppend(t, l, kvBatch(testBatch{}, kv{fmt.Sprint("k", i), &v}), true)
		}
		for _, pid := range []int64{1, 2, 3} { // each producer's last batch is plain now
			mustAppend(t, l, kvBatch(testBatch{producerID: pid, seq: seqs[pid]}, kv{"z", val("z")}), true)
			seqs[pid]++
		}
		for range 5 {
			fillSegments(t, l, "f")
			clk.Advance(6 * time.Minute)
			if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(controlBatches(t, l)); n != 0 {
			off := l.LogStartOffset()
			for off < l.HighWatermark() {
				rr, err := l.Read(off, 1<<20, l.HighWatermark())
				if err != nil || len(rr.Data) == 0 {
					break
				}
				for b := rr.Data; len(b) > 0; {
					h := parseHeader(b)
					b = b[h.Size():]
					if h.LastOffset() >= off {
						if h.ProducerID >= 0 {
							t.Logf("batch %d-%d pid %d attrs %x n %d", h.BaseOffset, h.LastOffset(), h.ProducerID, h.Attributes, h.NumRecords)
						}
						off = h.LastOffset() + 1
					}
				}
				rr.Release()
			}
			t.Logf("producers %+v", l.Producers())
			t.Fatalf("seed %d: %d markers left after every transaction's data was superseded (max seen %d)", seed, n, maxMarkers)
		}
		if a := l.AbortedTransactions(0, l.HighWatermark()); len(a) != 0 {
			t.Fatalf("seed %d: aborted entries left: %v", seed, a)
		}
		l.Close()
	}
}
