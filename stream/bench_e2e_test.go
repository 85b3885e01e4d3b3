package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// End-to-end benchmarks against the test broker (see startCluster): a keyed
// count over 100k keys of ~200-byte JSON records, and the floor in the same
// run — a hand-written franz-go loop that consumes, decodes and produces one
// record per input record with no state and no commits until the end.
// Both report events/s; the broker runs in the same process, so the numbers
// compare the two paths, not absolute capacity.

const e2eRecords = 100000

func e2eSetup(b *testing.B) *testBroker {
	tb := startBrokerB(b)
	tb.createTopic("in", 3)
	tb.createTopic("out", 3)
	recs := make([]*kgo.Record, 0, e2eRecords)
	for i := range e2eRecords {
		k := fmt.Sprintf("zone-%06d", (i*7919)%100_000)
		v, _ := json.Marshal(benchEvent{Zone: k, Rider: "rider-0001", N: int64(i),
			Payload: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(k), Value: v})
	}
	tb.produce(recs...)
	return tb
}

func waitOut(b *testing.B, tb *testBroker, n int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for {
		ends, err := tb.adm.ListEndOffsets(ctx, "out")
		if err != nil {
			b.Fatal(err)
		}
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		if sum >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func BenchmarkE2EHandLoop(b *testing.B) {
	for range b.N {
		b.StopTimer()
		tb := e2eSetup(b)
		b.StartTimer()
		start := time.Now()
		cl, err := kgo.NewClient(kgo.SeedBrokers(tb.seeds...), kgo.ConsumerGroup("hand"), kgo.ConsumeTopics("in"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		seen := 0
		for seen < e2eRecords {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				var ev benchEvent
				if err := json.Unmarshal(r.Value, &ev); err != nil {
					b.Fatal(err)
				}
				v, _ := Int64().Encode(ev.N)
				cl.Produce(ctx, &kgo.Record{Topic: "out", Key: r.Key, Value: v}, nil)
				seen++
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		cl.Close()
		b.ReportMetric(float64(e2eRecords)/time.Since(start).Seconds(), "events/s")
	}
}

func BenchmarkE2EKeyedCount(b *testing.B) {
	benchE2EApp(b, func(bl *Builder) {
		in := From(bl, "in", String(), JSON[benchEvent]())
		Count(GroupByKey(in, String(), JSON[benchEvent]()), StoreConfig{Name: "c", TTL: time.Hour}).
			To("out", String(), Int64())
	})
}

// BenchmarkE2EKeyedCountExactlyOnce is the keyed count under ExactlyOnce.
func BenchmarkE2EKeyedCountExactlyOnce(b *testing.B) {
	benchE2EApp(b, func(bl *Builder) {
		in := From(bl, "in", String(), JSON[benchEvent]())
		Count(GroupByKey(in, String(), JSON[benchEvent]()), StoreConfig{Name: "c", TTL: time.Hour}).
			To("out", String(), Int64())
	}, WithGuarantee(ExactlyOnce))
}

// BenchmarkE2EStateless is the App running the hand loop's work (decode,
// map, encode, produce): the library's overhead without state.
func BenchmarkE2EStateless(b *testing.B) {
	benchE2EApp(b, func(bl *Builder) {
		in := From(bl, "in", String(), JSON[benchEvent]())
		Map(in, func(r Record[string, benchEvent]) (int64, error) { return r.Value.N, nil }).To("out", String(), Int64())
	})
}

func benchE2EApp(b *testing.B, build func(*Builder), opts ...Opt) {
	for range b.N {
		b.StopTimer()
		tb := e2eSetup(b)
		bl := NewBuilder()
		build(bl)
		a, err := NewApp("bench", bl, append([]Opt{Brokers(tb.seeds...), StateDir(b.TempDir())}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		start := time.Now()
		go func() { done <- a.Run(ctx) }()
		waitOut(b, tb, e2eRecords)
		el := time.Since(start)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(e2eRecords)/el.Seconds(), "events/s")
	}
}

// BenchmarkRestore measures a full restore of one task's store from a
// changelog of e2eRecords distinct keys (target: >= 200k records/s).
func BenchmarkRestore(b *testing.B) {
	tb := startBrokerB(b)
	tb.createTopic("in", 1)
	tb.createTopic("out", 1)
	bl := NewBuilder()
	in := From(bl, "in", String(), String())
	Count(GroupByKey(in, String(), String()), StoreConfig{Name: "c", TTL: time.Hour}).To("out", String(), Int64())
	a, err := NewApp("rs", bl, Brokers(tb.seeds...), StateDir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := a.setupTopics(ctx); err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, e2eRecords)
	for i := range e2eRecords {
		v, _ := Int64().Encode(int64(i))
		recs = append(recs, &kgo.Record{Topic: "rs-c-changelog", Key: []byte(fmt.Sprintf("zone-%06d", i)), Value: v})
	}
	tb.produce(recs...)
	a.cl = tb.cl
	a.adm = tb.adm
	b.ResetTimer()
	for range b.N {
		tk, err := a.newTask(taskID{sub: 0, partition: 0})
		if err != nil {
			b.Fatal(err)
		}
		if err := tk.db.Wipe(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := tk.restore(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(e2eRecords)/time.Since(start).Seconds(), "records/s")
		tk.close()
	}
}
