package stream

import (
	"fmt"
	"testing"
	"time"
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
	}{
		{Tumbling(time.Second), 1000, 1000},
		{Hopping(time.Second, 200*time.Millisecond), 1000, 200},
	} {
		recs := genRecords(9, 1200, keys, 1_000_000, 5, 0)
		r := newWindowRun(t, tc.w, finalStore("fresh"), 2, 0, aggSum, StoreCache(4<<10))
		r.pipe(recs[:500]...)
		if len(r.outputs()) == 0 {
			t.Fatalf("%s: nothing closed before the restart", tc.w.describe())
		}
		if err := r.d.Restart(); err != nil {
			t.Fatal(err)
		}
		r.pipe(recs[500:900]...)
		if err := r.d.Restart(); err != nil {
			t.Fatal(err)
		}
		r.pipe(recs[900:]...)
		r.flush(10_000_000)
		if d := diffResults(r.finals(), batchTime(recs, tc.size, tc.adv, 0, false)); d != "[]" {
			t.Fatalf("%s: %s", tc.w.describe(), d)
		}
		ev := uint64(0)
		for _, tk := range r.d.tasks {
			ev += tk.db.Evictions()
		}
		if ev == 0 {
			t.Fatalf("%s: the store cache never evicted: the test needs one that does", tc.w.describe())
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
