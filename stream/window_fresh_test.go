package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// New time windows skip their existence read only when that is safe: with a
// store cache far too small for the open windows (evictions throughout), a
// restart (the store restored from the changelog, windows open across it)
// and many keys, the final results equal the batch computation. Reading a
// window as absent when it exists would overwrite its aggregate and lose
// records.
func TestWindowFreshEndsTinyCacheRestart(t *testing.T) {
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	for _, tc := range []struct {
		w         Windows
		size, adv int64
		cache     int64
	}{
		{Tumbling(time.Second), 1000, 1000, 5 << 10},
		{Hopping(time.Second, 200*time.Millisecond), 1000, 200, 4 << 10},
		// Larger: dirty windows stay cached across rounds (a window is one
		// entry of the cache: its close index is the database's).
		{Tumbling(time.Second), 1000, 1000, 5 << 10},
		{Hopping(time.Second, 200*time.Millisecond), 1000, 200, 6 << 10}, // row form: one entry per key
	} {
		recs := genRecords(9, 1200, keys, 1_000_000, 5, 0)
		r := newWindowRun(t, tc.w, finalStore("fresh"), 2, 0, aggSum, StoreCache(tc.cache))
		ev := uint64(0) // evictions, over the three lives of the tasks
		evictions := func() {
			for _, tk := range r.d.tasks {
				ev += tk.db.Evictions()
			}
		}
		r.pipe(recs[:500]...)
		if len(r.outputs()) == 0 {
			t.Fatalf("%s: nothing closed before the restart", tc.w.describe())
		}
		evictions()
		if err := r.d.Restart(); err != nil {
			t.Fatal(err)
		}
		r.pipe(recs[500:900]...)
		evictions()
		if err := r.d.Restart(); err != nil {
			t.Fatal(err)
		}
		r.pipe(recs[900:]...)
		r.flush(10_000_000)
		if d := diffResults(r.finals(), batchTime(recs, tc.size, tc.adv, 0, false)); d != "[]" {
			t.Fatalf("%s: %s", tc.w.describe(), d)
		}
		evictions()
		if ev == 0 {
			t.Fatalf("%s, cache %d: the store cache never evicted: the test needs one that does", tc.w.describe(), tc.cache)
		}
	}
}

// A late record (LateUpdates) updates its closed, retained window: that
// window exists though the close scans passed it, so it is read, also when
// the tiny store cache evicted it.
func TestWindowFreshEndsLateUpdatesReadRetained(t *testing.T) {
	store := WindowedStore{Name: "fresh", Late: LateUpdates(), Emit: EmitFinal(), Retain: 20 * time.Second}
	r := newWindowRun(t, Tumbling(time.Second), store, 1, 0, aggSum, StoreCache(4<<10))
	var recs []wrec
	for i := range 200 {
		recs = append(recs, wrec{key: fmt.Sprintf("k%03d", i), ts: 100 + int64(i), val: 1})
	}
	r.pipe(recs...)
	r.pipe(wrec{key: "~", ts: 5000, val: 0}) // closes [0, 1000)
	for i := range 200 {
		r.pipe(wrec{key: fmt.Sprintf("k%03d", i), ts: 600, val: 10})
	}
	got := r.latest()
	for i := range 200 {
		if k := wkey(fmt.Sprintf("k%03d", i), 0, 1000); got[k] != 11 {
			t.Fatalf("%s = %d, want 11 (the final 1, corrected by the late 10)", k, got[k])
		}
	}
	if r.d.tasks[taskID{}].db.Evictions() == 0 {
		t.Fatal("the store cache never evicted: the test needs one that does")
	}
}

// A transaction that aborts (ExactlyOnce) undoes the windows it created and
// updated while the operator's notes of created windows stay: redone, the
// records read their windows again, and the results count every record
// once. The tiny store cache makes the reads reach the database.
// windowAbortRun is one task of a windowed count fed directly, round by
// round, so that a test can open a transaction (tk.beginRound) and abort it
// (tk.abortRound); its 4 KiB store cache makes reads reach the database.
// got holds each window's last result (sentinel keys "~..." left out),
// emitted counts every result the task produced.
type windowAbortRun struct {
	t       *testing.T
	tk      *task
	got     map[string]int64
	emitted int
	off     int64 // the next input offset
}

func newWindowAbortRun(t *testing.T, w Windows) *windowAbortRun {
	t.Helper()
	bl := NewBuilder()
	WindowedCount(GroupByKey(From(bl, "in", String(), Int64())), w,
		WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}).
		ToStream().To("out", TimeWindowed(String(), time.Second), Int64())
	r := &windowAbortRun{t: t, got: map[string]int64{}}
	capture := withProducer(func(kr *kgo.Record, promise func(*kgo.Record, error)) {
		if kr.Topic == "out" {
			k, err := TimeWindowed(String(), time.Second).Decode(kr.Key)
			v, verr := Int64().Decode(kr.Value)
			if err == nil && verr == nil && k.Key[0] != '~' {
				r.got[wkey(k.Key, k.Start.UnixMilli(), k.End.UnixMilli())] = v
				r.emitted++
			}
		}
		promise(kr, nil)
	}, false)
	a, err := NewApp("abort", bl, Brokers("127.0.0.1:1"), StateDir(t.TempDir()), capture,
		StoreCache(4<<10), Watermarks(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.tk, err = a.newTask(taskID{sub: 0, partition: 0}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.tk.close() })
	return r
}

// round handles one record of value 1 per key at time ms, then ends the
// batch.
func (r *windowAbortRun) round(keys []string, ms int64) {
	r.t.Helper()
	for _, k := range keys {
		kr := &kgo.Record{Topic: "in", Key: []byte(k), Value: int64Bytes(1), Offset: r.off, Timestamp: time.UnixMilli(ms)}
		r.off++
		if err := r.tk.handle(context.Background(), kr); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.tk.endBatch(); err != nil {
		r.t.Fatal(err)
	}
}

// flush commits the task's state (flushState).
func (r *windowAbortRun) flush() {
	r.t.Helper()
	if err := r.tk.flushState(); err != nil {
		r.t.Fatal(err)
	}
}

func TestWindowFreshEndsAfterAbort(t *testing.T) {
	r := newWindowAbortRun(t, Tumbling(time.Second))
	tk, got, round := r.tk, r.got, r.round
	keys := func(prefix string, n int) []string {
		var ks []string
		for i := range n {
			ks = append(ks, fmt.Sprintf("%s%03d", prefix, i))
		}
		return ks
	}
	old, fresh := keys("k", 100), keys("n", 100)
	round(old, 100) // committed: k* in [0, 1000) and ...
	round(old, 1100)
	r.flush() // ... in [1000, 2000)
	tk.beginRound()
	start := r.off
	round(fresh, 1200) // new windows, and updates of committed ones: aborted
	round(old, 1300)
	tk.abortRound()
	r.off = start
	round(fresh, 1200) // redone
	round(old, 1300)
	r.flush()
	round([]string{"~"}, 10_000)
	r.flush()
	if r.emitted != 300 {
		t.Fatalf("%d results, want 300", r.emitted)
	}
	for _, k := range old {
		if got[wkey(k, 0, 1000)] != 1 || got[wkey(k, 1000, 2000)] != 2 {
			t.Fatalf("%s: [0, 1000) = %d, [1000, 2000) = %d; want 1 and 2", k, got[wkey(k, 0, 1000)], got[wkey(k, 1000, 2000)])
		}
	}
	for _, k := range fresh {
		if got[wkey(k, 1000, 2000)] != 1 {
			t.Fatalf("%s: [1000, 2000) = %d, want 1", k, got[wkey(k, 1000, 2000)])
		}
	}
	if tk.db.Evictions() == 0 {
		t.Fatal("the store cache never evicted: the test needs one that does")
	}
}

// Rounds that cannot close a window do not scan the close index: the
// operator keeps what its committed scans established across rounds, also
// at-least-once, where a task commits each round and then discards the
// store transaction. A round whose watermark passes a window end scans
// once, and without writing the store cache to Pebble.
func TestWindowCommittedRoundsKeepScans(t *testing.T) {
	bl := NewBuilder()
	WindowedCount(GroupByKey(From(bl, "in", String(), Int64())), Tumbling(time.Second),
		WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}).
		ToStream().To("out", TimeWindowed(String(), time.Second), Int64())
	emitted := 0
	capture := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		if r.Topic == "out" {
			emitted++
		}
		promise(r, nil)
	}, false)
	a, err := NewApp("scans", bl, Brokers("127.0.0.1:1"), StateDir(t.TempDir()), capture, Watermarks(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := a.newTask(taskID{sub: 0, partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.close()
	op, ok := tk.timed[0].(interface{ indexScans() int })
	if !ok {
		t.Fatalf("timed operator %T is not the windowed one", tk.timed[0])
	}
	ctx := context.Background()
	off := int64(0)
	round := func(ms int64) {
		t.Helper()
		for i := range 10 {
			r := &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("k%d", i)), Value: int64Bytes(1), Offset: off,
				Timestamp: time.UnixMilli(ms)}
			off++
			if err := tk.handle(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := tk.endBatch(); err != nil {
			t.Fatal(err)
		}
		if err := tk.flushState(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		round(1000 + int64(i)) // the window [1000, 2000) stays open
	}
	if n := op.indexScans(); n > 1 {
		t.Fatalf("%d close index scans in 50 rounds that close nothing, want at most 1", n)
	}
	before := op.indexScans()
	round(2500) // closes [1000, 2000)
	if emitted != 10 {
		t.Fatalf("%d results after the watermark passed the window, want 10", emitted)
	}
	if n := op.indexScans() - before; n != 1 {
		t.Fatalf("%d scans in the round that closes the window, want 1", n)
	}
	// The windows opened, closed and were deleted in the store cache: the
	// close scan found them in the operator's notes, not in Pebble.
	if f := tk.db.Flushes(); f != 0 {
		t.Fatalf("the store cache was flushed %d times; want none (no checkpoint, cache not full)", f)
	}
	for i := range 20 {
		round(2600 + int64(i))
	}
	if n := op.indexScans() - before; n != 1 {
		t.Fatalf("%d scans after the close, want none more", n-1)
	}
}

// EarlyInterval's set of windows updated since their last emission
// survives a restart: it is rebuilt from the windows' stored counts, so a
// window updated before the restart gets its early result one interval
// after it, and a window already emitted gets none.
func TestWindowEarlyIntervalAcrossRestart(t *testing.T) {
	clk := &instantClock{now: time.Unix(1000, 0)}
	store := WindowedStore{Name: "early", Late: DropLate(), Emit: EmitFinal(EarlyInterval(time.Minute))}
	r := newWindowRun(t, Tumbling(time.Hour), store, 1, 0, aggCount, ProcessingClock(clk))
	r.pipe(wrec{key: "a", ts: 100}, wrec{key: "b", ts: 200})
	clk.now = clk.now.Add(time.Minute)
	r.pipe(wrec{key: "a", ts: 300}) // fires a and b
	if got := len(r.outputs()); got != 2 {
		t.Fatalf("%d outputs after the first interval, want 2 (a, b)", got)
	}
	r.pipe(wrec{key: "c", ts: 400}, wrec{key: "a", ts: 500}) // wait for the next interval
	if err := r.d.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted operator's interval starts at its first round.
	if err := r.d.Tick(); err != nil {
		t.Fatal(err)
	}
	clk.now = clk.now.Add(time.Minute)
	if err := r.d.Tick(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range r.outputs()[2:] {
		got = append(got, o.win+"="+strconv.FormatInt(o.val, 10))
	}
	if want := "a|0|3600000=3 c|0|3600000=1"; strings.Join(got, " ") != want {
		t.Fatalf("early results after the restart %v, want %s", got, want)
	}
}
