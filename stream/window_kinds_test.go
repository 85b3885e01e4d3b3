package stream

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestWindowSessionsMatchBatch(t *testing.T) {
	for _, agg := range []windowAgg{aggCount, aggSum, aggAggregate} {
		// Sparse records with out-of-order arrivals: sessions form, and
		// late-arriving records bridge two of them.
		recs := genRecords(3, 500, testKeys[:4], 1_000_000, 90, 400)
		r := newWindowRun(t, Session(250*time.Millisecond), finalStore("sess"), 1, 400*time.Millisecond, agg)
		r.pipe(recs...)
		r.flush(10_000_000)
		want := batchSessions(recs, 250, agg == aggCount)
		if d := diffResults(r.finals(), want); d != "[]" {
			t.Fatalf("agg %d: %s", agg, d)
		}
	}
}

// A record between two sessions merges them; the merged session's result is
// the one emitted.
func TestWindowSessionMerge(t *testing.T) {
	r := newWindowRun(t, Session(150*time.Millisecond), finalStore("merge"), 1, time.Second, aggSum)
	r.pipe(wrec{key: "a", ts: 1000, val: 1}, wrec{key: "a", ts: 1050, val: 2}, // session [1000, 1050]
		wrec{key: "a", ts: 1300, val: 4}, // session [1300, 1300]
		wrec{key: "a", ts: 1180, val: 8}) // within 150 of both: one session [1000, 1300]
	r.flush(100_000)
	want := map[string]int64{wkey("a", 1000, 1300): 15}
	if d := diffResults(r.finals(), want); d != "[]" {
		t.Fatal(d)
	}
}

func TestWindowSlidingMatchesBatch(t *testing.T) {
	for _, agg := range []windowAgg{aggCount, aggSum} {
		recs := genRecords(4, 300, testKeys[:3], 1_000_000, 40, 200)
		r := newWindowRun(t, Sliding(150*time.Millisecond), finalStore("slide"), 1, 200*time.Millisecond, agg)
		r.pipe(recs...)
		r.flush(10_000_000)
		want := batchSliding(recs, 150, agg == aggCount)
		if d := diffResults(r.finals(), want); d != "[]" {
			t.Fatalf("agg %d: %s", agg, d)
		}
	}
}

// Kafka Streams' documented example (SlidingWindows javadoc: time
// difference 5 s, records at 8 s, 9.2 s and 12.4 s).
func TestWindowSlidingKafkaExample(t *testing.T) {
	r := newWindowRun(t, Sliding(5*time.Second), finalStore("kafka"), 1, 10*time.Second, aggCount)
	r.pipe(wrec{key: "a", ts: 8000}, wrec{key: "a", ts: 9200}, wrec{key: "a", ts: 12400})
	r.flush(100_000)
	want := map[string]int64{
		wkey("a", 3000, 8000): 1, wkey("a", 4200, 9200): 2, wkey("a", 7400, 12400): 3,
		wkey("a", 8001, 13001): 2, wkey("a", 9201, 14201): 1,
	}
	if d := diffResults(r.finals(), want); d != "[]" {
		t.Fatal(d)
	}
}

// A restart that loses the local stores restores the windows (and their
// close index) from the changelog: the final results are still emitted,
// each exactly once, and equal the batch answer; a record the old owner's
// watermark had made late is still late after the restart, although the
// new owner's watermark starts from nothing.
func TestWindowRestartRestoresFromChangelog(t *testing.T) {
	for _, w := range []Windows{Hopping(time.Second, 500*time.Millisecond), Session(300 * time.Millisecond),
		Sliding(200 * time.Millisecond)} {
		recs := genRecords(6, 400, testKeys, 1_000_000, 25, 0)
		r := newWindowRun(t, w, finalStore("restart"), 3, 0, aggSum)
		r.pipe(recs[:200]...)
		before := len(r.outputs())
		if before == 0 {
			t.Fatalf("%s: nothing closed before the restart", w.describe())
		}
		if err := r.d.Restart(); err != nil {
			t.Fatal(err)
		}
		// Late for the old watermark (which closed windows at its time),
		// not for a watermark starting afresh.
		r.pipe(wrec{key: "a", ts: recs[0].ts, val: 1000})
		r.pipe(recs[200:]...)
		r.flush(10_000_000)
		var want map[string]int64
		switch w.(type) {
		case TimeWindows:
			want = batchTime(recs, 1000, 500, 0, false)
		case SessionWindows:
			want = batchSessions(recs, 300, false)
		case SlidingWindows:
			want = batchSliding(recs, 200, false)
		}
		if d := diffResults(r.finals(), want); d != "[]" {
			t.Fatalf("%s: %s", w.describe(), d)
		}
	}
}

// QueryWindows reads a key's open windows from the running topology.
func TestWindowQueryFetch(t *testing.T) {
	for _, w := range []Windows{Hopping(time.Second, 500*time.Millisecond), Sliding(time.Second), Session(time.Second)} {
		// An out-of-orderness bound of 10 s: no window closes.
		r := newWindowRun(t, w, finalStore("q"), 3, 10*time.Second, aggSum)
		r.pipe(wrec{key: "a", ts: 1200, val: 1}, wrec{key: "a", ts: 1700, val: 2}, wrec{key: "b", ts: 1800, val: 4})
		q, err := QueryWindows[string, int64](r.d.App(), "q")
		if err != nil {
			t.Fatal(err)
		}
		es, err := q.Fetch(context.Background(), "a", time.UnixMilli(0), time.UnixMilli(10_000))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, e := range es {
			got[wkey(e.Key.Key, e.Key.Start.UnixMilli(), e.Key.End.UnixMilli())] = e.Value
		}
		var want map[string]int64
		recs := []wrec{{key: "a", ts: 1200, val: 1}, {key: "a", ts: 1700, val: 2}}
		switch w.(type) {
		case TimeWindows:
			want = batchTime(recs, 1000, 500, 0, false)
		case SlidingWindows:
			want = batchSliding(recs, 1000, false)
		case SessionWindows:
			want = batchSessions(recs, 1000, false)
		}
		if d := diffResults(got, want); d != "[]" {
			t.Fatalf("%s: %s", w.describe(), d)
		}
		if _, err := QueryWindows[string, string](r.d.App(), "q"); err == nil {
			t.Fatal("QueryWindows with the wrong aggregate type: no error")
		}
	}
}

// A windowed count after GroupBy repartitions by the new key first; the
// results equal the batch computed on the new keys.
func TestWindowAfterRepartition(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), Int64())
	g := GroupBy(in, func(r Record[string, int64]) (string, error) { return "k" + strconv.FormatInt(r.Value%5, 10), nil })
	w := Tumbling(time.Second)
	WindowedCount(g, w, finalStore("rp")).ToStream().To("out", WindowedKeys(String(), w), Int64())
	d, err := NewDriver("win", b, nil, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := &windowRun{t: t, d: d, w: w, parts: 1}
	recs := genRecords(9, 300, testKeys, 1_000_000, 30, 0)
	r.pipe(recs...)
	var rekeyed []wrec
	for _, x := range recs {
		rekeyed = append(rekeyed, wrec{key: "k" + strconv.FormatInt(x.val%5, 10), ts: x.ts})
	}
	// The last window stays open: compare the closed ones.
	got := r.finals()
	want := batchTime(rekeyed, 1000, 1000, 0, true)
	last := recs[len(recs)-1].ts / 1000 * 1000
	for k := range want {
		if strings.Contains(k, "|"+strconv.FormatInt(last, 10)+"|") {
			delete(want, k)
		}
	}
	if dd := diffResults(got, want); dd != "[]" {
		t.Fatal(dd)
	}
	if !slices.Contains(d.Topics(), "win-rp-repartition") {
		t.Fatalf("no repartition topic among %v", d.Topics())
	}
}

// EmitUpdates: the latest update of every window (an upsert view) equals
// the batch result, for time and sliding windows.
func TestWindowEmitUpdatesLatestMatchesBatch(t *testing.T) {
	recs := genRecords(12, 300, testKeys[:3], 1_000_000, 40, 200)
	store := WindowedStore{Name: "upd", Late: DropLate(), Emit: EmitUpdates()}
	for _, w := range []Windows{Hopping(time.Second, 250*time.Millisecond), Sliding(150 * time.Millisecond)} {
		r := newWindowRun(t, w, store, 1, 200*time.Millisecond, aggSum)
		r.pipe(recs...)
		var want map[string]int64
		if _, ok := w.(SlidingWindows); ok {
			want = batchSliding(recs, 150, false)
		} else {
			want = batchTime(recs, 1000, 250, 0, false)
		}
		if d := diffResults(r.latest(), want); d != "[]" {
			t.Fatalf("%s: %s", w.describe(), d)
		}
		if n, m := len(r.outputs()), len(want); n <= m {
			t.Fatalf("%s: %d updates for %d windows: not every change emitted", w.describe(), n, m)
		}
	}
}

// The end of a bounded run (the Driver's EndOfInput: every watermark to the
// end of time) closes every window: all final results, each once, equal to
// the batch — also through a repartition.
func TestWindowEndOfInputClosesAll(t *testing.T) {
	recs := genRecords(13, 300, testKeys, 1_000_000, 30, 100)
	for _, w := range []Windows{Tumbling(time.Second), Session(200 * time.Millisecond), Sliding(100 * time.Millisecond)} {
		r := newWindowRun(t, w, finalStore("eoi"), 3, 100*time.Millisecond, aggCount)
		r.pipe(recs...)
		if err := r.d.EndOfInput(); err != nil {
			t.Fatal(err)
		}
		var want map[string]int64
		switch w.(type) {
		case TimeWindows:
			want = batchTime(recs, 1000, 1000, 0, true)
		case SessionWindows:
			want = batchSessions(recs, 200, true)
		case SlidingWindows:
			want = batchSliding(recs, 100, true)
		}
		if d := diffResults(r.finals(), want); d != "[]" {
			t.Fatalf("%s: %s", w.describe(), d)
		}
	}
}
