package stream

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func countTopology(b *Builder) {
	in := From(b, "events", String(), String()).
		Peek(func(Record[string, string]) { time.Sleep(200 * time.Microsecond) }) // let a kill land mid-stream
	Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "counts", TTL: 24 * time.Hour}).
		ToStream().To("counts", String(), Int64())
}

// latest returns the last count emitted per key.
func latest(t *testing.T, recs []*kgo.Record) map[string]int64 {
	out := map[string]int64{}
	for _, r := range recs {
		n, err := Int64().Decode(r.Value)
		if err != nil {
			t.Fatalf("count value: %v", err)
		}
		out[string(r.Key)] = n
	}
	return out
}

func produceEvents(b *testBroker, from, n, keys int, truth map[string]int64) {
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		k := key(i % keys)
		truth[k]++
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(k), Value: []byte(fmt.Sprint(i)),
			Timestamp: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	b.produce(recs...)
}

// counted is a waitFor condition on a count table's updates: the latest
// counts add up to at least n records (a table's updates are collapsed per
// round, so there may be fewer updates than records).
func counted(t *testing.T, n int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		var sum int64
		for _, c := range latest(t, recs) {
			sum += c
		}
		return sum >= n
	}
}

func atLeast(t *testing.T, truth map[string]int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		got := latest(t, recs)
		for k, n := range truth {
			if got[k] < n {
				return false
			}
		}
		return true
	}
}

// TestKeyedCountKillAndRestart kills an App mid-stream (nothing more is
// committed or checkpointed) and restarts it: at-least-once loses nothing,
// counts are >= the true counts, and the state comes back from the local
// checkpoint plus the changelog tail; then a graceful stop and a restart on
// an empty state directory (full restore from the changelog) continue the
// counts exactly.
func TestKeyedCountKillAndRestart(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 3)
	b.createTopic("counts", 3)
	const keys = 20
	truth := map[string]int64{}
	stateDir := t.TempDir()
	// A local checkpoint at every commit (default: every 2s at most): the
	// kill leaves one past the one written at the restore.
	opts := []Opt{testLogger(t), StateDir(stateDir), CommitInterval(50 * time.Millisecond), MaxPollRecords(20), Workers(2),
		optFunc(func(c *config) { c.checkpointInterval = 0 })}

	app1 := b.run("counter", countTopology, opts...)
	produceEvents(b, 0, 600, keys, truth)
	b.waitFor("counts", 30*time.Second, counted(t, 200))
	if err := app1.kill(); err != nil {
		t.Fatalf("killed app: %v", err)
	}
	if got := b.readAll("counter-counts-changelog"); len(got) == 0 {
		t.Fatal("no changelog written")
	}

	app2 := b.run("counter", countTopology, opts...)
	produceEvents(b, 600, 400, keys, truth)
	b.waitFor("counts", 30*time.Second, atLeast(t, truth))
	// Counts reach the truth before the input is all consumed (the replay
	// after the kill counted some records twice): the graceful stop below
	// must come after app2 has handled and committed every record, or app3
	// would rightly count the rest.
	b.waitCommitted("counter", "events", 1000)
	if err := app2.stop(); err != nil {
		t.Fatalf("app2: %v", err)
	}
	changelog := len(b.readAll("counter-counts-changelog"))
	if r := counterValue(app2.a.metrics.restored); int(r) >= changelog {
		t.Errorf("app2 replayed %v of %d changelog records: the local checkpoint should limit it to the tail", r, changelog)
	}
	t.Logf("app1 handled %v records before the kill; app2 replayed %v changelog records, handled %v input records",
		counterValue(app1.a.metrics.recordsIn), counterValue(app2.a.metrics.restored), counterValue(app2.a.metrics.recordsIn))
	before := latest(t, b.readAll("counts"))
	for k, n := range truth {
		if before[k] < n {
			t.Fatalf("key %s: count %d < true count %d: a record was lost", k, before[k], n)
		}
	}

	// Graceful stop committed everything: a restart on an empty state
	// directory restores the full changelog and adds exactly the new records.
	app3 := b.run("counter", countTopology, StateDir(t.TempDir()), CommitInterval(50*time.Millisecond))
	add := map[string]int64{}
	produceEvents(b, 1000, keys, keys, add)
	want := map[string]int64{}
	for k := range truth {
		want[k] = before[k] + add[k]
	}
	recs := b.waitFor("counts", 30*time.Second, atLeast(t, want))
	if err := app3.stop(); err != nil {
		t.Fatalf("app3: %v", err)
	}
	got := latest(t, recs)
	for k, n := range want {
		if got[k] != n {
			t.Errorf("key %s: after graceful restart count %d, want exactly %d", k, got[k], n)
		}
	}
	if n := counterValue(app3.a.metrics.restored); int(n) != changelog {
		t.Errorf("full restore applied %v changelog records, want all %d", n, changelog)
	}
	t.Logf("broker: %s; true total %d", b.kind, len(truth))
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
