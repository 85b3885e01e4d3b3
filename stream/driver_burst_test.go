package stream

import (
	"context"
	"testing"
	"time"
)

// The Driver restarted in the middle of a burst of window closes
// (window_burst.go): Driver.Restart drops the local stores and the next
// task restores them from the changelog written so far — the windows (rows,
// panes), the close index a restore derives, and the mark with the burst's
// cursor — and closes the rest. Process runs a burst's rounds at once, so
// these tests step them (burstStep) to restart between two of them.

// burstJump pipes a record of key "~" at ts to the run's single partition
// and processes it with its round only, as Process does, leaving the burst
// it starts pending; it returns the task.
func burstJump(r *windowRun, ts int64) *task {
	r.t.Helper()
	if _, err := r.d.Pipe("in", []byte("~"), int64Bytes(0), time.UnixMilli(ts)); err != nil {
		r.t.Fatal(err)
	}
	id := taskID{sub: 0, partition: 0}
	tk, err := r.d.task(id)
	if err != nil {
		r.t.Fatal(err)
	}
	tp := topicPartition{"in", 0}
	q := r.d.queues[tp]
	if len(q) != 1 {
		r.t.Fatalf("%d records queued, want the jump's", len(q))
	}
	delete(r.d.queues, tp)
	if err := tk.handle(context.Background(), q[0]); err != nil {
		r.t.Fatal(err)
	}
	if err := r.d.round(tk); err != nil {
		r.t.Fatal(err)
	}
	return tk
}

// burstStep runs one round of task tk without records, as Process does
// while a close is pending.
func burstStep(r *windowRun, tk *task) {
	r.t.Helper()
	if err := r.d.round(tk); err != nil {
		r.t.Fatal(err)
	}
}

// burstDriverFeed pipes a record per key at each of 100, 600 and 1100 (one
// round each, as pipe does) and returns them.
func burstDriverFeed(r *windowRun) []wrec {
	keys := burstKeys("k", 25)
	var recs []wrec
	for _, ts := range []int64{100, 600, 1100} {
		for _, k := range at(keys, ts) {
			k.val = 1
			recs = append(recs, k)
			r.pipe(k)
		}
	}
	return recs
}

// A Driver whose state is restored from its changelog while a burst is
// pending (restored when a record arrives, when Tick starts the task, or
// again after each of the burst's rounds) emits every window's final
// result exactly once, equal to the batch answer: tumbling, hopping in
// rows and in per-pane entries.
func TestDriverBurstRestore(t *testing.T) {
	for _, c := range burstCrashLayouts {
		for _, how := range []string{"record", "tick", "twice", "each-round"} {
			t.Run(c.name+"/"+how, func(t *testing.T) {
				r := newWindowRun(t, c.w, finalStore("w"), 1, 0, aggAggregate, WindowClosesPerRound(6))
				recs := burstDriverFeed(r)
				want := batchTime(recs, c.size, c.adv, 0, true)
				tk := burstJump(r, 1_000_000)
				if c.name == "hopping" && !tk.timed[0].(*windowOp[string, int64, int64]).d.rows {
					t.Fatal("the hopping store is not in row form")
				}
				burstStep(r, tk)
				if !tk.closesPending() {
					t.Fatal("no close pending two rounds into the burst")
				}
				before := len(r.outputs())
				if before == 0 || before >= len(want) {
					t.Fatalf("%d of %d results before the restart, want some", before, len(want))
				}
				if err := r.d.Restart(); err != nil {
					t.Fatal(err)
				}
				switch how {
				case "record":
					// Late for every window of k00 (the restored mark).
					r.pipe(wrec{key: "k00", ts: 1200, val: 1})
				case "tick":
					if err := r.d.Tick(); err != nil {
						t.Fatal(err)
					}
				case "twice":
					// One round after the restore (its first: it deletes
					// the leftovers of closed windows up to the mark's
					// cursor), then a second restart.
					tk, err := r.d.task(taskID{sub: 0, partition: 0})
					if err != nil {
						t.Fatal(err)
					}
					burstStep(r, tk)
					if err := r.d.Restart(); err != nil {
						t.Fatal(err)
					}
					if err := r.d.Tick(); err != nil {
						t.Fatal(err)
					}
				case "each-round":
					for i := 0; ; i++ {
						if i == c.rounds {
							t.Fatalf("closes still pending after %d restarts", i)
						}
						tk, err := r.d.task(taskID{sub: 0, partition: 0})
						if err != nil {
							t.Fatal(err)
						}
						burstStep(r, tk)
						if !tk.closesPending() {
							break
						}
						if err := r.d.Restart(); err != nil {
							t.Fatal(err)
						}
					}
					if err := r.d.Process(); err != nil {
						t.Fatal(err)
					}
				}
				if d := diffResults(r.finals(), want); d != "[]" {
					t.Fatal(d)
				}
			})
		}
	}
}
