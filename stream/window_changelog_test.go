package stream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/timekey"
)

// windowTaskRun is one task of a tumbling windowed count (1 s windows,
// watermark = the largest event time) fed directly, round by round, with
// every changelog record and final result captured. Its task flushes its
// collapsed changelog at the end of every round (no App commits it).
type windowTaskRun struct {
	t         *testing.T
	tk        *task
	off       int64
	changelog []*kgo.Record
	finals    map[string]int64
}

func newWindowTaskRun(t *testing.T, dir string, store WindowedStore) *windowTaskRun {
	t.Helper()
	bl := NewBuilder()
	WindowedCount(GroupByKey(From(bl, "in", String(), Int64())), Tumbling(time.Second), store).
		ToStream().To("out", TimeWindowed(String(), time.Second), Int64())
	r := &windowTaskRun{t: t, finals: map[string]int64{}}
	capture := withProducer(func(kr *kgo.Record, promise func(*kgo.Record, error)) {
		switch {
		case strings.HasSuffix(kr.Topic, "-changelog"):
			c := *kr
			r.changelog = append(r.changelog, &c)
		case kr.Topic == "out":
			k, err := TimeWindowed(String(), time.Second).Decode(kr.Key)
			v, verr := Int64().Decode(kr.Value)
			if err != nil || verr != nil {
				t.Errorf("undecodable result: %v %v", err, verr)
			} else if k.Key[0] != '~' {
				r.finals[wkey(k.Key, k.Start.UnixMilli(), k.End.UnixMilli())] += v
			}
		}
		promise(kr, nil)
	}, false)
	a, err := NewApp("wcl", bl, Brokers("127.0.0.1:1"), StateDir(dir), capture, Watermarks(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.tk, err = a.newTask(taskID{sub: 0, partition: 0}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.tk.close() })
	return r
}

// round handles recs and ends the round; it returns the changelog records
// the round wrote.
func (r *windowTaskRun) round(recs ...wrec) []*kgo.Record {
	r.t.Helper()
	from := len(r.changelog)
	for _, w := range recs {
		kr := &kgo.Record{Topic: "in", Key: []byte(w.key), Value: int64Bytes(w.val), Offset: r.off,
			Timestamp: time.UnixMilli(w.ts)}
		r.off++
		if err := r.tk.handle(context.Background(), kr); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.tk.endBatch(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.tk.flushState(); err != nil {
		r.t.Fatal(err)
	}
	return r.changelog[from:]
}

// describeChangelog names changelog records: "c:a:0" is key a's index entry
// of window [0, 1000), "w-:a:0" the tombstone of its window, "m" the mark.
func describeChangelog(t *testing.T, recs []*kgo.Record) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		del := ""
		if r.Value == nil {
			del = "-"
		}
		switch r.Key[0] {
		case 'm':
			out = append(out, "m"+del)
		case timekey.TagWindow:
			key, start, _, err := timekey.ParseWindowKey(r.Key)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("w%s:%s:%d", del, key, start))
		case timekey.TagIndex, tagRetained:
			k := slices.Clone(r.Key)
			k[0] = timekey.TagIndex
			key, start, _, err := timekey.ParseIndexKey(k)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%c%s:%s:%d", r.Key[0], del, key, start))
		default:
			t.Fatalf("changelog key %q", r.Key)
		}
	}
	return out
}

// A window updated many times between two flushes gets one changelog record
// (its latest value), a window opened and closed between two flushes none,
// and a flush writes new index entries before windows, windows before
// deleted index entries, and the watermark mark last. A store whose close
// index a restore derives writes no index entry at all.
func TestWindowChangelogCollapsed(t *testing.T) {
	t.Run("logged-index", func(t *testing.T) {
		// Retain: closed windows are kept ('r'), so the index is logged.
		testWindowChangelogCollapsed(t, WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal(),
			Retain: 10 * time.Second}, true)
	})
	t.Run("derived-index", func(t *testing.T) {
		testWindowChangelogCollapsed(t, WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}, false)
	})
}

func testWindowChangelogCollapsed(t *testing.T, store WindowedStore, logged bool) {
	r := newWindowTaskRun(t, t.TempDir(), store)
	// without leaves out the index records, if the index is derived.
	without := func(recs []string) []string {
		if logged {
			return recs
		}
		var out []string
		for _, s := range recs {
			if s[0] != 'c' {
				out = append(out, s)
			}
		}
		return out
	}
	got := describeChangelog(t, r.round(wrec{"a", 100, 1}, wrec{"b", 150, 1}, wrec{"a", 200, 1},
		wrec{"a", 300, 1}, wrec{"a", 400, 1}, wrec{"a", 500, 1}))
	if want := without([]string{"c:a:0", "c:b:0", "w:a:0", "w:b:0"}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("round 1 changelog %v, want %v (a window updated 5 times: one record)", got, want)
	}
	cl := r.changelog
	if n, _ := Int64().Decode(cl[len(cl)-2].Value[1:]); n != 5 {
		t.Fatalf("a's collapsed window holds %d, want 5", n)
	}
	got = describeChangelog(t, r.round(wrec{"a", 600, 1}, wrec{"a", 700, 1}))
	if want := without([]string{"w:a:0"}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("round 2 changelog %v, want %v", got, want)
	}
	// y's window [1000, 2000) opens and closes in the round: nothing of
	// it reaches the changelog; a's and b's close.
	got = describeChangelog(t, r.round(wrec{"y", 1200, 1}, wrec{"y", 1300, 1}, wrec{"~", 5000, 0}))
	want := []string{"c:~:5000", "w:~:5000", "w-:a:0", "w-:b:0", "c-:a:0", "c-:b:0", "m"}
	if logged {
		// Retained: every closed window moves to 'r' and stays (y's
		// too, its 'c' entry never logged); ~'s is new.
		want = []string{"c:~:5000", "r:a:0", "r:b:0", "r:y:1000", "w:y:1000", "w:~:5000", "c-:a:0", "c-:b:0", "m"}
	}
	if want = without(want); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("round 3 changelog %v, want %v", got, want)
	}
	if d := diffResults(r.finals, map[string]int64{wkey("a", 0, 1000): 7, wkey("b", 0, 1000): 1,
		wkey("y", 1000, 2000): 2}); d != "[]" {
		t.Fatal(d)
	}
}

// The collapsed changelog restores the store: replayed into an empty
// database it gives the store's contents, and a task restored from it mid
// stream (windows open across the restart, some updated many times between
// flushes, some opened and closed within a round) ends with the batch
// answer, each window's final result emitted once.
func TestWindowChangelogRestoreMatchesBatch(t *testing.T) {
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	recs := genRecords(3, 3000, keys, 1_000_000, 3, 0)
	store := WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}
	first := newWindowTaskRun(t, t.TempDir(), store)
	cut := 1700
	for i := 0; i < cut; i += 97 {
		first.round(recs[i:min(i+97, cut)]...)
	}
	if len(first.finals) == 0 {
		t.Fatal("nothing closed before the restart")
	}
	if n := len(first.changelog); n >= cut {
		t.Fatalf("%d changelog records for %d records: nothing collapsed", n, cut)
	}
	// A windowed store has no TTL: it keeps no TTL index (state.NoTTLIndex).
	if err := first.tk.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := first.tk.db.IndexWrites(); n != 0 {
		t.Fatalf("%d TTL index writes in a windowed store, want none", n)
	}
	second := newWindowTaskRun(t, t.TempDir(), store)
	restoreWindowTask(t, second.tk, first.changelog)
	// The changelog, restored, is the store.
	if a, b := storeContents(t, first.tk), storeContents(t, second.tk); a != b {
		t.Fatalf("restored store differs:\n%s\nwant\n%s", b, a)
	}
	second.off = first.off
	for i := cut; i < len(recs); i += 97 {
		second.round(recs[i:min(i+97, len(recs))]...)
	}
	second.round(wrec{"~", 10_000_000, 0})
	finals := first.finals
	for k, v := range second.finals {
		if _, dup := finals[k]; dup {
			t.Fatalf("%s emitted by both owners", k)
		}
		finals[k] = v
	}
	if d := diffResults(finals, batchTime(recs, 1000, 1000, 0, true)); d != "[]" {
		t.Fatal(d)
	}
}

// restoreWindowTask writes changelog records into tk's store "w", as a
// restore does.
func restoreWindowTask(t *testing.T, tk *task, recs []*kgo.Record) {
	t.Helper()
	txn := tk.db.Begin()
	defer txn.Discard()
	spec := tk.app.stores["w"]
	for _, r := range recs {
		if err := applyStoreChangelog(txn, spec, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
}

// storeContents prints the store "w" of tk.
func storeContents(t *testing.T, tk *task) string {
	t.Helper()
	stored := map[string]string{}
	if err := tk.db.Scan("w", []byte{0}, []byte{0xff}, func(k, v []byte, _ int64) error {
		stored[fmt.Sprintf("%x", k)] = fmt.Sprintf("%x", v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 {
		t.Fatal("empty store")
	}
	return fmt.Sprint(stored)
}

// A tumbling store's close index is derived by its database
// (storeSpec.indexedByDB): an open window is one entry of the store cache,
// not two, and Pebble holds the index entry of exactly the windows it
// holds — also after the windows close and after a restore from the
// changelog — so the close scans find every window.
func TestWindowCloseIndexDerivedByDB(t *testing.T) {
	store := WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}
	r := newWindowTaskRun(t, t.TempDir(), store)
	if !r.tk.app.stores["w"].indexedByDB() {
		t.Fatal("a tumbling store with a derived close index is not indexed by its database")
	}
	var recs []wrec
	for i := range 300 {
		recs = append(recs, wrec{key: fmt.Sprintf("k%03d", i), ts: 100 + int64(i), val: 1})
	}
	r.round(recs...)
	if n := r.tk.db.CachedKeys(); n > 300+2 {
		t.Fatalf("the store cache holds %d keys for 300 open windows, want one each", n)
	}
	// counts returns the number of window and index entries in Pebble.
	counts := func(tk *task) (wins, idx int) {
		t.Helper()
		if err := tk.db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := tk.db.ReadScan("w", nil, nil, func(k, _ []byte, _ int64) error {
			switch k[0] {
			case 'w':
				wins++
			case 'c':
				idx++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return wins, idx
	}
	if w, c := counts(r.tk); w != 300 || c != 300 {
		t.Fatalf("Pebble holds %d windows and %d index entries, want 300 each", w, c)
	}
	second := newWindowTaskRun(t, t.TempDir(), store)
	restoreWindowTask(t, second.tk, r.changelog)
	if w, c := counts(second.tk); w != 300 || c != 300 {
		t.Fatalf("restored: Pebble holds %d windows and %d index entries, want 300 each", w, c)
	}
	for _, run := range []*windowTaskRun{r, second} {
		run.round(wrec{"~", 5000, 0}) // closes [0, 1000)
		if len(run.finals) != 300 {
			t.Fatalf("%d windows closed, want 300", len(run.finals))
		}
		if w, c := counts(run.tk); w != 1 || c != 1 {
			t.Fatalf("after the close Pebble holds %d windows and %d index entries, want the sentinel's", w, c)
		}
	}
}

// A window store's collapsed changelog finds a key's slot by the note on
// its store cache entry (state.Txn.Note), not by a map of its own keyed by
// the same bytes: interleaved updates of two windows collapse to one slot
// each and the index map stays empty; an index key of a logged index
// (Retain: its phase depends on whether it is deleted) keeps using it.
func TestWindowChangelogSlotsOnCacheEntries(t *testing.T) {
	for _, tc := range []struct {
		store   WindowedStore
		indexed int // index keys in the map
	}{
		{WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}, 0},
		{WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal(), Retain: 10 * time.Second}, 2},
	} {
		r := newWindowTaskRun(t, t.TempDir(), tc.store)
		var c *storeChangelog
		for _, f := range r.tk.flushers {
			if sc, ok := f.(*storeChangelog); ok {
				c = sc
			}
		}
		for i, w := range []wrec{{"a", 100, 1}, {"b", 150, 1}, {"a", 200, 1}, {"b", 300, 1}, {"a", 400, 1}} {
			kr := &kgo.Record{Topic: "in", Key: []byte(w.key), Value: int64Bytes(w.val), Offset: int64(i),
				Timestamp: time.UnixMilli(w.ts)}
			if err := r.tk.handle(context.Background(), kr); err != nil {
				t.Fatal(err)
			}
		}
		if n := c.records(); n != 2+tc.indexed {
			t.Fatalf("retain %v: %d collapsed records, want %d", tc.store.Retain, n, 2+tc.indexed)
		}
		if len(c.index) != tc.indexed {
			t.Fatalf("retain %v: the collapse's map holds %d keys, want %d", tc.store.Retain, len(c.index), tc.indexed)
		}
	}
}
