package stream

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRebalanceMovesOnlyWhatMustMove runs the keyed count on one instance,
// adds a second and a third, then stops them again, producing between every
// step. Every handoff is graceful (commit on revoke), so the final counts are
// exact; the first instance only ever closes the tasks it hands over.
func TestRebalanceMovesOnlyWhatMustMove(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { rebalanceRun(t, g) })
	}
}

func rebalanceRun(t *testing.T, g Guarantee) {
	b := startBrokerFor(t, g)
	committed := g == ExactlyOnce
	const parts = 6
	b.createTopic("events", parts)
	b.createTopic("counts", parts)
	const keys = 30
	truth := map[string]int64{}
	opts := func() []Opt {
		return []Opt{testLogger(t), Delivery(g), StateDir(t.TempDir()), CommitInterval(20 * time.Millisecond), MaxPollRecords(20)}
	}
	owned := func(r *runningApp) int {
		r.a.mu.Lock()
		defer r.a.mu.Unlock()
		return len(r.a.tasks) + len(r.a.assigned)
	}
	waitOwned := func(want map[*runningApp]int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok := true
			for r, n := range want {
				if owned(r) != n {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				for r, n := range want {
					t.Logf("instance owns %d tasks, want %d", owned(r), n)
				}
				t.Fatal("assignment did not settle")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	a1 := b.run("counter", countTopology, opts()...)
	produceEvents(b, 0, 300, keys, truth)
	b.waitForIso("counts", committed, 30*time.Second, atLeast(t, truth))
	waitOwned(map[*runningApp]int{a1: parts})
	closedBefore := counterValue(a1.a.metrics.tasksClosed)

	a2 := b.run("counter", countTopology, opts()...)
	waitOwned(map[*runningApp]int{a1: parts / 2, a2: parts / 2})
	if moved := counterValue(a1.a.metrics.tasksClosed) - closedBefore; moved != parts/2 {
		t.Fatalf("first instance closed %v tasks when the second joined, want %d (only the moved ones)", moved, parts/2)
	}
	produceEvents(b, 300, 300, keys, truth)
	b.waitForIso("counts", committed, 30*time.Second, atLeast(t, truth))

	a3 := b.run("counter", countTopology, opts()...)
	waitOwned(map[*runningApp]int{a1: parts / 3, a2: parts / 3, a3: parts / 3})
	produceEvents(b, 600, 300, keys, truth)
	b.waitForIso("counts", committed, 30*time.Second, atLeast(t, truth))

	if err := a2.stop(); err != nil {
		t.Fatal(err)
	}
	produceEvents(b, 900, 300, keys, truth)
	if err := a3.stop(); err != nil {
		t.Fatal(err)
	}
	waitOwned(map[*runningApp]int{a1: parts})
	produceEvents(b, 1200, 300, keys, truth)
	recs := b.waitForIso("counts", committed, 30*time.Second, atLeast(t, truth))
	if err := a1.stop(); err != nil {
		t.Fatal(err)
	}
	got := latest(t, recs)
	for k, n := range truth {
		if got[k] != n {
			t.Errorf("key %s: count %d, want exactly %d after graceful rebalances", k, got[k], n)
		}
	}
	checkPerKeyMonotonic(t, recs)
}

// checkPerKeyMonotonic: each key's emitted counts increase (no repeated
// update across handoffs; lost ones show in the final counts).
func checkPerKeyMonotonic(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	last := map[string]int64{}
	for _, r := range recs {
		n, _ := Int64().Decode(r.Value)
		// Strictly increasing: a table's updates are collapsed per
		// round (gaps), a replayed record would repeat or lower a count.
		if n <= last[string(r.Key)] {
			t.Errorf("key %s: count %d follows %d", r.Key, n, last[string(r.Key)])
		}
		last[string(r.Key)] = n
	}
}
