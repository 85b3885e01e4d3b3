package stream

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// waitTables waits until each output topic of want, read as a table (the
// latest value per key, a null value deleting it; read_committed if
// committed), equals its wanted contents.
func (b *testBroker) waitTables(committed bool, timeout time.Duration, want map[string]map[string]string) {
	b.t.Helper()
	for topic, w := range want {
		b.waitForIso(topic, committed, timeout, func(recs []*kgo.Record) bool {
			got := map[string]string{}
			for _, r := range recs {
				if r.Value == nil {
					delete(got, string(r.Key))
				} else {
					got[string(r.Key)] = string(r.Value)
				}
			}
			return maps.Equal(got, w)
		})
	}
}

// crashRestartRuns runs the App appID (topology build, guarantee g) on b
// through the joins' crash scenario: updates while it runs, a crash
// (nothing more committed or checkpointed) at a random moment of a batch,
// a restart on the same state directory, a second crash, and a restart on
// an empty state directory (restored from changelogs and topics). wait is
// called after each run has had its updates and must block until the
// outputs are complete.
func crashRestartRuns(t *testing.T, b *testBroker, appID string, build func(*Builder), g Guarantee, rng *rand.Rand,
	produce func(n int), wait func(),
) {
	t.Helper()
	opts := func(dir string) []Opt {
		return []Opt{testLogger(t), Delivery(g), StateDir(dir), CommitInterval(30 * time.Millisecond)}
	}
	dir := t.TempDir()
	a := b.run(appID, build, opts(dir)...)
	produce(300)
	wait()
	produce(200)
	time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
	if err := a.kill(); err != nil {
		t.Fatal(err)
	}
	produce(200)
	a = b.run(appID, build, opts(dir)...)
	wait()
	produce(100)
	if err := a.kill(); err != nil {
		t.Fatal(err)
	}
	a = b.run(appID, build, opts(t.TempDir())...)
	produce(100)
	wait()
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
}

// fkUpdates returns a producer of n random updates of the foreign-key
// join's tables: refs f0..f7 (a quarter of them deletions) and rows
// r0..r<rowKeys-1> referencing f0..f8 (f8 never exists; a fifth of them
// deletions), kept in rows and refs as they stand after each update.
func fkUpdates(b *testBroker, rng *rand.Rand, rowKeys int, rows, refs map[string]string) func(n int) {
	i := 0
	return func(n int) {
		var recs []*kgo.Record
		for range n {
			i++
			var topic, k string
			var v []byte
			if rng.IntN(3) == 0 {
				topic, k = "refs", fmt.Sprint("f", rng.IntN(8))
				if rng.IntN(4) == 0 {
					delete(refs, k)
				} else {
					v = []byte(fmt.Sprint("ref", i))
					refs[k] = string(v)
				}
			} else {
				topic, k = "rows", fmt.Sprint("r", rng.IntN(rowKeys))
				if rng.IntN(5) == 0 {
					delete(rows, k)
				} else {
					v = []byte(fmt.Sprintf("f%d|%d", rng.IntN(9), i))
					rows[k] = string(v)
				}
			}
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: v, Timestamp: t0.Add(time.Duration(i) * time.Millisecond)})
		}
		b.produce(recs...)
	}
}
