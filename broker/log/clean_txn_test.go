package log

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// controlBatches lists the headers of l's control batches (gaps allowed).
func controlBatches(t testing.TB, l *Log) []batchHeader {
	t.Helper()
	var out []batchHeader
	off := l.LogStartOffset()
	for off < l.HighWatermark() {
		rr, err := l.Read(off, 1<<20, l.HighWatermark())
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(rr.Data) == 0 {
			rr.Release()
			break
		}
		for b := rr.Data; len(b) > 0; {
			h := parseHeader(b)
			if _, err := validateStored(b[:h.Size()]); err != nil {
				t.Fatalf("batch %d: %v", h.BaseOffset, err)
			}
			if h.Attributes&attrControl != 0 && h.LastOffset() >= off {
				out = append(out, h)
			}
			off = max(off, h.LastOffset()+1)
			b = b[h.Size():]
		}
		rr.Release()
	}
	return out
}

// fillSegments appends overwrites of filler keys until at least one more
// segment is closed (so a forced pass has dirty data).
func fillSegments(t testing.TB, l *Log, tag string) {
	t.Helper()
	n := len(l.segments())
	for i := 0; len(l.segments()) < n+2 && i < 100; i++ {
		mustAppend(t, l, kvBatch(testBatch{}, kv{fmt.Sprint("f", i%3), val(tag + strings.Repeat("x", 60))}, kv{"b", val(fmt.Sprint(tag, i))}), true)
	}
}

// txnMarkerLog writes: a=base; producer 7: txn 1 (a=aborted) ABORT, txn 2
// (b=c2) COMMIT, txn 3 (c=c3) COMMIT; then overwrites of b (so txn 2's data
// is superseded) in later segments.
func txnMarkerLog(t testing.TB, fs vfs.FS, clk *fakeClock) *Log {
	l := mustOpen(t, Options{FS: fs, Dir: "/p", Config: compactCfg(), Now: clk.Now})
	mustAppend(t, l, kvBatch(testBatch{}, kv{"a", val("base")}), true)
	mustAppend(t, l, kvBatch(testBatch{producerID: 7, seq: 0, txn: true}, kv{"a", val("aborted")}), true)
	mustAppend(t, l, markerBatch(7, 0, false, 1), true)
	mustAppend(t, l, kvBatch(testBatch{producerID: 7, seq: 1, txn: true}, kv{"b", val("c2")}), true)
	mustAppend(t, l, markerBatch(7, 0, true, 1), true)
	mustAppend(t, l, kvBatch(testBatch{producerID: 7, seq: 2, txn: true}, kv{"c", val("c3")}), true)
	mustAppend(t, l, markerBatch(7, 0, true, 1), true)
	fillSegments(t, l, "n")
	return l
}

func stamped(hs []batchHeader) int {
	n := 0
	for _, h := range hs {
		if h.Attributes&attrDeleteHorizon != 0 {
			n++
		}
	}
	return n
}

// TestCleanTxnMarkersRemovedWhenSafe: aborted data goes in the first pass
// (its marker and index entry stay while the pass still read data); the
// next pass finds both markers of transactions without data left, stamps
// them with a delete horizon and prunes the aborted index; a pass before the
// horizon keeps them, one after removes them. The marker of the transaction
// whose data is still the latest value stays. Producer state, LSO and the
// (pruned) aborted index are the same after a reopen, with or without
// snapshots.
func TestCleanTxnMarkersRemovedWhenSafe(t *testing.T) {
	clk := newClock()
	fs := vfs.NewCrashableMem()
	l := txnMarkerLog(t, fs, clk)
	defer func() { l.Close() }()
	clean := func(step string) CleanResult {
		t.Helper()
		res, err := l.Clean(CleanOptions{Force: true})
		if err != nil || !res.Cleaned {
			t.Fatalf("%s: clean %+v %v", step, res, err)
		}
		return res
	}
	res := clean("pass 1")
	for _, r := range readRecords(t, l) {
		if r.value != nil && *r.value == "aborted" {
			t.Fatalf("aborted record kept at %d", r.off)
		}
	}
	if cs := controlBatches(t, l); len(cs) != 3 || stamped(cs) != 0 || res.MarkersRemoved != 0 {
		t.Fatalf("pass 1: markers %d (stamped %d), removed %d; want 3 unstamped", len(cs), stamped(cs), res.MarkersRemoved)
	}
	if got := l.AbortedTransactions(0, l.HighWatermark()); len(got) != 1 {
		t.Fatalf("pass 1: aborted index %v, want the one txn whose data the pass read", got)
	}

	clk.Advance(time.Minute)
	fillSegments(t, l, "m")
	res = clean("pass 2")
	cs := controlBatches(t, l)
	if len(cs) != 3 || stamped(cs) != 2 || res.AbortedPruned != 1 {
		t.Fatalf("pass 2: markers %d stamped %d pruned %d; want 3, 2 stamped, 1 pruned", len(cs), stamped(cs), res.AbortedPruned)
	}
	wantHorizon := clk.Now().UnixMilli() + compactCfg().DeleteRetentionMs
	for _, h := range cs[:2] {
		if hz, ok := deleteHorizon(&h); !ok || hz != wantHorizon {
			t.Fatalf("marker %d horizon %d %v, want %d", h.BaseOffset, hz, ok, wantHorizon)
		}
	}
	if got := l.AbortedTransactions(0, l.HighWatermark()); len(got) != 0 {
		t.Fatalf("pass 2: aborted index %v, want pruned", got)
	}

	clk.Advance(30 * time.Minute) // before the horizon
	fillSegments(t, l, "o")
	clean("pass 3")
	if cs := controlBatches(t, l); len(cs) != 3 {
		t.Fatalf("pass 3 (before the horizon): %d markers, want 3", len(cs))
	}

	clk.Advance(31 * time.Minute) // past the horizon
	fillSegments(t, l, "p")
	res = clean("pass 4")
	cs = controlBatches(t, l)
	if len(cs) != 1 || res.MarkersRemoved != 2 || stamped(cs) != 0 {
		t.Fatalf("pass 4: markers %v removed %d; want only txn 3's", cs, res.MarkersRemoved)
	}
	if m := latest(readRecords(t, l)); *m["a"].value != "base" || *m["c"].value != "c3" {
		t.Fatalf("latest a=%v c=%v", *m["a"].value, *m["c"].value)
	}
	before := viewOf(l)
	if before.LSO != l.HighWatermark() {
		t.Fatalf("LSO %d, HW %d: a transaction looks open", before.LSO, l.HighWatermark())
	}
	for _, dropSnapshots := range []bool{false, true} {
		l.Close()
		if dropSnapshots {
			names, _ := fs.List("/p")
			for _, n := range names {
				if strings.HasSuffix(n, snapshotSuffix) {
					fs.Remove("/p/" + n)
				}
			}
		}
		l = mustOpen(t, Options{FS: fs, Dir: "/p", Config: compactCfg(), Now: clk.Now})
		if got := viewOf(l); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("after reopen (snapshots dropped %v): %+v, want %+v", dropSnapshots, got, before)
		}
	}
	// The producer goes on: its sequence window survived.
	if r, err := l.Append(kvBatch(testBatch{producerID: 7, seq: 3, txn: true}, kv{"d", val("d4")}), true); err != nil || r.Duplicate {
		t.Fatalf("next txn batch: %+v %v", r, err)
	}
}

// TestCleanTxnMarkerRetentionZero: with delete.retention.ms 0 a marker is
// removed by the pass that finds its transaction empty.
func TestCleanTxnMarkerRetentionZero(t *testing.T) {
	clk := newClock()
	cfg := compactCfg()
	cfg.DeleteRetentionMs = -1 // < 0 means 0
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: cfg, Now: clk.Now})
	defer l.Close()
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 0, txn: true}, kv{"a", val("x")}), true)
	mustAppend(t, l, markerBatch(5, 0, false, 1), true)
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 1}, kv{"a", val("y")}), true)
	fillSegments(t, l, "n")
	if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(controlBatches(t, l)); n != 1 {
		t.Fatalf("pass 1: %d markers, want 1 (the txn's data was read)", n)
	}
	fillSegments(t, l, "m")
	res, err := l.Clean(CleanOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(controlBatches(t, l)); n != 0 || res.MarkersRemoved != 1 || res.AbortedPruned != 1 {
		t.Fatalf("pass 2: %d markers, removed %d, pruned %d", n, res.MarkersRemoved, res.AbortedPruned)
	}
}

// TestCleanTxnMarkerKeptForProducersLastBatch: an aborted batch that is its
// producer's last batch stays (empty) and so does its marker and index
// entry: producer state rebuilt from the log must see the transaction end.
func TestCleanTxnMarkerKeptForProducersLastBatch(t *testing.T) {
	clk := newClock()
	cfg := compactCfg()
	cfg.DeleteRetentionMs = -1
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: cfg, Now: clk.Now})
	defer l.Close()
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 0, txn: true}, kv{"a", val("x")}), true)
	mustAppend(t, l, markerBatch(5, 0, false, 1), true)
	for pass := range 3 {
		fillSegments(t, l, fmt.Sprint(pass))
		if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if n := len(controlBatches(t, l)); n != 1 {
			t.Fatalf("pass %d: %d markers, want 1", pass, n)
		}
		if n := len(l.AbortedTransactions(0, l.HighWatermark())); n != 1 {
			t.Fatalf("pass %d: %d aborted entries, want 1", pass, n)
		}
	}
	for _, r := range readRecords(t, l) {
		if r.key == "a" {
			t.Fatalf("aborted record kept")
		}
	}
}

// txnCrashCfg: one cleaning group (segments rolled by hand), markers removed
// by the pass that finds them removable.
func txnCrashCfg() Config {
	cfg := compactCfg()
	cfg.SegmentBytes = 1 << 20
	cfg.DeleteRetentionMs = -1
	return cfg
}

func rollNow(t testing.TB, l *Log) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
}

// TestCleanTxnPowerCutAtEveryOperation cuts power before each file system
// operation of open + clean + close of a pass that removes markers and
// prunes the aborted index (strict and torn images): the reopened log holds
// exactly the state before the pass or exactly the state after it — records,
// markers, aborted index and LSO — never a mix.
func TestCleanTxnPowerCutAtEveryOperation(t *testing.T) {
	// Markers removed by the pass (delete.retention.ms 0), or stamped with a
	// delete horizon (1 h).
	for _, retention := range []int64{-1, 3_600_000} {
		t.Run(fmt.Sprint("retention=", retention), func(t *testing.T) { cleanTxnPowerCut(t, retention) })
	}
}

func cleanTxnPowerCut(t *testing.T, retention int64) {
	mem := vfs.NewCrashableMem()
	cfg := txnCrashCfg()
	cfg.DeleteRetentionMs = retention
	l := mustOpen(t, Options{FS: mem, Dir: "/d/p", Config: cfg})
	seq := int32(0)
	for i := range 4 {
		mustAppend(t, l, kvBatch(testBatch{producerID: 7, seq: seq, txn: true}, kv{fmt.Sprint("t", i), val("aborted")}), true)
		mustAppend(t, l, markerBatch(7, 0, false, 1), true)
		mustAppend(t, l, kvBatch(testBatch{producerID: 7, seq: seq + 1, txn: true}, kv{"k", val(fmt.Sprint("c", i))}), true)
		mustAppend(t, l, markerBatch(7, 0, true, 1), true)
		seq += 2
		mustAppend(t, l, kvBatch(testBatch{}, kv{"k", val(fmt.Sprint("n", i))}, kv{fmt.Sprint("j", i%2), val("w")}), true)
		rollNow(t, l)
	}
	mustAppend(t, l, kvBatch(testBatch{producerID: 7, seq: seq, txn: true}, kv{"z", val("last")}), true)
	mustAppend(t, l, markerBatch(7, 0, true, 1), true)
	rollNow(t, l)
	// Pass 1 removes the aborted data; markers and index entries stay.
	if res, err := l.Clean(CleanOptions{Force: true}); err != nil || !res.Cleaned {
		t.Fatalf("pass 1: %+v %v", res, err)
	}
	mustAppend(t, l, kvBatch(testBatch{}, kv{"k", val("latest")}), true)
	rollNow(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(fs vfs.FS) {
		l, err := Open(Options{FS: fs, Dir: "/d/p", Config: cfg})
		if err != nil {
			return
		}
		l.Clean(CleanOptions{Force: true})
		l.Close()
	}
	image := func(fs vfs.FS, where string) string {
		l, err := Open(Options{FS: fs, Dir: "/d/p", Config: cfg, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("%s: reopen: %v", where, err)
		}
		defer l.Close()
		var offs []string
		for _, h := range controlBatches(t, l) {
			offs = append(offs, fmt.Sprint(h.BaseOffset, "/", h.Attributes&attrDeleteHorizon != 0))
		}
		return fmt.Sprint(readRecords(t, l), " markers ", offs, " aborted ", l.AbortedTransactions(0, 1<<62),
			" lso ", l.LastStableOffset(), " hw ", l.HighWatermark())
	}
	before := image(mem.CrashClone(), "before")
	cleaned, ops := cutRun(mem, run)
	after := image(cleaned, "after")
	if !strings.Contains(before, "aborted [{") || !strings.Contains(after, "aborted []") {
		t.Fatalf("the pass did not prune the aborted index:\nbefore %s\nafter %s", before, after)
	}
	if retention > 0 && !strings.Contains(after, "/true") {
		t.Fatalf("the pass stamped no marker:\n%s", after)
	}
	sawOld, sawNew := false, false
	eachPowerCut(mem, ops, 11, run, func(img *vfs.MemFS, where string) {
		got := image(img, where)
		switch got {
		case before:
			sawOld = true
		case after:
			sawNew = true
		default:
			t.Fatalf("%s: a mix:\n%s\nbefore %s\nafter  %s", where, got, before, after)
		}
		if again := image(img, where+" (2nd open)"); again != got {
			t.Fatalf("%s: second open differs", where)
		}
	})
	if !sawOld || !sawNew {
		t.Fatalf("cuts never produced both states (old %v new %v)", sawOld, sawNew)
	}
}

// TestCleanAbortedDataBeforeLaterMarker: an aborted transaction whose data
// is in a cleaned segment and whose ABORT marker lies beyond the pass's
// range (here in the active segment) still has its data removed, and its
// index entry stays (the marker was not cleaned).
func TestCleanAbortedDataBeforeLaterMarker(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg()})
	defer l.Close()
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 0, txn: true}, kv{"x", val("aborted")}), true)
	fillSegments(t, l, "a")
	mustAppend(t, l, markerBatch(5, 0, false, 1), true) // in the active segment
	res, err := l.Clean(CleanOptions{Force: true})
	if err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	for _, r := range readRecords(t, l) {
		if r.value != nil && *r.value == "aborted" && r.off < res.CleanedTo {
			t.Fatalf("aborted record kept at %d (cleaned to %d)", r.off, res.CleanedTo)
		}
	}
	if n := len(l.AbortedTransactions(0, l.HighWatermark())); n != 1 {
		t.Fatalf("%d aborted entries, want 1", n)
	}
}

// TestCleanMarkerOnlyGroupKeepsSegment: a group left with nothing but a
// removed marker keeps one neutral empty batch (no producer, no control
// bit) at the marker's offsets, so its segment and the log start stay, and
// a reopen rebuilds the same producer state.
func TestCleanMarkerOnlyGroupKeepsSegment(t *testing.T) {
	fs := vfs.NewCrashableMem()
	cfg := compactCfg()
	cfg.DeleteRetentionMs = -1
	l := mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg})
	defer func() { l.Close() }()
	big := strings.Repeat("x", 350)
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 0, txn: true}, kv{"a", val("aborted")}), true)
	mustAppend(t, l, markerBatch(5, 0, false, 1), true)
	rollNow(t, l)
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 1}, kv{"a", val(big)}), true) // its own group
	rollNow(t, l)
	for pass := range 2 {
		mustAppend(t, l, kvBatch(testBatch{}, kv{fmt.Sprint("f", pass), val(big)}), true)
		rollNow(t, l)
		if res, err := l.Clean(CleanOptions{Force: true}); err != nil || !res.Cleaned {
			t.Fatalf("pass %d: %+v %v", pass, res, err)
		}
	}
	if cs := controlBatches(t, l); len(cs) != 0 {
		t.Fatalf("markers left: %+v", cs)
	}
	if l.LogStartOffset() != 0 || l.segments()[0].base != 0 {
		t.Fatalf("log start %d, first segment %d: want 0", l.LogStartOffset(), l.segments()[0].base)
	}
	rr, err := l.Read(0, 1<<20, l.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	h := parseHeader(rr.Data)
	rr.Release()
	if h.BaseOffset != 1 || h.NumRecords != 0 || h.ProducerID != -1 || h.Attributes != 0 {
		t.Fatalf("first batch %+v, want the neutral empty batch at offset 1", h)
	}
	before := viewOf(l)
	l.Close()
	l = mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg})
	if got := viewOf(l); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("after reopen %+v, want %+v", got, before)
	}
}

// TestCleanBatchAtOffsetZeroOfUnknownProducer: a superseded batch at offset
// 0 of a producer whose window holds no batch (its epoch was bumped by a
// marker, as transaction.version 2 does) is removed, not kept empty as if
// it were the producer's last (a missing map entry read as offset 0).
func TestCleanBatchAtOffsetZeroOfUnknownProducer(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg()})
	defer l.Close()
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 0, txn: true}, kv{"a", val("1")}), true)
	mustAppend(t, l, markerBatch(5, 1, true, 1), true) // epoch bump: the window is empty
	mustAppend(t, l, kvBatch(testBatch{}, kv{"a", val("2")}), true)
	fillSegments(t, l, "x")
	if res, err := l.Clean(CleanOptions{Force: true}); err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	rr, err := l.Read(0, 1<<20, l.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if h := parseHeader(rr.Data); h.BaseOffset == 0 {
		t.Fatalf("batch at offset 0 kept: %+v", h)
	}
}

// TestCleanStaleAbortedEntryDoesNotHideLaterData: an aborted-index entry
// whose marker is not in the log (left over, e.g. re-read from an older
// snapshot after a crash) covers only its own range: the producer's later
// committed data is kept, and the stale entry is pruned.
func TestCleanStaleAbortedEntryDoesNotHideLaterData(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg()})
	defer l.Close()
	mustAppend(t, l, kvBatch(testBatch{}, kv{"pad", val("0")}, kv{"pad2", val("0")}), true) // offsets 0-1
	l.mu.Lock()
	l.ps.mu.Lock()
	l.ps.addAborted(AbortedTxn{ProducerID: 5, FirstOffset: 0, LastOffset: 1}) // no such transaction
	l.ps.mu.Unlock()
	l.mu.Unlock()
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 0, txn: true}, kv{"c", val("committed")}), true)
	mustAppend(t, l, markerBatch(5, 0, true, 1), true)
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 1}, kv{"z", val("z")}), true)
	fillSegments(t, l, "x")
	res, err := l.Clean(CleanOptions{Force: true})
	if err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	if v := latest(readRecords(t, l))["c"].value; v == nil || *v != "committed" {
		t.Fatalf("committed record lost: %v", v)
	}
	if a := l.AbortedTransactions(0, l.HighWatermark()); len(a) != 0 || res.AbortedPruned != 1 {
		t.Fatalf("stale entry not pruned: %v (pruned %d)", a, res.AbortedPruned)
	}
}
