package log

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

func TestOffsetForTimestamp(t *testing.T) {
	fsCases(t, func(t *testing.T, fs vfs.FS, dir string) {
		l := mustOpen(t, Options{FS: fs, Dir: dir, Config: Config{SegmentBytes: 1500, IndexIntervalBytes: 200}})
		defer l.Close()
		// Batches of 3 records, timestamps 1000+100*i + {0,10,20}, one
		// batch out of order (i == 5 has old timestamps).
		for i := 0; i < 20; i++ {
			ts := int64(1000 + 100*i)
			if i == 5 {
				ts = 500
			}
			mustAppend(t, l, testBatch{records: 3, valueSize: 100, firstTs: ts, tsStep: 10}.build(), true)
		}
		if len(l.segments()) < 3 {
			t.Fatalf("want several segments, have %d", len(l.segments()))
		}
		cases := []struct {
			ts, wantOff, wantTs int64
		}{
			{0, 0, 1000},
			{1000, 0, 1000},
			{1005, 1, 1010},
			{1020, 2, 1020},
			{1021, 3, 1100},
			{1420, 14, 1420},
			{1421, 18, 1600}, // batch 5 (offsets 15-17) is older
			{520, 0, 1000},
			{2920, 59, 2920},
			{2921, -1, -1},
		}
		for _, c := range cases {
			off, ts, err := l.OffsetForTimestamp(c.ts)
			if err != nil {
				t.Fatal(err)
			}
			if off != c.wantOff || ts != c.wantTs {
				t.Errorf("OffsetForTimestamp(%d) = %d,%d want %d,%d", c.ts, off, ts, c.wantOff, c.wantTs)
			}
		}
		if off, ts := l.MaxTimestamp(); off != 59 || ts != 2920 {
			t.Errorf("MaxTimestamp = %d,%d", off, ts)
		}
		// Respects the log start offset.
		if _, err := l.DeleteRecords(4); err != nil {
			t.Fatal(err)
		}
		if off, ts, _ := l.OffsetForTimestamp(0); off != 4 || ts != 1110 {
			t.Errorf("after DeleteRecords(4): %d,%d", off, ts)
		}
	})
}

func TestEmptyLogLookups(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
	defer l.Close()
	if off, ts, err := l.OffsetForTimestamp(0); off != -1 || ts != -1 || err != nil {
		t.Fatalf("empty: %d %d %v", off, ts, err)
	}
	if off, ts := l.MaxTimestamp(); off != -1 || ts != -1 {
		t.Fatalf("empty max: %d %d", off, ts)
	}
	r, err := l.Read(0, 100, 0)
	if err != nil || len(r.Data) != 0 {
		t.Fatalf("empty read: %v %d", err, len(r.Data))
	}
	r.Release()
}

func TestRetention(t *testing.T) {
	const hour = int64(time.Hour / time.Millisecond)
	type step struct {
		advance    time.Duration
		cfg        Config
		wantDelete int
		wantSegs   int
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"time: nothing expired", []step{{0, Config{RetentionMs: 30 * hour}, 0, 5}}},
		{"time: old segments go", []step{
			{0, Config{RetentionMs: 10 * hour}, 2, 3},                    // ages 20h, 15h > 10h
			{0, Config{RetentionMs: 10 * hour}, 0, 3},                    // idempotent
			{time.Millisecond, Config{RetentionMs: 10 * hour}, 1, 2},     // 10h+1ms
			{0, Config{RetentionMs: 10 * hour, RetentionBytes: 1}, 1, 1}, // bytes too
		}},
		{"time: everything expired rolls active", []step{{100 * time.Hour, Config{RetentionMs: hour}, 5, 1}}},
		{"time: unlimited", []step{{1000 * time.Hour, Config{RetentionMs: -1}, 0, 5}}},
		{"bytes", []step{{0, Config{RetentionMs: -1, RetentionBytes: 2500}, 2, 3}}},
		{"bytes: never the active", []step{{0, Config{RetentionMs: -1, RetentionBytes: 1}, 4, 1}}},
		{"compact only keeps everything", []step{{1000 * time.Hour, Config{RetentionMs: hour, Compact: true}, 0, 5}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			// The records are stamped up to 20h ahead of the clock, which
			// then catches up: no after-bound.
			l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Now: clk.Now,
				Config: Config{SegmentBytes: 1100, RetentionMs: -1, TimestampAfterMaxMs: math.MaxInt64}})
			defer l.Close()
			// 5 segments of ~1000 bytes; segment i's records are i*5h old
			// relative to the last.
			base := clk.Now().UnixMilli()
			for seg := 0; seg < 5; seg++ {
				for b := 0; b < 2; b++ {
					mustAppend(t, l, testBatch{records: 4, valueSize: 100, firstTs: base + int64(seg)*5*hour}.build(), true)
				}
			}
			clk.Advance(20 * time.Hour) // now = last segment's time
			if n := len(l.segments()); n != 5 {
				t.Fatalf("setup: %d segments", n)
			}
			for _, s := range c.steps {
				clk.Advance(s.advance)
				l.SetConfig(Config{SegmentBytes: 1100, RetentionMs: s.cfg.RetentionMs, RetentionBytes: s.cfg.RetentionBytes, Compact: s.cfg.Compact})
				n, err := l.ApplyRetention()
				if err != nil {
					t.Fatal(err)
				}
				if n != s.wantDelete || len(l.segments()) != s.wantSegs {
					t.Fatalf("deleted %d (want %d), %d segments left (want %d)", n, s.wantDelete, len(l.segments()), s.wantSegs)
				}
				if ls := l.LogStartOffset(); ls != l.segments()[0].base && !(s.wantSegs == 1 && ls == l.LogEndOffset()) {
					t.Fatalf("log start %d, first segment %d", ls, l.segments()[0].base)
				}
				if _, err := l.Read(0, 100, l.HighWatermark()); s.wantDelete > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("read of deleted offset 0: %v", err)
				}
			}
			// Appends continue.
			mustAppend(t, l, testBatch{records: 1, firstTs: clk.Now().UnixMilli()}.build(), true)
		})
	}
}

// TestRetentionWhileReading: a reader holding a segment keeps reading it
// while retention deletes it; its files go when the reader is done.
func TestRetentionWhileReading(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: Config{SegmentBytes: 1000, RetentionBytes: 1, RetentionMs: -1}})
	defer l.Close()
	for range 10 {
		mustAppend(t, l, testBatch{records: 4, valueSize: 100}.build(), true)
	}
	first := l.segments()[0]
	if !first.acquire() {
		t.Fatal("acquire")
	}
	n, err := l.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	// Still readable through the held reference.
	buf := make([]byte, first.size.Load())
	if err := readFull(first.f, buf, 0); err != nil {
		t.Fatalf("read deleted-but-held segment: %v", err)
	}
	if _, err := mem.Stat(first.path(logSuffix)); err != nil {
		t.Fatalf("file removed while held: %v", err)
	}
	first.release(l)
	if _, err := mem.Stat(first.path(logSuffix)); err == nil {
		t.Fatal("file not removed after release")
	}
}

func TestDeleteRecordsPersisted(t *testing.T) {
	mem := vfs.NewCrashableMem()
	opts := Options{FS: mem, Dir: "/p", Config: Config{SegmentBytes: 1000}}
	l := mustOpen(t, opts)
	for range 10 {
		mustAppend(t, l, testBatch{records: 4, valueSize: 100}.build(), true)
	}
	if _, err := l.DeleteRecords(l.HighWatermark() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond hw: %v", err)
	}
	ls, err := l.DeleteRecords(13)
	if err != nil || ls != 13 || l.LogStartOffset() != 13 {
		t.Fatalf("DeleteRecords: %d %v", ls, err)
	}
	if ls, _ := l.DeleteRecords(5); ls != 13 {
		t.Fatalf("moving back: %d", ls)
	}
	if _, err := l.Read(12, 100, l.HighWatermark()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	if l.segments()[0].base > 13 {
		t.Fatal("segment holding offset 13 deleted")
	}
	img := mem.CrashClone() // crash: the log start survives
	l.Close()
	l2 := mustOpen(t, Options{FS: img, Dir: "/p"})
	defer l2.Close()
	if l2.LogStartOffset() != 13 {
		t.Fatalf("after crash log start %d", l2.LogStartOffset())
	}
	if ls, _ := l2.DeleteRecords(-1); ls != l2.HighWatermark() {
		t.Fatalf("DeleteRecords(-1) = %d, hw %d", ls, l2.HighWatermark())
	}
}

func TestLogAppendTime(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Now: clk.Now, Config: Config{TimestampType: LogAppendTime}})
	defer l.Close()
	r := mustAppend(t, l, testBatch{records: 3, firstTs: 5, tsStep: 1}.build(), true)
	if r.LogAppendTime != clk.Now().UnixMilli() || r.Batches[0].MaxTimestamp != r.LogAppendTime {
		t.Fatalf("log append time %d, batch max %d", r.LogAppendTime, r.Batches[0].MaxTimestamp)
	}
	rr, _ := l.Read(0, 1000, l.HighWatermark())
	defer rr.Release()
	b, err := validateStored(rr.Data)
	if err != nil {
		t.Fatal(err)
	}
	if b.Attributes&attrLogAppendTime == 0 || b.MaxTimestamp != r.LogAppendTime {
		t.Fatalf("stored attrs %x max %d", b.Attributes, b.MaxTimestamp)
	}
	if off, ts, _ := l.OffsetForTimestamp(r.LogAppendTime); off != 0 || ts != r.LogAppendTime {
		t.Fatalf("lookup by append time: %d %d", off, ts)
	}
	// CreateTime topics clear the bit and fix a wrong max timestamp.
	l.SetConfig(Config{})
	bad := testBatch{records: 2, firstTs: 100, tsStep: 50}.build()
	binary.BigEndian.PutUint64(bad[offMaxTimestamp:], 1)
	binary.BigEndian.PutUint32(bad[offCRC:], BatchCRC(bad))
	r = mustAppend(t, l, bad, true)
	if r.LogAppendTime != -1 || r.Batches[0].MaxTimestamp != 150 {
		t.Fatalf("create time: %+v", r)
	}
	if _, err := validateStored(bad); err != nil {
		t.Fatalf("rewritten batch invalid: %v", err)
	}
}

func TestAppendRejects(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: Config{MaxMessageBytes: 500}})
	defer l.Close()
	mustAppend(t, l, testBatch{records: 1}.build(), true)
	big := testBatch{records: 2, valueSize: 300}.build()
	if _, err := l.Append(big, true); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("big: %v", err)
	}
	good := testBatch{records: 1}.build()
	corrupt := testBatch{records: 1}.build()
	corrupt[len(corrupt)-1] ^= 0xff
	if _, err := l.Append(append(good, corrupt...), true); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupt second batch: %v", err)
	}
	if _, err := l.Append(nil, true); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("empty: %v", err)
	}
	if l.LogEndOffset() != 1 {
		t.Fatalf("rejected appends changed the log: leo %d", l.LogEndOffset())
	}
	// Two batches in one append get consecutive offsets.
	two := append(testBatch{records: 2}.build(), testBatch{records: 3}.build()...)
	r := mustAppend(t, l, two, true)
	if r.BaseOffset != 1 || r.LastOffset != 5 || len(r.Batches) != 2 || r.Batches[1].BaseOffset != 3 {
		t.Fatalf("two batches: %+v", r)
	}
	l.Close()
	if _, err := l.Append(testBatch{}.build(), true); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestNonDurableBecomesVisible(t *testing.T) {
	mem := vfs.NewCrashableMem()
	// Hold the background fsync back until the read below is done.
	gate := make(chan struct{})
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpSync && strings.HasSuffix(op.Path, ".log") {
			<-gate
		}
		return nil
	}))
	l := mustOpen(t, Options{FS: fs, Dir: "/p"})
	defer l.Close()
	ch := l.Changed()
	r := mustAppend(t, l, testBatch{records: 2}.build(), false)
	// Appended but not synced: an offset in (hw, leo] reads nothing (as in
	// Kafka); beyond leo is out of range.
	if rr, err := l.Read(1, 100, l.HighWatermark()); err != nil || len(rr.Data) != 0 {
		t.Fatalf("read between hw and leo: %v, %d bytes", err, len(rr.Data))
	}
	if _, err := l.Read(3, 100, l.HighWatermark()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read beyond leo: %v", err)
	}
	close(gate)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("non-durable append never became visible")
	}
	waitHWAtLeast(t, l, r.LastOffset+1)
}

func TestSyncIntervalPolicy(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l := mustOpen(t, Options{FS: mem, Dir: "/p", Sync: SyncInterval, SyncInterval: time.Hour})
	defer l.Close()
	mustAppend(t, l, testBatch{records: 2}.build(), true)
	if l.HighWatermark() != 2 {
		t.Fatalf("hw %d: interval policy makes appends visible at once", l.HighWatermark())
	}
	// Not durable until the interval: a crash now loses it (documented).
	img := mem.CrashClone()
	l2 := mustOpen(t, Options{FS: img, Dir: "/p"})
	if l2.LogEndOffset() != 0 {
		t.Fatalf("unsynced data survived the strict crash: %d", l2.LogEndOffset())
	}
	l2.Close()
}

// countingFS counts bytes read from .log files.
func countingFS(fs vfs.FS, n *atomic.Int64) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpRead && len(op.Path) > 4 && op.Path[len(op.Path)-4:] == ".log" {
			n.Add(int64(op.Len))
		}
		return nil
	}))
}

func TestCleanOpenScansNothing(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := Config{SegmentBytes: 4000}
	l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: cfg})
	for range 100 {
		mustAppend(t, l, testBatch{records: 2, valueSize: 100}.build(), true)
	}
	l.Close()
	var n atomic.Int64
	l = mustOpen(t, Options{FS: countingFS(mem, &n), Dir: "/p", Config: cfg})
	if n.Load() > batchHeaderSize {
		t.Fatalf("clean open read %d bytes of segments", n.Load())
	}
	for _, s := range l.segments()[:len(l.segments())-1] {
		if s.loaded {
			t.Fatal("closed segment index loaded at open")
		}
	}
	readAllRaw(t, l, "after clean open")
	if countLoaded(l) == 0 {
		t.Fatal("no index loaded by reads")
	}
	l.indexBudget = 1
	l.unloadIndexes()
	if n := countLoaded(l); n != 1 {
		t.Fatalf("%d closed segment indexes loaded over budget, want 1", n)
	}
	readAllRaw(t, l, "with a tiny index budget")
	l.Close()
}

func countLoaded(l *Log) int {
	n := 0
	for _, s := range l.segments() {
		s.mu.RLock()
		if s.loaded && s.closed {
			n++
		}
		s.mu.RUnlock()
	}
	return n
}

// TestCrashScansOnlyTail: after a crash, recovery reads only what follows
// the checkpoint, not the whole log.
func TestCrashScansOnlyTail(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := Config{SegmentBytes: 100000}
	l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: cfg})
	for range 300 {
		mustAppend(t, l, testBatch{records: 2, valueSize: 100}.build(), true)
	}
	if err := l.checkpoint(true); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		mustAppend(t, l, testBatch{records: 2, valueSize: 100}.build(), true)
	}
	tail := int64(10 * len(testBatch{records: 2, valueSize: 100}.build()))
	img := mem.CrashClone()
	l.Close()
	var n atomic.Int64
	l2 := mustOpen(t, Options{FS: countingFS(img, &n), Dir: "/p", Config: cfg})
	defer l2.Close()
	if l2.LogEndOffset() != 620 {
		t.Fatalf("leo %d", l2.LogEndOffset())
	}
	if got := n.Load(); got > tail+batchHeaderSize {
		t.Fatalf("recovery read %d bytes, tail is %d", got, tail)
	}
	readAllRaw(t, l2, "after")
}

// TestIndexDamageRebuilt: damaged or missing index files of closed
// segments are rebuilt from the log on first use.
func TestIndexDamageRebuilt(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := Config{SegmentBytes: 3000, IndexIntervalBytes: 300}
	l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: cfg})
	for i := range 60 {
		mustAppend(t, l, testBatch{records: 2, valueSize: 100, firstTs: int64(1000 + i)}.build(), true)
	}
	l.Close()
	names, _ := mem.List("/p")
	var idx []string
	for _, n := range names {
		if _, ok := parseSegmentName(n, indexSuffix); ok {
			idx = append(idx, n)
		}
	}
	// Damage: garbage in one, remove one, out-of-order entries in a third.
	f, _ := mem.OpenReadWrite("/p/" + idx[0])
	f.WriteAt([]byte("garbage!"), 0)
	f.Close()
	mem.Remove("/p/" + idx[1])
	mem.Remove("/p/" + segmentName(mustBase(idx[2]), timeIndexSuffix))
	l = mustOpen(t, Options{FS: mem, Dir: "/p", Config: cfg})
	defer l.Close()
	hs := readAllRaw(t, l, "after damage")
	if len(hs) != 60 {
		t.Fatalf("%d batches", len(hs))
	}
	if off, ts, _ := l.OffsetForTimestamp(1030); off != 60 || ts != 1030 {
		t.Fatalf("timestamp lookup after rebuild: %d %d", off, ts)
	}
	// Rewritten on disk.
	b, err := vfs.ReadFile(mem, "/p/"+idx[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseOffsetIndex(b, mustBase(idx[0]), -1); err != nil {
		t.Fatalf("index not rewritten: %v", err)
	}
}

func mustBase(name string) int64 {
	b, _ := parseSegmentName(name, indexSuffix)
	return b
}

// TestConcurrentAppendReadRetention runs appenders, readers, retention and
// timestamp lookups together (meant for -race).
func TestConcurrentAppendReadRetention(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: Config{SegmentBytes: 2000, RetentionBytes: 6000, RetentionMs: -1, IndexIntervalBytes: 100}})
	defer l.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for i := 0; i < 150; i++ {
				if _, err := l.Append(testBatch{records: 2, valueSize: 50, firstTs: int64(i)}.build(), i%2 == 0); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				off := l.LogStartOffset()
				r, err := l.Read(off, 1000, l.HighWatermark())
				if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
					t.Errorf("read: %v", err)
					return
				}
				for d := r.Data; len(d) > 0; {
					h, err := validateStored(d[:parseHeader(d).Size()])
					if err != nil {
						t.Errorf("bad batch: %v", err)
						return
					}
					d = d[h.Size():]
				}
				r.Release()
				l.OffsetForTimestamp(50)
				l.MaxTimestamp()
			}
		})
	}
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.ApplyRetention(); err != nil {
				t.Errorf("retention: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	if l.LogEndOffset() != 900 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
}

// TestNoRecoveryPoint: without (or with a damaged) recovery point, a crash
// recovery scans only the last segment and keeps every synced batch.
func TestNoRecoveryPoint(t *testing.T) {
	for _, damage := range []string{"remove", "garbage"} {
		mem := vfs.NewCrashableMem()
		cfg := Config{SegmentBytes: 2000}
		l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: cfg})
		for range 30 {
			mustAppend(t, l, testBatch{records: 2, valueSize: 100}.build(), true)
		}
		leo := l.LogEndOffset()
		img := mem.CrashClone()
		l.Close()
		if damage == "remove" {
			img.Remove("/p/" + checkpointFile)
		} else {
			f, _ := img.OpenReadWrite("/p/" + checkpointFile)
			f.WriteAt([]byte("xxxx"), 10)
			f.Close()
		}
		var n atomic.Int64
		l2 := mustOpen(t, Options{FS: countingFS(img, &n), Dir: "/p", Config: cfg})
		segs := l2.segments()
		if last := segs[len(segs)-1].size.Load(); n.Load() > last+batchHeaderSize {
			t.Fatalf("%s: read %d bytes, last segment is %d", damage, n.Load(), last)
		}
		if l2.LogEndOffset() != leo {
			t.Fatalf("%s: leo %d want %d", damage, l2.LogEndOffset(), leo)
		}
		if got := readAllRaw(t, l2, damage); len(got) != 30 {
			t.Fatalf("%s: %d batches", damage, len(got))
		}
		l2.Close()
	}
}

func TestRollBySegmentMs(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Now: clk.Now, Config: Config{SegmentMs: 60_000}})
	defer l.Close()
	mustAppend(t, l, testBatch{records: 1}.build(), true)
	clk.Advance(59 * time.Second)
	mustAppend(t, l, testBatch{records: 1}.build(), true)
	if n := len(l.segments()); n != 1 {
		t.Fatalf("rolled too early: %d segments", n)
	}
	clk.Advance(2 * time.Second)
	r := mustAppend(t, l, testBatch{records: 1}.build(), true)
	segs := l.segments()
	if len(segs) != 2 || segs[1].base != r.BaseOffset {
		t.Fatalf("no roll after segment.ms: %d segments", len(segs))
	}
	// An empty active segment never rolls.
	clk.Advance(time.Hour)
	l2segs := len(l.segments())
	if l2segs != 2 {
		t.Fatal("empty segment rolled")
	}
}

// FuzzRecovery: arbitrary bytes appended to (or overwriting the tail of)
// the active segment after a crash never make Open panic or serve an
// invalid batch, and the synced batches survive.
func FuzzRecovery(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 60}, false)
	f.Add(testBatch{records: 2}.build(), false)
	f.Add([]byte("garbage"), true)
	f.Fuzz(func(t *testing.T, tail []byte, overwrite bool) {
		mem := vfs.NewCrashableMem()
		l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: Config{SegmentBytes: 4000}})
		for range 12 {
			mustAppend(t, l, testBatch{records: 2, valueSize: 90}.build(), true)
		}
		synced := l.LogEndOffset()
		l.Close()
		segs, _ := mem.List("/p")
		var last string
		for _, n := range segs {
			if _, ok := parseSegmentName(n, logSuffix); ok {
				last = n
			}
		}
		fh, err := mem.OpenReadWrite("/p/" + last)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := fh.Stat()
		at := st.Size()
		if overwrite && at > int64(len(tail)) {
			at -= int64(len(tail)) // damage synced bytes: recovery may cut them
		}
		fh.WriteAt(tail, at)
		fh.Close()
		// Make the recovery point stale so the tail is scanned.
		mem.Remove("/p/" + checkpointFile)
		l2, err := Open(Options{FS: mem, Dir: "/p", Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer l2.Close()
		if !overwrite && l2.LogEndOffset() < synced {
			t.Fatalf("synced batches lost: leo %d < %d", l2.LogEndOffset(), synced)
		}
		readAllRaw(t, l2, "fuzz")
		if _, err := l2.Append(testBatch{records: 1}.build(), true); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

func TestCorruptionOnRead(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: Config{SegmentBytes: 1000}})
	defer l.Close()
	for range 6 {
		mustAppend(t, l, testBatch{records: 2, valueSize: 100}.build(), true)
	}
	seg := l.segments()[0]
	size := int64(len(testBatch{records: 2, valueSize: 100}.build()))
	// Damage the magic byte of the second batch of the first segment.
	f, _ := mem.OpenReadWrite(seg.path(logSuffix))
	f.WriteAt([]byte{7}, size+offMagic)
	f.Close()
	_, err := l.Read(2, 10000, l.HighWatermark())
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != seg.name() || ce.Offset != size {
		t.Fatalf("want CorruptionError at %s:%d, got %v", seg.name(), size, err)
	}
	// Other segments still read.
	if r, err := l.Read(l.segments()[1].base, 10000, l.HighWatermark()); err != nil || len(r.Data) == 0 {
		t.Fatalf("read of an intact segment: %v", err)
	}
}

// TestCompressedTimestampLookup: timestamp lookups are record-exact inside
// compressed batches of every codec.
func TestCompressedTimestampLookup(t *testing.T) {
	for _, tb := range []testBatch{
		{codec: codecGzip}, {codec: codecSnappy}, {codec: codecSnappy, xerial: true}, {codec: codecLZ4}, {codec: codecZstd},
	} {
		l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
		tb.records, tb.valueSize, tb.firstTs, tb.tsStep = 10, 200, 1000, 10
		mustAppend(t, l, tb.build(), true)
		tb.firstTs = 2000
		mustAppend(t, l, tb.build(), true)
		for _, c := range []struct{ ts, off, got int64 }{{1000, 0, 1000}, {1041, 5, 1050}, {1095, 10, 2000}, {2055, 16, 2060}, {3000, -1, -1}} {
			off, ts, err := l.OffsetForTimestamp(c.ts)
			if err != nil || off != c.off || ts != c.got {
				t.Errorf("codec %d xerial %v: OffsetForTimestamp(%d) = %d,%d,%v want %d,%d", tb.codec, tb.xerial, c.ts, off, ts, err, c.off, c.got)
			}
		}
		if off, ts := l.MaxTimestamp(); off != 19 || ts != 2090 {
			t.Errorf("codec %d: MaxTimestamp = %d,%d", tb.codec, off, ts)
		}
		l.Close()
	}
}
