package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/stream/internal/timekey"
)

// App.Get of a window key on a store in pane layout (rows, and one entry
// per pane past paneRowMax) returns the window's panes combined, as a store
// with one entry per window holds it, from the partition of the window's
// grouping key; a closed window, a window with no pane of the key and a
// key off the window grid are not found.
func TestWindowPaneGetCombinesWindow(t *testing.T) {
	for _, adv := range []int64{200, 25} {
		w := Hopping(time.Second, time.Duration(adv)*time.Millisecond)
		r := newWindowRun(t, w, finalStore("q"), 3, 10*time.Second, aggSum)
		recs := []wrec{{key: "a", ts: 1250, val: 1}, {key: "a", ts: 1700, val: 2}, {key: "b", ts: 1800, val: 4},
			{key: "a", ts: 2300, val: 8}, {key: "c", ts: 2950, val: 16}, {key: "b", ts: 3100, val: 32}}
		r.pipe(recs...)
		// The watermark passes 2400: the windows ending by it close.
		r.flush(12_400)
		app := r.d.App()
		get := func(key string, start, end int64) (int64, bool) {
			t.Helper()
			wk := timekey.WindowKey(nil, []byte(key), start, end)
			e, found, err := app.Get(context.Background(), "q", wk)
			if err != nil {
				t.Fatalf("advance %d: Get %s: %v", adv, wkey(key, start, end), err)
			}
			if !found {
				return 0, false
			}
			if e.Timestamp.UnixMilli() != end-1 || string(e.Key) != string(wk) {
				t.Fatalf("advance %d: Get %s: key %q timestamp %d", adv, wkey(key, start, end), e.Key, e.Timestamp.UnixMilli())
			}
			if want := storeKeyPartition(app.stores["q"], wk, 3); e.Partition != want || want != keyPartition([]byte(key), 3) {
				t.Fatalf("advance %d: Get %s: partition %d, want %d (the key's)", adv, wkey(key, start, end), e.Partition, want)
			}
			v, err := decodeWindowAgg(Int64(), false, e.Value)
			if err != nil {
				t.Fatal(err)
			}
			return v, true
		}
		open, closed := 0, 0
		for k, want := range batchTime(recs, 1000, adv, 0, false) {
			var key string
			var start, end int64
			if _, err := fmt.Sscanf(strings.ReplaceAll(k, "|", " "), "%s %d %d", &key, &start, &end); err != nil {
				t.Fatal(err)
			}
			got, found := get(key, start, end)
			switch {
			case end <= 2400 && found:
				t.Fatalf("advance %d: closed window %s found (%d)", adv, k, got)
			case end <= 2400:
				closed++
			case !found || got != want:
				t.Fatalf("advance %d: window %s = %d (found %v), want %d", adv, k, got, found, want)
			default:
				open++
			}
		}
		if open == 0 || closed == 0 {
			t.Fatalf("advance %d: %d open and %d closed windows: the test needs both", adv, open, closed)
		}
		if _, found := get("c", 1000, 2000); found {
			t.Fatalf("advance %d: a window without a pane of the key found", adv)
		}
		if _, found := get("b", 1810, 2810); found {
			t.Fatalf("advance %d: a window off the grid found", adv)
		}
	}
}

// A close does not log the row it writes back: after a restore from the
// changelog, a row may still hold windows the store's mark covers. Queries
// (App.Range, App.Get) do not show them, and no close emits them again.
func TestWindowPaneRowRestoredHidesClosedWindows(t *testing.T) {
	r := newWindowRun(t, Hopping(time.Second, 200*time.Millisecond), finalStore("q"), 1, 10*time.Second, aggSum)
	recs := []wrec{{key: "a", ts: 1250, val: 1}, {key: "a", ts: 1700, val: 2}, {key: "b", ts: 1800, val: 4},
		{key: "a", ts: 2300, val: 8}}
	r.pipe(recs...)
	r.flush(12_400) // closes the windows ending by 2400
	if err := r.d.Restart(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for k, v := range batchTime(recs, 1000, 200, 0, false) {
		var key string
		var start, end int64
		if _, err := fmt.Sscanf(strings.ReplaceAll(k, "|", " "), "%s %d %d", &key, &start, &end); err != nil {
			t.Fatal(err)
		}
		if end > 2400 {
			want[k] = v
		}
	}
	es, err := r.d.App().Range(context.Background(), "q", nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range es {
		key, start, end, err := timekey.ParseWindowKey(e.Key)
		if err != nil {
			t.Fatal(err)
		}
		if string(key) == "a" || string(key) == "b" {
			v, err := decodeWindowAgg(Int64(), false, e.Value)
			if err != nil {
				t.Fatal(err)
			}
			got[wkey(string(key), start, end)] = v
		}
	}
	if d := diffResults(got, want); d != "[]" {
		t.Fatalf("windows after the restore: %s", d)
	}
	if _, found, err := r.d.App().Get(context.Background(), "q", timekey.WindowKey(nil, []byte("a"), 1200, 2200)); err != nil || found {
		t.Fatalf("Get of a closed window after the restore: found %v, %v", found, err)
	}
	r.flush(20_000)
	if d := diffResults(r.finals(), batchTime(recs, 1000, 200, 0, false)); d != "[]" {
		t.Fatal(d)
	}
}
