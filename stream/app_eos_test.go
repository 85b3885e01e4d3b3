package stream

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestExactlyOnceKillAndRestart kills an ExactlyOnce App mid-stream and
// restarts it (same state directory: same transactional id, so the killed
// incarnation's open transaction is fenced): a read_committed reader of the
// output sees every key's counts exactly once, 1, 2, 3, ..., and the final
// counts equal the true counts. A restart on an empty state directory (full
// restore from the read_committed changelog) continues exactly. It runs on
// both brokers: weir's and kfake.
func TestExactlyOnceKillAndRestart(t *testing.T) {
	for _, kind := range []brokerKind{weirBroker, kfakeBroker} {
		t.Run(string(kind), func(t *testing.T) { exactlyOnceKillRun(t, kind) })
	}
}

func exactlyOnceKillRun(t *testing.T, kind brokerKind) {
	b := startBrokerOn(t, kind)
	b.createTopic("events", 3)
	b.createTopic("counts", 3)
	const keys = 20
	truth := map[string]int64{}
	dir := t.TempDir()
	opts := []Opt{testLogger(t), Delivery(ExactlyOnce), StateDir(dir), CommitInterval(30 * time.Millisecond),
		MaxPollRecords(25), Workers(2)}

	app1 := b.run("exact", countTopology, opts...)
	produceEvents(b, 0, 600, keys, truth)
	b.waitForIso("counts", true, 30*time.Second, counted(t, 150))
	if err := app1.kill(); err != nil {
		t.Fatalf("killed app: %v", err)
	}

	app2 := b.run("exact", countTopology, opts...)
	produceEvents(b, 600, 400, keys, truth)
	recs := b.waitForIso("counts", true, 60*time.Second, atLeast(t, truth))
	if err := app2.stop(); err != nil {
		t.Fatalf("app2: %v", err)
	}
	checkExact(t, recs, truth)

	app3 := b.run("exact", countTopology, Delivery(ExactlyOnce), StateDir(t.TempDir()),
		CommitInterval(30*time.Millisecond))
	produceEvents(b, 1000, keys, keys, truth)
	recs = b.waitForIso("counts", true, 60*time.Second, atLeast(t, truth))
	if err := app3.stop(); err != nil {
		t.Fatalf("app3: %v", err)
	}
	checkExact(t, recs, truth)
	for _, g := range app3.a.Guarantees() {
		if g.Delivery != ExactlyOnce || !strings.Contains(g.Mechanism, "transaction") {
			t.Errorf("%s: %v %q", g.Topic, g.Delivery, g.Mechanism)
		}
	}
	t.Logf("app1 handled %v records before the kill; app2 handled %v, replayed %v changelog records",
		counterValue(app1.a.metrics.recordsIn), counterValue(app2.a.metrics.recordsIn), counterValue(app2.a.metrics.restored))
}

func checkExact(t *testing.T, recs []*kgo.Record, truth map[string]int64) {
	t.Helper()
	checkPerKeyMonotonic(t, recs)
	got := latest(t, recs)
	for k, n := range truth {
		if got[k] != n {
			t.Errorf("key %s: read_committed count %d, want exactly %d", k, got[k], n)
		}
	}
}
