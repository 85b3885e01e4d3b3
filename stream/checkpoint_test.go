package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// A periodic commit writes a task's local checkpoint only once
// checkpointInterval passed since the last one (or when it has none); a
// forced one (hand-over, shutdown) always writes. What is not checkpointed
// is replayed from the changelog after a crash.
func TestCheckpointWrittenEveryInterval(t *testing.T) {
	h := newHarness(t, builtWith(recycleTopology))
	tk := h.task("in", 0)
	feed := func(n int) {
		for range n {
			h.feed("in", 0, "k", "v", t0)
		}
	}
	check := func(step string, force bool, want state.Checkpoint) {
		t.Helper()
		if err := h.a.checkpoint([]*task{tk}, force); err != nil {
			t.Fatal(err)
		}
		got, err := tk.db.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: checkpoint %v, want %v", step, got, want)
		}
	}
	feed(1)
	check("first", false, state.Checkpoint{"c": 1})
	feed(3)
	h.clock.Sleep(t.Context(), defaultCheckpointInterval-time.Millisecond)
	check("before the interval", false, state.Checkpoint{"c": 1})
	h.clock.Sleep(t.Context(), time.Millisecond)
	check("after the interval", false, state.Checkpoint{"c": 4})
	feed(1)
	check("forced", true, state.Checkpoint{"c": 5})
	check("forced, unchanged", true, state.Checkpoint{"c": 5})
	if got := len(h.topic("app-c-changelog")); got != 5 {
		t.Fatalf("%d changelog records, want 5", got)
	}
}

// TestExactlyOnceCrashReplaysTailOverNewerStore kills an ExactlyOnce App
// whose local stores hold committed transactions past their checkpoint (no
// store cache: each committed transaction is written to Pebble at once; the
// checkpoint interval is never reached, so the only checkpoint is the one
// written at the restore). The restart replays the changelog from that
// checkpoint over the newer store and the counts stay exact.
func TestExactlyOnceCrashReplaysTailOverNewerStore(t *testing.T) {
	b := startBrokerFor(t, ExactlyOnce)
	b.createTopic("events", 3)
	b.createTopic("counts", 3)
	const keys = 20
	truth := map[string]int64{}
	dir := t.TempDir()
	opts := []Opt{testLogger(t), WithGuarantee(ExactlyOnce), StateDir(dir), CommitInterval(20 * time.Millisecond),
		MaxPollRecords(25), StoreCache(0)}

	app1 := b.run("ahead", countTopology, append(opts, optFunc(func(c *config) { c.checkpointInterval = time.Hour }))...)
	produceEvents(b, 0, 300, keys, truth)
	b.waitForIso("counts", true, 30*time.Second, func(r []*kgo.Record) bool { return len(r) >= 100 })
	if err := app1.kill(); err != nil {
		t.Fatalf("killed app: %v", err)
	}

	// The precondition: some task's store counts more records than the
	// changelog holds below its checkpoint.
	changelog := b.readCommitted("ahead-counts-changelog")
	ahead := false
	for p := range int32(3) {
		db, err := state.Open(filepath.Join(dir, "ahead", taskID{sub: 0, partition: p}.String()), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		cp, err := db.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		var stored int64
		err = db.Scan("counts", nil, nil, func(_, v []byte, _ int64) error {
			n, err := Int64().Decode(v)
			stored += n
			return err
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		var below int64
		for _, r := range changelog {
			if r.Partition == p && r.Offset < cp["counts"] {
				below++
			}
		}
		t.Logf("task 0_%d: checkpoint %v, store counts %d records, changelog below it %d", p, cp, stored, below)
		ahead = ahead || stored > below
	}
	if !ahead {
		t.Fatal("no store is ahead of its checkpoint: the test does not test the replay over a newer store")
	}

	app2 := b.run("ahead", countTopology, opts...)
	produceEvents(b, 300, 200, keys, truth)
	recs := b.waitForIso("counts", true, 60*time.Second, atLeast(t, truth))
	if err := app2.stop(); err != nil {
		t.Fatalf("app2: %v", err)
	}
	checkExact(t, recs, truth)
	if n := counterValue(app2.a.metrics.restored); n == 0 {
		t.Error("the restart replayed no changelog tail")
	}
}

// Between checkpoints an ExactlyOnce task's committed writes may sit in its
// store cache; a query (which reads Pebble) asks for them and the loop's
// serveFlushes writes them, so the query sees every committed write.
func TestQueryFlushesCommittedWritesBetweenCheckpoints(t *testing.T) {
	h := newHarness(t, builtWith(recycleTopology))
	tk := h.task("in", 0)
	h.a.tasks[tk.id] = tk
	get := func() int64 {
		t.Helper()
		v, _, found, err := tk.db.Get("c", []byte("k"))
		if err != nil || !found {
			t.Fatalf("get: found %v, %v", found, err)
		}
		n, err := Int64().Decode(v)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	h.feed("in", 0, "k", "v", t0)
	if err := h.a.checkpoint([]*task{tk}, false); err != nil { // the first: written
		t.Fatal(err)
	}
	if ch := tk.awaitFlush(); ch != nil {
		t.Fatal("a query waits after a checkpoint")
	}
	h.feed("in", 0, "k", "v", t0)
	if err := h.a.checkpoint([]*task{tk}, false); err != nil { // not due
		t.Fatal(err)
	}
	if n := get(); n != 1 {
		t.Fatalf("Pebble holds count %d before the flush, want 1 (the cache holds 2)", n)
	}
	ch := tk.awaitFlush()
	if ch == nil || h.a.flushRequests.Load() != 1 {
		t.Fatalf("no flush requested (%v, %d requests)", ch, h.a.flushRequests.Load())
	}
	if tk.awaitFlush() != ch || h.a.flushRequests.Load() != 1 {
		t.Fatal("a second query made a second request")
	}
	if err := h.a.serveFlushes(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("the flush did not release the query")
	}
	if n := get(); n != 2 {
		t.Fatalf("count %d after the flush, want 2", n)
	}
	if tk.awaitFlush() != nil || h.a.flushRequests.Load() != 0 {
		t.Fatalf("still waiting after the flush (%d requests)", h.a.flushRequests.Load())
	}
	delete(h.a.tasks, tk.id)
}

// TestQuerySeesCommitsBetweenCheckpoints runs the keyed count with no
// checkpoint after the restore's (a one-hour interval): every committed
// write stays in the store cache, and only a query's flush request gets it
// to Pebble, after the next commit (at-least-once) or transaction end
// (ExactlyOnce). Once the outputs show the true counts, every query answers
// them exactly.
func TestQuerySeesCommitsBetweenCheckpoints(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			b := startBrokerFor(t, g)
			b.createTopic("events", 2)
			b.createTopic("counts", 2)
			const keys = 10
			r := b.run("fresh", countTopology, testLogger(t), StateDir(t.TempDir()), WithGuarantee(g),
				CommitInterval(20*time.Millisecond), optFunc(func(c *config) { c.checkpointInterval = time.Hour }))
			truth := map[string]int64{}
			produceEvents(b, 0, 200, keys, truth)
			b.waitForIso("counts", g == ExactlyOnce, 30*time.Second, atLeast(t, truth))
			q, err := QueryStore[string, int64](r.a, "counts")
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range truth {
				got, err := retryQuery(t, "get "+k, func(ctx context.Context) (int64, error) {
					v, found, err := q.Get(ctx, k)
					if err == nil && !found {
						err = fmt.Errorf("key %s not found", k)
					}
					return v, err
				})
				if err != nil || got != want {
					t.Fatalf("get %s = %d, %v; want %d", k, got, err, want)
				}
			}
			if n := r.a.flushRequests.Load(); n != 0 {
				t.Errorf("%d flush requests left after the queries", n)
			}
		})
	}
}

// A commit whose checkpoint is not due leaves a task that wrote nothing
// since its last flush flushed: its queries answer at once instead of
// waiting for the next commit (issue 16, defect 2).
func TestCommitWithoutWritesLeavesTaskFlushed(t *testing.T) {
	h := newHarness(t, builtWith(recycleTopology))
	tk := h.task("in", 0)
	h.a.tasks[tk.id] = tk // for serveFlushes
	defer delete(h.a.tasks, tk.id)
	h.feed("in", 0, "k", "v", t0)
	if err := h.a.checkpoint([]*task{tk}, false); err != nil { // the first: written
		t.Fatal(err)
	}
	for i := range 3 { // commits of an idle task: nothing written, checkpoint not due
		if err := h.a.checkpoint([]*task{tk}, false); err != nil {
			t.Fatal(err)
		}
		if ch := tk.awaitFlush(); ch != nil {
			t.Fatalf("idle commit %d: a query waits for a flush though nothing was written", i)
		}
	}
	h.feed("in", 0, "k", "v", t0) // a write: now a query must wait for it
	if err := h.a.checkpoint([]*task{tk}, false); err != nil {
		t.Fatal(err)
	}
	if tk.awaitFlush() == nil {
		t.Fatal("a committed write sits in the cache, and a query does not wait for it")
	}
	if err := h.a.serveFlushes(); err != nil {
		t.Fatal(err)
	}
	if err := h.a.checkpoint([]*task{tk}, false); err != nil {
		t.Fatal(err)
	}
	if tk.awaitFlush() != nil {
		t.Fatal("after the flush, an idle commit made queries wait again")
	}
}

// TestIdleAppLookupsAnswerAtOnce: once an App is idle and its tasks' cached
// writes were flushed (by a first round of lookups), the commits that follow
// leave every task flushed, so no later lookup waits for a commit (issue 16,
// defect 2: with several partitions, idle lookups waited ~1s at-least-once).
func TestIdleAppLookupsAnswerAtOnce(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			b := startBrokerFor(t, g)
			b.createTopic("events", 3)
			b.createTopic("counts", 3)
			r := b.run("idle", countTopology, testLogger(t), StateDir(t.TempDir()), WithGuarantee(g),
				CommitInterval(20*time.Millisecond), optFunc(func(c *config) { c.checkpointInterval = time.Hour }))
			truth := map[string]int64{}
			produceEvents(b, 0, 300, 12, truth)
			b.waitForIso("counts", g == ExactlyOnce, 30*time.Second, atLeast(t, truth))
			q, err := QueryStore[string, int64](r.a, "counts")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// At-least-once outputs are visible before their commit: let
			// the commits of the last writes pass.
			time.Sleep(300 * time.Millisecond)
			for k := range truth { // flushes what the counting left in the caches
				if _, _, err := q.Get(ctx, k); err != nil {
					t.Fatal(err)
				}
			}
			// Idle from here: let a few commits pass (20ms each).
			time.Sleep(300 * time.Millisecond)
			for _, tk := range r.a.allTasks() {
				if tk.awaitFlush() != nil {
					t.Errorf("task %s of an idle App: a lookup waits for the next commit", tk.id)
				}
			}
		})
	}
}

// TestStoppedRestoreKeepsWhatItRestored: a full restore stopped midway
// (SIGTERM: the Run context ends) checkpoints what it restored, so the next
// start replays only the rest of the changelog instead of all of it again
// (issue 16 defect 4).
func TestStoppedRestoreKeepsWhatItRestored(t *testing.T) {
	b := startBroker(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	batches := 0
	stopAfter := withRestoreBatches(func(int) {
		if batches++; batches == 3 {
			cancel() // the next poll sees it
		}
	})
	// Small fetches: the changelog takes many batches.
	small := ClientOpts(kgo.FetchMaxBytes(4<<10), kgo.FetchMaxPartitionBytes(4<<10))
	r := newRestoreRig(t, b, dir, stopAfter, small)
	b.createTopic(r.changelog, 1)
	r.write(20_000, 500)

	tk, err := r.a.newTask(r.id())
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.restore(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("restore stopped with %v, want context.Canceled", err)
	}
	cp, err := tk.db.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.close(); err != nil {
		t.Fatal(err)
	}
	kept := cp["counts"]
	if kept <= 0 || kept >= r.written {
		t.Fatalf("checkpoint after the stopped restore: %v, want one strictly inside (0, %d)", cp, r.written)
	}

	n, _ := r.restore() // checks the store against the changelog's model
	if want := int(r.written - kept); n != want {
		t.Fatalf("the next restore replayed %d records, want the %d past the checkpoint %d", n, want, kept)
	}
}
