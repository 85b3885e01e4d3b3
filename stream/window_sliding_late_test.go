package stream

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

// Sliding windows under LateUpdates while a burst of closes is pending
// (window_burst.go): a late record that updates a window whose close the
// bound left pending closes it first (closeTouchedOf), so the window's
// results are its final result without the record, then the correction
// with it — as without a bound; a window the burst closed already (and
// retains) gets the correction alone; a window the record creates, closed
// at its creation, gets one result. Every sequence is checked against
// batchSliding before and after each late record; also with the task
// restored from its changelog while the burst is pending.
func TestWindowBurstLateUpdatesSliding(t *testing.T) {
	for _, restored := range []bool{false, true} {
		t.Run(fmt.Sprintf("restored=%v", restored), func(t *testing.T) { testBurstLateSliding(t, restored) })
	}
}

// testBurstLateSliding runs TestWindowBurstLateUpdatesSliding; restored:
// the task is restored from the changelog (a crash after the jump's
// commit) before the late records.
func testBurstLateSliding(t *testing.T, restored bool) {
	const diff = 200 // the sliding windows' time difference (ms)
	// The burst's rounds: 5 entries each; after the jump's round the
	// windows ending at 100 of k00 to k04 are closed, the rest pending.
	r := newBurstRun(t, Sliding(diff*time.Millisecond),
		WindowedStore{Name: "w", Late: LateUpdates(), Retain: time.Hour, Emit: EmitFinal()}, 5)
	keys := burstKeys("k", 20)
	var before []wrec
	r.begin()
	for _, ts := range []int64{100, 250} {
		before = append(before, at(keys, ts)...)
		r.round(at(keys, ts)...)
	}
	r.round(wrec{key: "~", ts: 5000})
	r.commit()
	if !r.tk.closesPending() {
		t.Fatal("no close pending after the jump")
	}
	if r.perRound[2] != 5 {
		t.Fatalf("the jump's round closed %d windows, want 5", r.perRound[2])
	}
	if restored {
		r.crash()
	}
	// k19: every window pending; k00: [-100, 100] closed (retained),
	// [50, 250] pending; k10 at 300: in [101, 301] (pending), creating
	// [100, 300]; k03 at 50: [-100, 100] closed, creating [-150, 50];
	// k19 again: windows the first k19 record closed and corrected.
	late := []wrec{{key: "k19", ts: 200}, {key: "k00", ts: 90}, {key: "k10", ts: 300}, {key: "k03", ts: 50},
		{key: "k19", ts: 210}}
	r.begin()
	r.round(late...)
	r.commit()
	r.drain(20)
	// After the burst: every window closed and retained.
	late = append(late, wrec{key: "k05", ts: 260})
	r.begin()
	r.round(late[len(late)-1])
	r.commit()
	if got := r.late(); len(got) != 0 {
		t.Fatalf("late records %v sent to the late policy, want every one taken", got)
	}

	// Each window's results: its final result (the batch over the records
	// before the late ones), then, for each late record that changes it (or
	// creates it), the batch over the records up to that one.
	want := map[string][]int64{}
	prev := map[string]int64{}
	for i := 0; i <= len(late); i++ {
		cur := batchSliding(append(slices.Clone(before), late[:i]...), diff, true)
		for w, v := range cur {
			if p, ok := prev[w]; !ok || p != v {
				want[w] = append(want[w], v)
			}
		}
		prev = cur
	}
	got := map[string][]int64{}
	wins, vals := r.committed()
	for i, w := range wins {
		got[w] = append(got[w], vals[i])
	}
	var diffs []string
	for _, w := range slices.Sorted(maps.Keys(want)) {
		if !slices.Equal(got[w], want[w]) {
			diffs = append(diffs, fmt.Sprintf("%s: %v, want %v", w, got[w], want[w]))
		}
	}
	for _, w := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[w]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s: %v", w, got[w]))
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("results per window differ from the batch (%d):\n%v", len(diffs), diffs)
	}
	// The late records touched pending windows (closed first), closed ones
	// (corrections alone) and created windows.
	corrected := 0
	for _, vs := range want {
		if len(vs) >= 2 {
			corrected++
		}
	}
	if corrected < 5 {
		t.Fatalf("%d windows corrected, want the late records to touch at least 4", corrected)
	}
}
