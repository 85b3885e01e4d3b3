package mirror

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
)

// counterTopology re-keys each event by its value (a repartition topic)
// and counts per key: a changelog, a repartition topic and an output.
func counterTopology() *stream.Builder {
	b := stream.NewBuilder()
	in := stream.From(b, "events", stream.String(), stream.String())
	byVal := stream.KeyBy(in, func(r stream.Record[string, string]) (string, error) { return r.Value, nil })
	stream.Count(stream.GroupByKey(byVal, stream.Codecs(stream.String(), stream.String())),
		stream.StoreConfig{Name: "n", TTL: time.Hour}).ToStream().To("counts", stream.String(), stream.Int64())
	return b
}

func produceEvents(t *testing.T, c *cluster, from, n, keys int, truth map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		k := fmt.Sprint("key", i%keys)
		truth[k]++
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(i % 3), Key: []byte(fmt.Sprint("u", i)),
			Value: []byte(k), Timestamp: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if err := c.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// counts reads the committed "counts" records of c in partition order and
// returns them.
func counts(t *testing.T, c *cluster) []*kgo.Record {
	all := c.readAll(t, "counts")
	var out []*kgo.Record
	for p := int32(0); p < int32(len(all)); p++ {
		out = append(out, all[p]...)
	}
	return out
}

// latestCounts returns each key's last count, failing on a count that goes
// down (a reprocessed or lost record shows as a regression or a wrong end).
func latestCounts(t *testing.T, recs []*kgo.Record, check bool) map[string]int64 {
	out := map[string]int64{}
	for _, r := range recs {
		n, err := stream.Int64().Decode(r.Value)
		if err != nil {
			t.Fatalf("count value: %v", err)
		}
		if check && n <= out[string(r.Key)] {
			t.Errorf("key %s: count %d after %d", r.Key, n, out[string(r.Key)])
		}
		out[string(r.Key)] = n
	}
	return out
}

// runApp runs the counter App on c until the counts add up to total.
func runApp(t *testing.T, c *cluster, total int64, opts ...stream.Opt) {
	t.Helper()
	app, err := stream.NewApp("counter", counterTopology(), append([]stream.Opt{stream.Brokers(c.seeds...),
		stream.Delivery(stream.ExactlyOnce), stream.StateDir(t.TempDir()), stream.CommitInterval(20 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var sum int64
		for _, n := range latestCounts(t, counts(t, c), false) {
			sum += n
		}
		if sum == total {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("app ended: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts add up to %d, want %d", sum, total)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("app: %v", err)
	}
}

// TestStreamAppMovesToCluster: an exactly-once counting App runs on weir,
// stops; weir mirror copies its input, output, changelog and repartition
// topics to a 3-broker cluster (exactly-once) and cuts its group over; the
// same App started on the cluster (fresh state directory: it restores from
// the mirrored changelog) continues the counts exactly: every key's count
// goes up one record at a time across the move and ends at the true count.
func TestStreamAppMovesToCluster(t *testing.T) {
	weir, kf := startWeir(t), startKfake(t)
	weir.createTopic(t, "events", 3, nil)
	weir.createTopic(t, "counts", 3, nil)
	truth := map[string]int64{}
	const keys = 7
	produceEvents(t, weir, 0, 300, keys, truth)
	runApp(t, weir, 300)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topics, err := weir.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Source: weir.seeds, Target: kf.seeds, TopicRegex: `events|counts|counter[-.].*`, ExactlyOnce: true}
	_, re, err := cfg.withDefaults(true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{}
	var names []string
	for _, td := range topics.Sorted() {
		if cfg.selected(re, td.Topic) {
			want[td.Topic] = int32(len(td.Partitions))
			names = append(names, td.Topic)
		}
	}
	sort.Strings(names)
	t.Logf("mirrored: %v", names)
	if len(want) < 4 {
		t.Fatalf("expected events, counts, a changelog and a repartition topic, got %v", names)
	}
	stop := runMirror(t, cfg)
	waitCaughtUp(t, cfg, want)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	trs, err := Cutover(ctx, cfg, "counter", CutoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cutover: %+v", trs)

	produceEvents(t, kf, 300, 300, keys, truth)
	runApp(t, kf, 600)
	got := latestCounts(t, counts(t, kf), true)
	for k, n := range truth {
		if got[k] != n {
			t.Errorf("key %s: count %d on the cluster, want exactly %d", k, got[k], n)
		}
	}
}
