package log

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// pb builds a data batch of producer pid (epoch, seq, records).
func pb(pid int64, epoch int16, seq int32, records int, txn bool) []byte {
	return testBatch{records: records, valueSize: 10, producerID: pid, epoch: epoch, seq: seq, txn: txn}.build()
}

func appendErr(t *testing.T, l *Log, b []byte, want error) {
	t.Helper()
	if _, err := l.Append(b, true); !errors.Is(err, want) {
		t.Fatalf("append: got %v, want %v", err, want)
	}
}

// TestIdempotence: duplicates are answered with the original offsets and
// append nothing, gaps and stale epochs are refused, a new epoch starts at
// 0, an unknown producer is accepted at any sequence (KIP-360).
func TestIdempotence(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
	defer l.Close()
	r0 := mustAppend(t, l, pb(7, 2, 0, 3, false), true) // seq 0-2
	r1 := mustAppend(t, l, pb(7, 2, 3, 2, false), true) // seq 3-4
	leo := l.LogEndOffset()
	for _, c := range []struct {
		seq, n int32
		want   AppendResult
	}{{0, 3, r0}, {3, 2, r1}} {
		d := mustAppend(t, l, pb(7, 2, c.seq, int(c.n), false), true)
		if !d.Duplicate || d.BaseOffset != c.want.BaseOffset || d.LastOffset != c.want.LastOffset {
			t.Fatalf("duplicate of seq %d: %+v, want offsets %d-%d", c.seq, d, c.want.BaseOffset, c.want.LastOffset)
		}
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("duplicates appended: leo %d want %d", l.LogEndOffset(), leo)
	}
	appendErr(t, l, pb(7, 2, 6, 1, false), ErrOutOfOrderSequence) // gap (5 expected)
	appendErr(t, l, pb(7, 2, 1, 1, false), ErrOutOfOrderSequence) // overlaps, not a whole batch
	appendErr(t, l, pb(7, 1, 5, 1, false), ErrInvalidProducerEpoch)
	appendErr(t, l, pb(7, 3, 5, 1, false), ErrOutOfOrderSequence) // new epoch must start at 0
	mustAppend(t, l, pb(7, 3, 0, 1, false), true)
	appendErr(t, l, pb(7, 2, 5, 1, false), ErrInvalidProducerEpoch)
	// Unknown producer: any sequence.
	mustAppend(t, l, pb(8, 0, 41, 1, false), true)
	mustAppend(t, l, pb(8, 0, 42, 1, false), true)
	// Non-idempotent batches are not tracked.
	mustAppend(t, l, pb(0, 0, 0, 1, false), true)
	mustAppend(t, l, pb(0, 0, 0, 1, false), true)
	got := l.Producers()
	if len(got) != 2 || got[0].ProducerID != 7 || got[0].ProducerEpoch != 3 || got[0].LastSequence != 0 ||
		got[1].ProducerID != 8 || got[1].LastSequence != 42 || got[0].TxnStartOffset != -1 {
		t.Fatalf("producers %+v", got)
	}
}

// TestIdempotenceWindow: only the last ProducerWindow batches are
// remembered; an older retry is out of order (as Kafka).
func TestIdempotenceWindow(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
	defer l.Close()
	for i := range ProducerWindow + 1 {
		mustAppend(t, l, pb(1, 0, int32(i), 1, false), true)
	}
	appendErr(t, l, pb(1, 0, 0, 1, false), ErrOutOfOrderSequence)
	if d := mustAppend(t, l, pb(1, 0, 1, 1, false), true); !d.Duplicate || d.BaseOffset != 1 {
		t.Fatalf("seq 1: %+v", d)
	}
}

// TestSequenceWrap: sequences wrap from MaxInt32 to 0.
func TestSequenceWrap(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
	defer l.Close()
	mustAppend(t, l, pb(1, 0, 1<<31-2, 2, false), true) // MaxInt32-1, MaxInt32
	mustAppend(t, l, pb(1, 0, 0, 1, false), true)
	if d := mustAppend(t, l, pb(1, 0, 1<<31-2, 2, false), true); !d.Duplicate {
		t.Fatal("wrapped batch retry not a duplicate")
	}
}

// TestTransactions: the LSO stops at the first ongoing transaction; markers
// end them; aborts are indexed; a non-transactional batch during a
// transaction and a marker from a fenced epoch are refused.
func TestTransactions(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
	defer l.Close()
	mustAppend(t, l, pb(0, 0, 0, 2, false), true) // 0-1 plain
	mustAppend(t, l, pb(10, 0, 0, 2, true), true) // 2-3 txn A
	mustAppend(t, l, pb(11, 0, 0, 1, true), true) // 4 txn B
	mustAppend(t, l, pb(10, 0, 2, 1, true), true) // 5 txn A
	if lso := l.LastStableOffset(); lso != 2 {
		t.Fatalf("lso %d want 2", lso)
	}
	appendErr(t, l, pb(10, 0, 3, 1, false), ErrInvalidTxnState)
	mustAppend(t, l, markerBatch(10, 0, false, 0), true) // 6 abort A
	if lso := l.LastStableOffset(); lso != 4 {
		t.Fatalf("lso after abort %d want 4", lso)
	}
	mustAppend(t, l, markerBatch(11, 0, true, 0), true) // 7 commit B
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != hw || hw != 8 {
		t.Fatalf("lso %d hw %d, want 8", lso, hw)
	}
	want := []AbortedTxn{{ProducerID: 10, FirstOffset: 2, LastOffset: 6}}
	if got := l.AbortedTransactions(0, 8); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v", got)
	}
	if got := l.AbortedTransactions(7, 8); len(got) != 0 {
		t.Fatalf("aborted after the marker %+v", got)
	}
	if got := l.AbortedTransactions(0, 2); len(got) != 0 {
		t.Fatalf("aborted before the txn %+v", got)
	}
	// A marker again (re-send): appended, harmless.
	mustAppend(t, l, markerBatch(10, 0, false, 0), true)
	if got := l.AbortedTransactions(0, 100); len(got) != 1 {
		t.Fatalf("re-sent marker added an entry: %+v", got)
	}
	// Fencing: a marker with a higher epoch ends the txn and bumps the epoch.
	mustAppend(t, l, pb(10, 0, 3, 1, true), true) // 9
	mustAppend(t, l, markerBatch(10, 1, false, 0), true)
	appendErr(t, l, pb(10, 0, 4, 1, true), ErrInvalidProducerEpoch)
	appendErr(t, l, markerBatch(10, 0, true, 0), ErrInvalidProducerEpoch)
	mustAppend(t, l, pb(10, 1, 0, 1, true), true) // new epoch at 0
	if got := l.AbortedTransactions(0, 100); len(got) != 2 || got[1] != (AbortedTxn{10, 9, 10}) {
		t.Fatalf("aborted %+v", got)
	}
	// The group coordinator's batches: producer id, sequence -1.
	cb := testBatch{records: 1, producerID: 12, seq: -1, txn: true}.build()
	mustAppend(t, l, cb, true)
	mustAppend(t, l, testBatch{records: 1, producerID: 12, seq: -1, txn: true}.build(), true)
	if ps := l.Producers(); ps[len(ps)-1].ProducerID != 12 || ps[len(ps)-1].TxnStartOffset < 0 {
		t.Fatalf("producers %+v", ps)
	}
}

// TestControlBatchValidation: malformed markers are corrupt batches.
func TestControlBatchValidation(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
	defer l.Close()
	bad := func(mut func(b []byte)) []byte {
		b := markerBatch(1, 0, true, 0)
		mut(b)
		copy(b[offCRC:], []byte{0, 0, 0, 0})
		c := BatchCRC(b)
		b[offCRC], b[offCRC+1], b[offCRC+2], b[offCRC+3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
		return b
	}
	for name, b := range map[string][]byte{
		"type 7":         bad(func(b []byte) { b[batchHeaderSize+6] = 7 }), // key type low byte
		"sequence 0":     bad(func(b []byte) { copy(b[offBaseSequence:], []byte{0, 0, 0, 0}) }),
		"not txn":        bad(func(b []byte) { b[offAttributes+1] = attrControl }),
		"key version 1":  bad(func(b []byte) { b[batchHeaderSize+4] = 1 }),
		"no producer id": bad(func(b []byte) { copy(b[offProducerID:], []byte{255, 255, 255, 255, 255, 255, 255, 255}) }),
	} {
		if _, err := l.Append(b, true); !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// txnWorkload appends a mix of idempotent, transactional and marker batches
// to l and returns what the state must be.
func txnWorkload(t *testing.T, l *Log, rounds int) {
	t.Helper()
	seq := map[int64]int32{}
	for r := range rounds {
		for pid := int64(1); pid <= 3; pid++ {
			mustAppend(t, l, pb(pid, 0, seq[pid], 2, pid != 3), true)
			seq[pid] += 2
		}
		mustAppend(t, l, markerBatch(1, 0, r%2 == 0, 0), true)
		if r%3 == 2 {
			mustAppend(t, l, markerBatch(2, 0, false, 0), true)
		}
	}
	mustAppend(t, l, pb(2, 0, seq[2], 1, true), true) // ongoing at the end
}

type psView struct {
	Producers []ProducerInfo
	Aborted   []AbortedTxn
	LSO, LEO  int64
}

func viewOf(l *Log) psView {
	return psView{l.Producers(), l.AbortedTransactions(0, 1<<62), l.LastStableOffset(), l.LogEndOffset()}
}

// TestProducerStateRecovery: after a clean restart, a crash, lost
// snapshots, a damaged snapshot or txn index, the producer state (dedup
// window, ongoing txns, LSO, aborted index) is rebuilt identically, with
// segment rolls so that .txnindex files are used.
func TestProducerStateRecovery(t *testing.T) {
	cfg := Config{SegmentBytes: 600}
	for _, how := range []string{"clean", "crash", "no-snapshots", "damaged-snapshot", "damaged-txnindex", "no-checkpoint"} {
		t.Run(how, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: cfg})
			txnWorkload(t, l, 12)
			want := viewOf(l)
			if len(want.Aborted) < 5 || want.LSO >= want.LEO {
				t.Fatalf("workload too weak: %+v", want)
			}
			var img *vfs.MemFS
			if how == "clean" {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				img = mem
			} else {
				img = mem.CrashClone()
				l.Close()
			}
			names, _ := img.List("/p")
			var txi int
			for _, n := range names {
				switch {
				case strings.HasSuffix(n, txnIndexSuffix):
					txi++
					if how == "damaged-txnindex" {
						f, _ := img.OpenReadWrite(filepath.Join("/p", n))
						f.WriteAt([]byte{0xff}, 20)
						f.Close()
					}
				case strings.HasSuffix(n, snapshotSuffix):
					switch how {
					case "no-snapshots":
						img.Remove(filepath.Join("/p", n))
					case "damaged-snapshot":
						f, _ := img.OpenReadWrite(filepath.Join("/p", n))
						f.WriteAt([]byte{0xff}, 9)
						f.Close()
					}
				case n == checkpointFile && how == "no-checkpoint":
					img.Remove(filepath.Join("/p", n))
				}
			}
			if txi == 0 {
				t.Fatal("no .txnindex file written")
			}
			l2 := mustOpen(t, Options{FS: img, Dir: "/p", Config: cfg})
			defer l2.Close()
			if got := viewOf(l2); !reflect.DeepEqual(got, want) {
				t.Fatalf("after %s:\n got %+v\nwant %+v", how, got, want)
			}
			// Dedup survives: the last batch of producer 3 is a duplicate.
			last := want.Producers[2]
			d := mustAppend(t, l2, pb(3, 0, last.LastSequence-1, 2, false), true)
			if !d.Duplicate {
				t.Fatalf("after %s: retry not deduplicated: %+v", how, d)
			}
			appendErr(t, l2, pb(3, 0, last.LastSequence+2, 1, false), ErrOutOfOrderSequence)
		})
	}
}

// TestProducerStateCrashMidTransaction: a crash leaves the unsynced tail
// out; the state matches the surviving log (a txn whose marker was lost is
// ongoing again).
func TestProducerStateCrashMidTransaction(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l := mustOpen(t, Options{FS: mem, Dir: "/p"})
	mustAppend(t, l, pb(1, 0, 0, 2, true), true)
	img := mem.CrashClone() // before the marker
	mustAppend(t, l, markerBatch(1, 0, false, 0), true)
	l.Close()
	l2 := mustOpen(t, Options{FS: img, Dir: "/p"})
	defer l2.Close()
	if lso := l2.LastStableOffset(); lso != 0 {
		t.Fatalf("lso %d, want 0 (txn ongoing again)", lso)
	}
	mustAppend(t, l2, markerBatch(1, 0, false, 0), true)
	if got := l2.AbortedTransactions(0, 10); !reflect.DeepEqual(got, []AbortedTxn{{1, 0, 2}}) {
		t.Fatalf("aborted %+v", got)
	}
}

// TestProducerStateRollback: a failed fsync rolls back appends; the
// producer state forgets them (the retry is appended, not "duplicate").
func TestProducerStateRollback(t *testing.T) {
	mem := vfs.NewCrashableMem()
	tog := errorfs.NewToggle(errorfs.FailIf(errorfs.And(errorfs.OnOps(errorfs.OpSync), errorfs.PathMatch("*.log")), syscall.EIO))
	l := mustOpen(t, Options{FS: errorfs.Wrap(mem, tog), Dir: "/p"})
	defer l.Close()
	mustAppend(t, l, pb(1, 0, 0, 1, false), true)
	tog.On()
	appendErr(t, l, pb(1, 0, 1, 1, true), ErrStorage)
	tog.Off()
	r := mustAppend(t, l, pb(1, 0, 1, 1, true), true)
	if r.Duplicate || r.BaseOffset != 1 {
		t.Fatalf("retry after rollback: %+v", r)
	}
	if l.LastStableOffset() != 1 {
		t.Fatalf("lso %d", l.LastStableOffset())
	}
}

// TestProducerStateRetention: DeleteRecords drops producers whose batches
// are all gone, keeps those with an ongoing transaction.
func TestProducerStateRetention(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: Config{SegmentBytes: 300}})
	defer l.Close()
	mustAppend(t, l, pb(1, 0, 0, 1, false), true)
	mustAppend(t, l, pb(2, 0, 0, 1, true), true)
	for i := range 6 {
		mustAppend(t, l, pb(3, 0, int32(i), 1, false), true)
	}
	if _, err := l.DeleteRecords(5); err != nil {
		t.Fatal(err)
	}
	var pids []int64
	for _, p := range l.Producers() {
		pids = append(pids, p.ProducerID)
	}
	if !slices.Equal(pids, []int64{2, 3}) {
		t.Fatalf("producers after DeleteRecords: %v", pids)
	}
	// Producer 1 is unknown again: any sequence.
	mustAppend(t, l, pb(1, 0, 9, 1, false), true)
}

// TestProducerExpiration: a retention pass forgets producers idle for longer
// than ProducerIDExpirationMs (by their last batch's timestamp), but never
// one with an ongoing transaction.
func TestProducerExpiration(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Now: clk.Now})
	defer l.Close()
	ts := clk.Now().UnixMilli()
	idle := testBatch{records: 1, producerID: 1, seq: 0, firstTs: ts}.build()
	txn := testBatch{records: 1, producerID: 2, seq: 0, firstTs: ts, txn: true}.build()
	mustAppend(t, l, idle, true)
	mustAppend(t, l, txn, true)
	clk.Advance(ProducerIDExpirationMs*time.Millisecond + time.Minute)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if ps := l.Producers(); len(ps) != 1 || ps[0].ProducerID != 2 {
		t.Fatalf("producers after expiration: %+v", ps)
	}
	// The expired producer is unknown: any sequence is accepted.
	mustAppend(t, l, testBatch{records: 1, producerID: 1, seq: 17, firstTs: clk.Now().UnixMilli()}.build(), true)
}
