package stream

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPropertyAggregatesMatchModel feeds random keyed numbers through a
// per-key sum (Reduce) and count, restarting the App at random — gracefully,
// on a fresh state directory, or by killing it — and compares the final
// state with an in-memory model: equal when no instance was killed, and
// never below the model (nothing lost) when one was.
func TestPropertyAggregatesMatchModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { propertyRun(t, seed, AtLeastOnce) })
	}
}

// TestPropertyExactlyOnce is the same under ExactlyOnce: the read_committed
// aggregates equal the model even when instances are killed.
func TestPropertyExactlyOnce(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { propertyRun(t, 100+seed, ExactlyOnce) })
	}
}

func sumTopology(b *Builder) {
	in := From(b, "nums", String(), Int64())
	g := GroupByKey(in, Codecs(String(), Int64()))
	Reduce(g, StoreConfig{Name: "sum", TTL: 24 * time.Hour}, func(a, v int64) (int64, error) { return a + v, nil }).
		ToStream().To("sums", String(), Int64())
	Count(g, StoreConfig{Name: "count", TTL: 24 * time.Hour}).ToStream().To("counts", String(), Int64())
}

func propertyRun(t *testing.T, seed uint64, g Guarantee, extra ...Opt) {
	rng := rand.New(rand.NewPCG(seed, 99))
	b := startBrokerFor(t, g)
	parts := int32(1 + rng.IntN(4))
	keys := 3 + rng.IntN(12)
	b.createTopic("nums", parts)
	b.createTopic("sums", parts)
	b.createTopic("counts", parts)
	sum, count := map[string]int64{}, map[string]int64{}
	dir := t.TempDir()
	opts := func() []Opt {
		o := []Opt{testLogger(t), Delivery(g), StateDir(dir), CommitInterval(time.Duration(5+rng.IntN(50)) * time.Millisecond),
			MaxPollRecords(1 + rng.IntN(50)), Workers(1 + rng.IntN(3))}
		return append(o, extra...)
	}
	app := b.run("prop", sumTopology, opts()...)
	killed := false
	var actions []string
	for step := range 5 {
		n := 10 + rng.IntN(150)
		recs := make([]*kgo.Record, n)
		for i := range recs {
			k := key(rng.IntN(keys))
			v := int64(1 + rng.IntN(10))
			sum[k] += v
			count[k]++
			vb, _ := Int64().Encode(v)
			recs[i] = &kgo.Record{Topic: "nums", Key: []byte(k), Value: vb,
				Timestamp: t0.Add(time.Duration(step*1000+i) * time.Millisecond)}
		}
		b.produce(recs...)
		// Let the instance process part of the batch before acting on it.
		waitHandled(t, app, float64(1+rng.IntN(n)))
		switch rng.IntN(5) {
		case 0:
			actions = append(actions, "stop")
			if err := app.stop(); err != nil {
				t.Fatal(err)
			}
			app = b.run("prop", sumTopology, opts()...)
		case 1:
			actions = append(actions, "stop+wipe")
			if err := app.stop(); err != nil {
				t.Fatal(err)
			}
			dir = t.TempDir()
			app = b.run("prop", sumTopology, opts()...)
		case 2:
			actions = append(actions, "kill")
			killed = true
			if err := app.kill(); err != nil {
				t.Fatal(err)
			}
			app = b.run("prop", sumTopology, opts()...)
		default:
			actions = append(actions, "-")
		}
	}
	committed := g == ExactlyOnce
	sums := latest(t, b.waitForIso("sums", committed, 30*time.Second, atLeast(t, sum)))
	counts := latest(t, b.waitForIso("counts", committed, 30*time.Second, atLeast(t, count)))
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("partitions %d keys %d actions %v; model total %d; final instance handled %v records", parts, keys, actions, total(count), counterValue(app.a.metrics.recordsIn))
	for k := range sum {
		if killed && g == AtLeastOnce {
			if sums[k] < sum[k] || counts[k] < count[k] {
				t.Errorf("key %s: sum %d count %d below model %d %d: lost input", k, sums[k], counts[k], sum[k], count[k])
			}
			continue
		}
		if sums[k] != sum[k] || counts[k] != count[k] {
			t.Errorf("key %s: sum %d count %d, model %d %d", k, sums[k], counts[k], sum[k], count[k])
		}
	}
}

func total(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// waitHandled waits until app has handled at least n input records.
func waitHandled(t *testing.T, app *runningApp, n float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for counterValue(app.a.metrics.recordsIn) < n {
		if time.Now().After(deadline) {
			t.Fatalf("instance handled %v records, want >= %v", counterValue(app.a.metrics.recordsIn), n)
		}
		time.Sleep(time.Millisecond)
	}
}
