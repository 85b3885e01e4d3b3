package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/stream/internal/timekey"
)

// storeEntries counts a task's window or pane entries ('w'), pane rows
// ('p') and open-window index entries ('c') of store.
func storeEntries(t *testing.T, r *windowRun, store string) (wins, rows, index int) {
	t.Helper()
	for _, tk := range r.d.tasks {
		err := tk.db.Scan(store, nil, nil, func(k, _ []byte, _ int64) error {
			switch k[0] {
			case timekey.TagWindow:
				wins++
			case tagRow:
				rows++
			case timekey.TagIndex:
				index++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return wins, rows, index
}

// In the row form of the pane layout a record of a hopping window
// (size/advance = 5) writes one entry, its key's row, and the key has one
// index entry (its next window to close) whatever its panes, which the
// database derives (it follows the row's next, also back, and is not in
// the store cache); without panes it writes five window entries and their
// five index entries.
func TestWindowPaneRecordWritesOneEntry(t *testing.T) {
	for _, agg := range []windowAgg{aggCount, aggSum, aggAggregate} {
		r := newWindowRun(t, Hopping(time.Second, 200*time.Millisecond), finalStore("p"), 1, 10*time.Second, agg)
		check := func(step string, wantNext int64) {
			t.Helper()
			if w, rows, c := storeEntries(t, r, "p"); w != 0 || rows != 1 || c != 1 {
				t.Fatalf("agg %d: %s: %d window entries, %d rows, %d index entries; want 1 row, 1 index entry",
					agg, step, w, rows, c)
			}
			var v []byte
			found := false
			var err error
			for _, tk := range r.d.tasks {
				if v, _, found, err = tk.db.Get("p", rowKey(nil, []byte("a"))); found || err != nil {
					break
				}
			}
			if err != nil || !found {
				t.Fatalf("agg %d: %s: row of a: %v %v", agg, step, found, err)
			}
			if next, _, err := decodeRow(nil, v); err != nil || next != wantNext {
				t.Fatalf("agg %d: %s: next window ends at %d (%v), want %d", agg, step, next, err, wantNext)
			}
			want := string(timekey.IndexKey(nil, []byte("a"), wantNext-1000, wantNext))
			for _, tk := range r.d.tasks {
				if _, _, found, err := tk.db.Get("p", []byte(want)); err != nil || !found {
					t.Fatalf("agg %d: %s: no index entry at the row's next (%v)", agg, step, err)
				}
				if n := tk.db.CachedKeys(); n > 2 {
					t.Fatalf("agg %d: %s: the store cache holds %d keys, want the row and the mark", agg, step, n)
				}
			}
		}
		r.pipe(wrec{key: "a", ts: 5050, val: 1})
		check("after one record", 5200)
		r.pipe(wrec{key: "a", ts: 5150, val: 2})
		check("after a record in the same pane", 5200)
		r.pipe(wrec{key: "a", ts: 5250, val: 4})
		check("after a record in the next pane", 5200)
		// Out of order, two panes back: its first window [4000, 5000)
		// closes first now.
		r.pipe(wrec{key: "a", ts: 4850, val: 8})
		check("after an earlier record", 5000)
		r.flush(10_000_000)
		want := batchTime([]wrec{{key: "a", ts: 5050, val: 1}, {key: "a", ts: 5150, val: 2}, {key: "a", ts: 5250, val: 4},
			{key: "a", ts: 4850, val: 8}}, 1000, 200, 0, agg == aggCount)
		if d := diffResults(r.finals(), want); d != "[]" {
			t.Fatalf("agg %d: %s", agg, d)
		}
		if w, rows, c := storeEntries(t, r, "p"); w > 0 || rows > 1 || c > 1 {
			t.Fatalf("agg %d: after every window closed: %d window entries, %d rows, %d index entries (the sentinel's only)",
				agg, w, rows, c)
		}
		// The close index is derived from the rows by a restore: the
		// changelog holds rows and the mark, no index entry.
		rows := 0
		for _, rec := range r.d.Records("win-p-changelog") {
			switch rec.Key[0] {
			case timekey.TagIndex, timekey.TagWindow:
				t.Fatalf("agg %d: the changelog holds an index or window entry %q", agg, rec.Key)
			case tagRow:
				rows++
			}
		}
		if rows == 0 {
			t.Fatalf("agg %d: no row in the changelog", agg)
		}
	}
}

// Past paneRowMax panes a window, the pane layout keeps one entry per key
// and pane: a record writes its pane, and the index entries of the windows
// it opens.
func TestWindowPaneEntriesBeyondRowMax(t *testing.T) {
	r := newWindowRun(t, Hopping(time.Second, 25*time.Millisecond), finalStore("p"), 1, 10*time.Second, aggSum)
	if d := r.d.App().Describe(); !strings.Contains(d, "one partial per key and pane") {
		t.Fatalf("not in per-pane layout:\n%s", d)
	}
	r.pipe(wrec{key: "a", ts: 5010, val: 1})
	if w, rows, c := storeEntries(t, r, "p"); w != 1 || rows != 0 || c != 40 {
		t.Fatalf("after one record: %d window entries, %d rows, %d index entries; want 1 pane, 40 windows", w, rows, c)
	}
	r.pipe(wrec{key: "a", ts: 5040, val: 2})
	if w, rows, c := storeEntries(t, r, "p"); w != 2 || rows != 0 || c != 41 {
		t.Fatalf("after a record in the next pane: %d window entries, %d rows, %d index entries", w, rows, c)
	}
}

// The declarations that keep one entry per window: updates and early
// firings emit a window's result between closes, Retain keeps closed
// windows, a gcd below advance/2 makes many panes per window, tumbling
// windows are their own panes.
func TestWindowPaneLayoutByDeclaration(t *testing.T) {
	for _, tc := range []struct {
		w     Windows
		store WindowedStore
		panes bool
	}{
		{Hopping(time.Second, 200*time.Millisecond), finalStore("p"), true},
		{Hopping(time.Second, 400*time.Millisecond), finalStore("p"), true}, // gcd 200 = advance/2
		{Hopping(time.Second, 25*time.Millisecond), finalStore("p"), true},  // 40 panes: not in rows
		{Hopping(time.Second, 300*time.Millisecond), finalStore("p"), false},
		{Tumbling(time.Second), finalStore("p"), false},
		{Hopping(time.Second, 200*time.Millisecond), WindowedStore{Name: "p", Late: DropLate(), Emit: EmitUpdates()}, false},
		{Hopping(time.Second, 200*time.Millisecond), WindowedStore{Name: "p", Late: DropLate(), Emit: EmitFinal(EarlyEvery(2))}, false},
		{Hopping(time.Second, 200*time.Millisecond), WindowedStore{Name: "p", Late: LateUpdates(), Emit: EmitFinal(), Retain: time.Second}, false},
	} {
		r := newWindowRun(t, tc.w, tc.store, 1, 10*time.Second, aggCount)
		desc := r.d.App().Describe()
		if got := strings.Contains(desc, "stored as panes"); got != tc.panes {
			t.Fatalf("%s %+v: pane layout %v, want %v; Describe:\n%s", tc.w.describe(), tc.store.Emit, got, tc.panes, desc)
		}
	}
}

// A range over a store in pane layout (App.Range, as HTTP /range) returns
// its open hop windows with their combined aggregates, not its panes.
func TestWindowPaneRangeReturnsWindows(t *testing.T) {
	r := newWindowRun(t, Hopping(time.Second, 200*time.Millisecond), finalStore("q"), 2, 10*time.Second, aggSum)
	recs := []wrec{{key: "a", ts: 1250, val: 1}, {key: "a", ts: 1700, val: 2}, {key: "b", ts: 1800, val: 4},
		{key: "a", ts: 2300, val: 8}}
	r.pipe(recs...)
	es, err := r.d.App().Range(context.Background(), "q", nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range es {
		key, start, end, perr := timekey.ParseWindowKey(e.Key)
		if perr != nil {
			t.Fatal(perr)
		}
		v, err := decodeWindowAgg(Int64(), false, e.Value)
		if err != nil {
			t.Fatal(err)
		}
		ks, err := String().Decode(key)
		if err != nil {
			t.Fatal(err)
		}
		if e.Timestamp.UnixMilli() != end-1 {
			t.Fatalf("window %s [%d, %d): timestamp %d, want its last instant", ks, start, end, e.Timestamp.UnixMilli())
		}
		got[wkey(ks, start, end)] = v
	}
	if d := diffResults(got, batchTime(recs, 1000, 200, 0, false)); d != "[]" {
		t.Fatal(d)
	}
	// A limit counts windows.
	if es, err := r.d.App().Range(context.Background(), "q", nil, nil, 3); err != nil || len(es) != 3 {
		t.Fatalf("range limited to 3: %d entries, %v", len(es), err)
	}
}

// Differential: with records out of order beyond the watermark's bound
// (late and partially late ones), over partitions, across restarts that
// restore the store from its changelog, the pane layout's final results
// equal the latest results of the same windows kept one entry per window
// (EmitUpdates keeps that layout), which drop the same late records.
func TestWindowPaneMatchesPerWindowLayout(t *testing.T) {
	for _, w := range []Windows{Hopping(time.Second, 250*time.Millisecond),
		Hopping(time.Second, 400*time.Millisecond, WindowOffset(30*time.Millisecond)),
		Hopping(time.Second, 25*time.Millisecond)} { // beyond paneRowMax: one entry per pane
		for _, agg := range []windowAgg{aggCount, aggSum, aggAggregate} {
			recs := genRecords(uint64(agg)+3, 900, testKeys, 1_000_000, 7, 0)
			shuffleWithin(recs, 700, uint64(agg)+11)
			grace := 100 * time.Millisecond
			panes := newWindowRun(t, w, WindowedStore{Name: "p", Grace: grace, Late: DropLate(), Emit: EmitFinal()},
				3, 200*time.Millisecond, agg)
			perWindow := newWindowRun(t, w, WindowedStore{Name: "p", Grace: grace, Late: DropLate(), Emit: EmitUpdates()},
				3, 200*time.Millisecond, agg)
			if !strings.Contains(panes.d.App().Describe(), "stored as panes") {
				t.Fatalf("%s: not in pane layout", w.describe())
			}
			for i, part := range [][]wrec{recs[:300], recs[300:600], recs[600:]} {
				if i > 0 {
					if err := panes.d.Restart(); err != nil {
						t.Fatal(err)
					}
				}
				panes.pipe(part...)
				perWindow.pipe(part...)
			}
			panes.flush(10_000_000)
			perWindow.flush(10_000_000)
			want := perWindow.latest()
			if len(want) < 100 {
				t.Fatalf("%s: only %d windows", w.describe(), len(want))
			}
			if d := diffResults(panes.finals(), want); d != "[]" {
				t.Fatalf("%s, agg %d: %s", w.describe(), agg, d)
			}
		}
	}
}

// A transaction that aborts (ExactlyOnce) after its closes deleted panes
// brings them back: the redone records and closes still see them (the
// operator rebuilds its fresh filters from the store after an abort), and
// every final result counts every record once. The tiny store cache makes
// the reads reach the database.
func TestWindowPaneAbortRestoresPanes(t *testing.T) {
	r := newWindowAbortRun(t, Hopping(time.Second, 200*time.Millisecond))
	tk := r.tk
	var recs []wrec
	// round notes the records of rounds that count (note).
	round := func(keys []string, ms int64, note bool) {
		t.Helper()
		r.round(keys, ms)
		if !note {
			return
		}
		for _, k := range keys {
			recs = append(recs, wrec{key: k, ts: ms})
		}
	}
	var old, fresh []string
	for i := range 100 {
		old, fresh = append(old, fmt.Sprintf("k%03d", i)), append(fresh, fmt.Sprintf("n%03d", i))
	}
	round(old, 100, true)
	round(old, 300, true) // the panes [200, 400): the aborted close of [200, 1200) deletes them
	round(old, 700, true)
	r.flush()
	round(old, 1100, true) // closes up to 1100, committed next
	r.flush()
	tk.beginRound()
	start := r.off
	// Closes windows up to 1250 (deleting the panes [0, 200)), creates
	// panes and windows, updates committed panes: all aborted.
	round(fresh, 1250, false)
	round(old, 1300, false)
	round(old, 700, false)
	tk.abortRound()
	r.off = start
	round(fresh, 1250, true)
	round(old, 1300, true)
	round(old, 700, true) // redone: late for [-200, 800) .. [200, 1200) only
	r.flush()
	round([]string{"~"}, 10_000, false)
	r.flush()
	// The last round at 700 came after closes up to 1300: it counts in
	// the windows still open then, [400, 1400) and [600, 1600).
	want := batchTime(recs[:len(recs)-100], 1000, 200, 0, true)
	for _, k := range old {
		want[wkey(k, 400, 1400)]++
		want[wkey(k, 600, 1600)]++
	}
	if d := diffResults(r.got, want); d != "[]" {
		t.Fatal(d)
	}
	// The aborted round's closes ([200, 1200) of the old keys) reached the
	// producer too (its transaction aborts them): once more each.
	if r.emitted != len(want)+len(old) {
		t.Fatalf("%d results, want %d", r.emitted, len(want)+len(old))
	}
	if tk.db.Evictions() == 0 {
		t.Fatal("the store cache never evicted: the test needs one that does")
	}
}

// QueryWindows.Fetch on a store in pane layout: a key's windows starting in
// [from, to), combined from panes that start before from too.
func TestWindowPaneQueryFetchBounds(t *testing.T) {
	r := newWindowRun(t, Hopping(time.Second, 200*time.Millisecond), finalStore("q"), 3, 10*time.Second, aggSum)
	recs := []wrec{{key: "a", ts: 1250, val: 1}, {key: "a", ts: 1700, val: 2}, {key: "b", ts: 1800, val: 4},
		{key: "a", ts: 2300, val: 8}, {key: "a", ts: 900, val: 16}}
	r.pipe(recs...)
	q, err := QueryWindows[string, int64](r.d.App(), "q")
	if err != nil {
		t.Fatal(err)
	}
	es, err := q.Fetch(context.Background(), "a", time.UnixMilli(1400), time.UnixMilli(2200))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range es {
		got[wkey(e.Key.Key, e.Key.Start.UnixMilli(), e.Key.End.UnixMilli())] = e.Value
	}
	want := map[string]int64{}
	for k, v := range batchTime(recs, 1000, 200, 0, false) {
		var key string
		var start, end int64
		fmt.Sscanf(strings.ReplaceAll(k, "|", " "), "%s %d %d", &key, &start, &end)
		if key == "a" && start >= 1400 && start < 2200 {
			want[k] = v
		}
	}
	if len(want) != 4 {
		t.Fatalf("want %v: the test needs 4 windows", want)
	}
	if d := diffResults(got, want); d != "[]" {
		t.Fatal(d)
	}
}
