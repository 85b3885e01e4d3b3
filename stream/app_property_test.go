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
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { propertyRun(t, seed) })
	}
}

func sumTopology(b *Builder) {
	in := From(b, "nums", String(), Int64())
	g := GroupByKey(in, String(), Int64())
	Reduce(g, StoreConfig{Name: "sum", TTL: 24 * time.Hour}, func(a, v int64) (int64, error) { return a + v, nil }).
		To("sums", String(), Int64())
	Count(g, StoreConfig{Name: "count", TTL: 24 * time.Hour}).To("counts", String(), Int64())
}

func propertyRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	b := startBroker(t)
	parts := int32(1 + rng.IntN(4))
	keys := 3 + rng.IntN(12)
	b.createTopic("nums", parts)
	b.createTopic("sums", parts)
	b.createTopic("counts", parts)
	sum, count := map[string]int64{}, map[string]int64{}
	dir := t.TempDir()
	opts := func() []Opt {
		return []Opt{testLogger(t), StateDir(dir), CommitInterval(time.Duration(5+rng.IntN(50)) * time.Millisecond),
			MaxPollRecords(1 + rng.IntN(50)), Workers(1 + rng.IntN(3))}
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
			// Let some processing happen, then kill.
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
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
	sums := latest(t, b.waitFor("sums", 30*time.Second, atLeast(t, sum)))
	counts := latest(t, b.waitFor("counts", 30*time.Second, atLeast(t, count)))
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("partitions %d keys %d actions %v", parts, keys, actions)
	for k := range sum {
		if killed {
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
