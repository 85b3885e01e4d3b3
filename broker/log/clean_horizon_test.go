package log

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// TestCleanTombstonesRemovedOnBusyTopic: a topic cleaned more often than
// delete.retention.ms / 32 (the cleaner checkpoint keeps at most 32 passes)
// still removes a tombstone once delete.retention.ms has passed since the
// pass that first cleaned it.
func TestCleanTombstonesRemovedOnBusyTopic(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg(), Now: clk.Now})
	defer func() { l.Close() }()
	mustAppend(t, l, kvBatch(testBatch{}, kv{"a", val("1")}), true)
	mustAppend(t, l, kvBatch(testBatch{}, kv{"a", nil}), true)
	start := clk.Now()
	for pass := 0; clk.Now().Sub(start) < 2*time.Hour; pass++ {
		fillSegments(t, l, fmt.Sprint(pass))
		if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		_, tomb := latest(readRecords(t, l))["a"]
		elapsed := clk.Now().Sub(start)
		switch {
		case elapsed < time.Hour && !tomb:
			t.Fatalf("pass %d (%v after the first): tombstone removed before delete.retention.ms", pass, elapsed)
		case elapsed >= time.Hour+5*time.Minute && tomb:
			t.Fatalf("pass %d (%v after the first): tombstone still there", pass, elapsed)
		}
		if len(l.cleaner.passes) > maxCleanPasses {
			t.Fatalf("%d passes in the checkpoint", len(l.cleaner.passes))
		}
		clk.Advance(time.Minute)
	}
}

// TestCleanHorizonPassOnIdleLog: with no new data, the cleaner still runs
// when a stamped marker's delete horizon or a tombstone's delete.retention.ms
// passes (a horizon pass over the clean segments), and not before.
func TestCleanHorizonPassOnIdleLog(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg(), Now: clk.Now})
	defer func() { l.Close() }()
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 0, txn: true}, kv{"x", val("aborted")}), true)
	mustAppend(t, l, markerBatch(5, 0, false, 1), true)
	mustAppend(t, l, kvBatch(testBatch{producerID: 5, seq: 1}, kv{"x", val("1")}), true)
	mustAppend(t, l, kvBatch(testBatch{}, kv{"t", val("1")}, kv{"t", nil}), true)
	fillSegments(t, l, "a")
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned {
		t.Fatalf("pass 1: %+v %v", res, err)
	}
	fillSegments(t, l, "b")
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned {
		t.Fatalf("pass 2: %+v %v", res, err)
	}
	// The marker is stamped; the tombstone kept. Nothing dirty is left
	// (the active segment is never cleanable).
	cs := controlBatches(t, l)
	if len(cs) != 1 || stamped(cs) != 1 {
		t.Fatalf("after pass 2: markers %v", cs)
	}
	if res, err := l.Clean(CleanOptions{}); err != nil || res.Cleaned {
		t.Fatalf("idle, before the horizon: %+v %v", res, err)
	}
	clk.Advance(61 * time.Minute)
	res, err := l.Clean(CleanOptions{})
	if err != nil || !res.Cleaned || res.MarkersRemoved != 1 {
		t.Fatalf("idle, past the horizon: %+v %v", res, err)
	}
	if len(controlBatches(t, l)) != 0 {
		t.Fatal("marker still there")
	}
	if _, ok := latest(readRecords(t, l))["t"]; ok {
		t.Fatal("tombstone still there")
	}
	if res, err := l.Clean(CleanOptions{}); err != nil || res.Cleaned {
		t.Fatalf("nothing left to remove: %+v %v", res, err)
	}
}

// TestCompactPassesModel: for random pass lists, compactPasses keeps at
// most maxCleanPasses entries in order, never makes a tombstone removable
// earlier (for every offset the first covering pass is no older), and keeps
// the current tombstone horizon.
func TestCompactPassesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const ret = 1000
	horizon := func(ps []cleanPass, now int64) int64 {
		h := int64(0)
		for _, p := range ps {
			if now-p.TimeMs >= ret {
				h = max(h, p.End)
			}
		}
		return h
	}
	firstTime := func(ps []cleanPass, off int64) int64 {
		for _, p := range ps {
			if p.End > off {
				return p.TimeMs
			}
		}
		return -1
	}
	for iter := range 300 {
		var ps []cleanPass
		end, now := int64(0), int64(0)
		for range 1 + rng.IntN(80) {
			end += int64(rng.IntN(50))
			now += int64(rng.IntN(200))
			orig := append(append([]cleanPass(nil), ps...), cleanPass{End: end, TimeMs: now})
			ps = compactPasses(append(append([]cleanPass(nil), ps...), cleanPass{End: end, TimeMs: now}), ret, now)
			if len(ps) > maxCleanPasses {
				t.Fatalf("iter %d: %d passes", iter, len(ps))
			}
			if _, err := decodeCleanCkpt(encodeCleanCkpt(ps)); err != nil {
				t.Fatalf("iter %d: %v", iter, err)
			}
			if h0, h1 := horizon(orig, now), horizon(ps, now); h1 != h0 {
				t.Fatalf("iter %d: horizon %d, want %d", iter, h1, h0)
			}
			for off := int64(0); off < end; off += 7 {
				t0, t1 := firstTime(orig, off), firstTime(ps, off)
				if t1 < t0 && now-t1 < ret {
					t.Fatalf("iter %d: offset %d first cleaned at %d, was %d", iter, off, t1, t0)
				}
			}
			ps = append([]cleanPass(nil), ps...)
		}
	}
}

// TestCleanerStatus: never cleaned (-1), then the checkpoint and time of the
// pass, the dirty ratio from the data; while a pass holds the cleaner it
// answers at once with the last known values and Cleaning set; a delete
// topic reports nothing.
func TestCleanerStatus(t *testing.T) {
	clk := newClock()
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg(), Now: clk.Now})
	defer l.Close()
	if st := l.CleanerStatus(); !st.Compacted || st.CleanedTo != -1 || !st.LastClean.IsZero() || st.DirtyRatio != 0 || st.Cleaning {
		t.Fatalf("empty: %+v", st)
	}
	fillSegments(t, l, "a")
	if st := l.CleanerStatus(); st.DirtyRatio != 1 {
		t.Fatalf("nothing cleaned yet: %+v, want dirty ratio 1", st)
	}
	res, err := l.Clean(CleanOptions{})
	if err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	st := l.CleanerStatus()
	if st.CleanedTo != res.CleanedTo || !st.LastClean.Equal(clk.Now().Truncate(time.Millisecond)) || st.DirtyRatio != 0 {
		t.Fatalf("after a pass: %+v (pass %+v)", st, res)
	}
	fillSegments(t, l, "b")
	l.cleaner.mu.Lock() // a pass in progress
	busy := l.CleanerStatus()
	l.cleaner.mu.Unlock()
	if !busy.Cleaning || busy.CleanedTo != res.CleanedTo || busy.DirtyRatio != 0 {
		t.Fatalf("during a pass: %+v", busy)
	}
	if st := l.CleanerStatus(); st.Cleaning || st.DirtyRatio <= 0 || st.DirtyRatio >= 1 {
		t.Fatalf("new dirty data: %+v", st)
	}
	plain := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/q"})
	defer plain.Close()
	if st := plain.CleanerStatus(); st.Compacted || st.CleanedTo != -1 {
		t.Fatalf("delete topic: %+v", st)
	}
}
