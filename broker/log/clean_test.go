package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// kv is one record for kvBatch: a nil value is a tombstone.
type kv struct {
	key   string
	value *string
}

func val(s string) *string { return &s }

// kvBatch builds a batch of keyed records (producer fields as tb).
func kvBatch(tb testBatch, recs ...kv) []byte {
	var raw []byte
	for i, r := range recs {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, tb.tsStep*int64(i))
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, int64(len(r.key)))
		body = append(body, r.key...)
		if r.value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(*r.value)))
			body = append(body, *r.value...)
		}
		body = binary.AppendVarint(body, 0)
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	tb.records = len(recs)
	b := tb.build() // for the header
	pid := tb.producerID
	if pid == 0 {
		pid = -1
	}
	recsC := compressRecords(tb.codec, false, raw)
	out := append(b[:batchHeaderSize:batchHeaderSize], recsC...)
	be := binary.BigEndian
	be.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	be.PutUint64(out[offMaxTimestamp:], uint64(tb.firstTs+tb.tsStep*int64(len(recs)-1)))
	be.PutUint32(out[offCRC:], BatchCRC(out))
	return out
}

// storedRec is a record read back from the log.
type storedRec struct {
	off   int64
	key   string
	value *string
	ts    int64
}

// readRecords reads every data record of l (control batches skipped).
func readRecords(t testing.TB, l *Log) []storedRec {
	t.Helper()
	var out []storedRec
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
		b := rr.Data
		for len(b) > 0 {
			h := parseHeader(b)
			batch := b[:h.Size()]
			if _, err := validateStored(batch); err != nil && h.NumRecords == h.LastOffsetDelta+1 {
				t.Fatalf("stored batch %d invalid: %v", h.BaseOffset, err)
			}
			if BatchCRC(batch) != h.CRC {
				t.Fatalf("batch %d: bad crc", h.BaseOffset)
			}
			if h.Attributes&attrControl == 0 {
				err := forEachRecord(batch, h, &l.codecs, func(body []byte) error {
					r, ok := parseRecordBody(body)
					if !ok {
						return errors.New("bad record")
					}
					sr := storedRec{off: h.BaseOffset + r.offDelta, key: string(r.key), ts: h.FirstTimestamp + r.tsDelta}
					if !r.valueNull {
						v := string(recordValue(body))
						sr.value = &v
					}
					out = append(out, sr)
					return nil
				})
				if err != nil {
					t.Fatalf("batch %d: %v", h.BaseOffset, err)
				}
			}
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
		rr.Release()
	}
	return out
}

// recordValue extracts the value bytes of a record body.
func recordValue(rec []byte) []byte {
	i := 1
	for range 2 {
		_, m := varint(rec[i:])
		i += m
	}
	k, m := varint(rec[i:])
	i += m
	if k > 0 {
		i += int(k)
	}
	v, m := varint(rec[i:])
	i += m
	if v < 0 {
		return nil
	}
	return rec[i : i+int(v)]
}

// latest maps each key to its last record in recs.
func latest(recs []storedRec) map[string]storedRec {
	m := map[string]storedRec{}
	for _, r := range recs {
		m[r.key] = r
	}
	return m
}

func compactCfg() Config {
	return Config{SegmentBytes: 400, IndexIntervalBytes: 100, Compact: true, DeleteRetentionMs: int64(time.Hour / time.Millisecond)}
}

func TestCleanLatestPerKeyOffsetsPreserved(t *testing.T) {
	for _, codec := range []int{codecNone, codecGzip, codecZstd} {
		t.Run(fmt.Sprint("codec", codec), func(t *testing.T) {
			clk := newClock()
			l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg(), Now: clk.Now})
			defer func() { l.Close() }()
			for i := range 60 {
				mustAppend(t, l, kvBatch(testBatch{codec: codec, firstTs: clk.Now().UnixMilli()},
					kv{fmt.Sprint("k", i%5), val(fmt.Sprint("v", i))}, kv{fmt.Sprint("x", i%3), val(fmt.Sprint("w", i))}), true)
			}
			before := readRecords(t, l)
			want := latest(before)
			res, err := l.Clean(CleanOptions{Force: true})
			if err != nil || !res.Cleaned {
				t.Fatalf("clean: %+v %v", res, err)
			}
			after := readRecords(t, l)
			if len(after) >= len(before) {
				t.Fatalf("nothing removed: %d -> %d records", len(before), len(after))
			}
			got := latest(after)
			if len(got) != len(want) {
				t.Fatalf("keys: got %d want %d", len(got), len(want))
			}
			for k, w := range want {
				if g := got[k]; g.off != w.off || *g.value != *w.value || g.ts != w.ts {
					t.Fatalf("key %s: got %+v want %+v", k, g, w)
				}
			}
			// Offsets preserved: every record kept is at its original offset.
			orig := map[int64]string{}
			for _, r := range before {
				orig[r.off] = *r.value
			}
			for _, r := range after {
				if orig[r.off] != *r.value {
					t.Fatalf("offset %d moved", r.off)
				}
			}
			// Only the latest per key below the active segment; at most one
			// record per key in cleaned segments.
			progress, _ := l.CleanerProgress()
			seen := map[string]bool{}
			for _, r := range after {
				if r.off < progress {
					if seen[r.key] {
						t.Fatalf("key %s twice below %d", r.key, progress)
					}
					seen[r.key] = true
				}
			}
			// Reopen: same content.
			l.Close()
			l = mustOpen(t, Options{FS: l.fs, Dir: "/p", Config: compactCfg(), Now: clk.Now})
			if again := readRecords(t, l); fmt.Sprint(again) != fmt.Sprint(after) {
				t.Fatalf("after reopen:\n%v\nwant\n%v", again, after)
			}
			if p2, _ := l.CleanerProgress(); p2 != progress {
				t.Fatalf("progress %d after reopen, want %d", p2, progress)
			}
		})
	}
}

func TestCleanTombstonesKeptThenRemoved(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg(), Now: clk.Now})
	defer func() { l.Close() }()
	mustAppend(t, l, kvBatch(testBatch{}, kv{"a", val("1")}, kv{"b", val("1")}), true)
	mustAppend(t, l, kvBatch(testBatch{}, kv{"a", nil}), true)
	for i := range 20 { // filler to roll segments
		mustAppend(t, l, kvBatch(testBatch{}, kv{fmt.Sprint("f", i%2), val("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")}), true)
	}
	if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	m := latest(readRecords(t, l))
	if r, ok := m["a"]; !ok || r.value != nil {
		t.Fatalf("tombstone of a not kept after first clean: %+v", r)
	}
	// Within delete.retention.ms: still there after another clean.
	clk.Advance(30 * time.Minute)
	mustAppend(t, l, kvBatch(testBatch{}, kv{"f0", val("y")}), true)
	l.mu.Lock()
	l.roll()
	l.mu.Unlock()
	if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if r, ok := latest(readRecords(t, l))["a"]; !ok || r.value != nil {
		t.Fatal("tombstone removed before delete.retention.ms")
	}
	clk.Advance(31 * time.Minute)
	mustAppend(t, l, kvBatch(testBatch{}, kv{"f1", val("y")}), true)
	l.mu.Lock()
	l.roll()
	l.mu.Unlock()
	if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	m = latest(readRecords(t, l))
	if _, ok := m["a"]; ok {
		t.Fatalf("tombstone still there after delete.retention.ms: %+v", m["a"])
	}
	if r := m["b"]; r.value == nil || *r.value != "1" {
		t.Fatalf("b lost: %+v", r)
	}
}

func TestCleanKeylessRejected(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg()})
	defer func() { l.Close() }()
	b := kvBatch(testBatch{}, kv{"a", val("1")})
	// Make the key null: key length varint 1 ("a") -> -1 and drop the byte.
	bad := kvBatch(testBatch{}, kv{"", val("1")})
	i := batchHeaderSize + 1 + 1 + 1 + 1 // length, attrs, tsDelta, offDelta
	bad[i] = 1                           // zig-zag -1
	bad = bad[:len(bad)]
	binary.BigEndian.PutUint32(bad[offCRC:], BatchCRC(bad))
	if _, err := l.Append(bad, true); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("keyless append: %v", err)
	}
	mustAppend(t, l, b, true)
	// Not compacted: keyless accepted.
	l2 := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/q"})
	defer l2.Close()
	mustAppend(t, l2, bad, true)
}

func TestCleanTransactions(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg(), Now: clk.Now})
	defer func() { l.Close() }()
	mustAppend(t, l, kvBatch(testBatch{}, kv{"a", val("base")}), true)
	// Producer 7: aborted txn writing a=aborted.
	mustAppend(t, l, kvBatch(testBatch{producerID: 7, seq: 0, txn: true}, kv{"a", val("aborted")}, kv{"z", val("aborted")}), true)
	mustAppend(t, l, markerBatch(7, 0, false, 1), true)
	// Producer 8: committed txn writing b, then idempotent batches.
	mustAppend(t, l, kvBatch(testBatch{producerID: 8, seq: 0, txn: true}, kv{"b", val("c1")}), true)
	mustAppend(t, l, markerBatch(8, 0, true, 1), true)
	mustAppend(t, l, kvBatch(testBatch{producerID: 9, seq: 0}, kv{"c", val("p1")}, kv{"c", val("p2")}), true)
	mustAppend(t, l, kvBatch(testBatch{producerID: 9, seq: 2}, kv{"c", val("p3")}), true)
	for i := range 12 {
		mustAppend(t, l, kvBatch(testBatch{}, kv{"c", val(fmt.Sprint("later", i))}, kv{"f", val("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")}), true)
	}
	prodBefore := l.Producers()
	if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, l)
	for _, r := range recs {
		if r.value != nil && *r.value == "aborted" {
			t.Fatalf("aborted record kept at %d", r.off)
		}
	}
	m := latest(recs)
	if *m["a"].value != "base" || *m["b"].value != "c1" {
		t.Fatalf("a=%v b=%v", *m["a"].value, *m["b"].value)
	}
	// Producer 9's last batch (seq 2) stays as an empty batch: its record
	// (c=p3, overwritten) is gone.
	for _, r := range recs {
		if r.value != nil && (*r.value == "p3" || *r.value == "p1") {
			t.Fatalf("overwritten record %s kept", *r.value)
		}
	}
	// Markers are kept; aborted index still answers; producer state same
	// after reopen (rebuilt from snapshot or log).
	if len(l.AbortedTransactions(0, l.HighWatermark())) != 1 {
		t.Fatal("aborted index lost")
	}
	fs := l.fs
	l.Close()
	// Without snapshots the producer state is rebuilt from the log alone.
	names, _ := fs.List("/p")
	for _, n := range names {
		if strings.HasSuffix(n, snapshotSuffix) {
			fs.Remove("/p/" + n)
		}
	}
	l = mustOpen(t, Options{FS: fs, Dir: "/p", Config: compactCfg(), Now: clk.Now})
	if fmt.Sprint(l.Producers()) != fmt.Sprint(prodBefore) {
		t.Fatalf("producers after reopen %v, want %v", l.Producers(), prodBefore)
	}
	if got := l.AbortedTransactions(0, l.HighWatermark()); len(got) != 1 || got[0].ProducerID != 7 {
		t.Fatalf("aborted after reopen: %v", got)
	}
	// Duplicate detection of producer 9's last batch still works.
	r, err := l.Append(kvBatch(testBatch{producerID: 9, seq: 2}, kv{"c", val("p3")}), true)
	if err != nil || !r.Duplicate {
		t.Fatalf("retry of last batch: %+v %v", r, err)
	}
}

func TestCleanDirtyRatioAndLag(t *testing.T) {
	clk := newClock()
	cfg := compactCfg()
	cfg.MinCleanableDirtyRatio = 0.99
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: cfg, Now: clk.Now})
	defer func() { l.Close() }()
	for i := range 30 {
		mustAppend(t, l, kvBatch(testBatch{firstTs: clk.Now().UnixMilli()}, kv{fmt.Sprint("k", i%3), val("vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv")}), true)
	}
	// First pass: everything dirty, ratio 1.
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned || res.DirtyRatio != 1 {
		t.Fatalf("first: %+v %v", res, err)
	}
	mustAppend(t, l, kvBatch(testBatch{firstTs: clk.Now().UnixMilli()}, kv{"k0", val("new")}), true)
	l.mu.Lock()
	l.roll()
	l.mu.Unlock()
	res, err := l.Clean(CleanOptions{})
	if err != nil || res.Cleaned || res.DirtyRatio <= 0 || res.DirtyRatio >= 0.99 {
		t.Fatalf("below ratio: %+v %v", res, err)
	}
	// min.compaction.lag.ms holds back young segments even when forced.
	cfg.MinCompactionLagMs = int64(time.Hour / time.Millisecond)
	l.SetConfig(cfg)
	if res, err := l.Clean(CleanOptions{Force: true}); err != nil || res.Cleaned {
		t.Fatalf("young segment cleaned: %+v %v", res, err)
	}
	// max.compaction.lag.ms makes an old dirty segment due.
	cfg.MinCompactionLagMs = 0
	cfg.MaxCompactionLagMs = int64(time.Minute / time.Millisecond)
	l.SetConfig(cfg)
	clk.Advance(2 * time.Minute)
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned {
		t.Fatalf("overdue not cleaned: %+v %v", res, err)
	}
}

// TestCleanModel compares the log against a map model over random appends
// (with tombstones), cleans, reopens and retention-free rolls.
func TestCleanModel(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 99))
		clk := newClock()
		fs := vfs.NewCrashableMem()
		cfg := compactCfg()
		cfg.SegmentBytes = int64(200 + rng.IntN(600))
		cfg.DeleteRetentionMs = int64(10 * time.Minute / time.Millisecond)
		open := func() *Log { return mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg, Now: clk.Now}) }
		l := open()
		model := map[string]string{}        // live keys
		deletedAt := map[string]time.Time{} // tombstoned keys
		for step := range 400 {
			switch op := rng.IntN(20); {
			case op < 14:
				n := 1 + rng.IntN(4)
				var recs []kv
				for range n {
					k := fmt.Sprint("k", rng.IntN(25))
					if rng.IntN(6) == 0 {
						recs = append(recs, kv{k, nil})
						delete(model, k)
						deletedAt[k] = clk.Now()
					} else {
						v := fmt.Sprint("s", seed, "-", step, "-", rng.IntN(1000))
						recs = append(recs, kv{k, &v})
						model[k] = v
						delete(deletedAt, k)
					}
				}
				codec := []int{codecNone, codecSnappy, codecLZ4}[rng.IntN(3)]
				mustAppend(t, l, kvBatch(testBatch{codec: codec, firstTs: clk.Now().UnixMilli()}, recs...), true)
			case op < 17:
				if _, err := l.Clean(CleanOptions{Force: rng.IntN(2) == 0, MapBytes: 1}); err != nil {
					t.Fatalf("seed %d step %d: clean: %v", seed, step, err)
				}
			case op < 18:
				l.Close()
				l = open()
			default:
				clk.Advance(time.Duration(rng.IntN(5)) * time.Minute)
			}
			if step%50 == 49 || step == 399 {
				got := latest(readRecords(t, l))
				for k, v := range model {
					if g, ok := got[k]; !ok || g.value == nil || *g.value != v {
						t.Fatalf("seed %d step %d: key %s = %+v, want %q", seed, step, k, g, v)
					}
				}
				for k, g := range got {
					if _, live := model[k]; live {
						continue
					}
					if g.value != nil {
						t.Fatalf("seed %d step %d: deleted key %s has value %q", seed, step, k, *g.value)
					}
				}
			}
		}
		l.Close()
	}
}

func (r storedRec) String() string {
	v := "<nil>"
	if r.value != nil {
		v = *r.value
	}
	return fmt.Sprintf("%d:%s=%s@%d", r.off, r.key, v, r.ts)
}

// TestCleanTimestampLookupAndClose: after a clean, a timestamp lookup lands
// on the first kept record at or after the time; a clean of a closed log
// fails with ErrClosed.
func TestCleanTimestampLookupAndClose(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg(), Now: clk.Now})
	base := clk.Now().UnixMilli()
	for i := range 40 {
		// Keys a (overwritten every time) and u<i> (unique): the a's go.
		mustAppend(t, l, kvBatch(testBatch{firstTs: base + int64(i)*1000, tsStep: 1},
			kv{"a", val(fmt.Sprint(i))}, kv{fmt.Sprint("u", i), val("x")}), true)
	}
	if res, err := l.Clean(CleanOptions{Force: true}); err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	// Record 2i (key a, ts base+1000i) is gone for small i; 2i+1 (u<i>,
	// ts base+1000i+1) stays.
	off, ts, err := l.OffsetForTimestamp(base + 5000)
	if err != nil || off != 11 || ts != base+5001 {
		t.Fatalf("lookup: %d %d %v, want 11 %d", off, ts, err, base+5001)
	}
	l.Close()
	if _, err := l.Clean(CleanOptions{Force: true}); !errors.Is(err, ErrClosed) {
		t.Fatalf("clean after close: %v", err)
	}
}

// TestCleanMaxLagRollsActive: with max.compaction.lag.ms, an active segment
// older than it is rolled and cleaned without new appends.
func TestCleanMaxLagRollsActive(t *testing.T) {
	clk := newClock()
	cfg := compactCfg()
	cfg.SegmentBytes = 1 << 20
	cfg.MaxCompactionLagMs = int64(time.Minute / time.Millisecond)
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: cfg, Now: clk.Now})
	defer l.Close()
	for i := range 10 {
		mustAppend(t, l, kvBatch(testBatch{firstTs: clk.Now().UnixMilli()}, kv{"a", val(fmt.Sprint(i))}), true)
	}
	if res, err := l.Clean(CleanOptions{}); err != nil || res.Cleaned {
		t.Fatalf("young active segment cleaned: %+v %v", res, err)
	}
	clk.Advance(2 * time.Minute)
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned {
		t.Fatalf("overdue active segment not cleaned: %+v %v", res, err)
	}
	if recs := readRecords(t, l); len(recs) != 1 || *recs[0].value != "9" {
		t.Fatalf("records after clean: %v", recs)
	}
}

// TestCleanMaxLagAfterReopen: segments loaded at open (no creation time in
// memory) are not taken as overdue while their records are young.
func TestCleanMaxLagAfterReopen(t *testing.T) {
	clk := newClock()
	cfg := compactCfg()
	cfg.MinCleanableDirtyRatio = 0.99
	cfg.MaxCompactionLagMs = int64(time.Hour / time.Millisecond)
	fs := vfs.NewCrashableMem()
	l := mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg, Now: clk.Now})
	for i := range 30 {
		mustAppend(t, l, kvBatch(testBatch{firstTs: clk.Now().UnixMilli()}, kv{fmt.Sprint("k", i%3), val("vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv")}), true)
	}
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned {
		t.Fatalf("first: %+v %v", res, err)
	}
	for i := range 5 {
		mustAppend(t, l, kvBatch(testBatch{firstTs: clk.Now().UnixMilli()}, kv{fmt.Sprint("k", i%3), val("vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv")}), true)
	}
	l.Close()
	l = mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg, Now: clk.Now})
	defer func() { l.Close() }()
	if res, err := l.Clean(CleanOptions{}); err != nil || res.Cleaned {
		t.Fatalf("young dirty segments cleaned after reopen: %+v %v", res, err)
	}
	clk.Advance(2 * time.Hour)
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned {
		t.Fatalf("overdue not cleaned: %+v %v", res, err)
	}
}
