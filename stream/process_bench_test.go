package stream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// benchSessions runs b.N records of 20,000 keys (each key every 20 s of
// event time) through one task of topology build, in rounds of 500 records
// ending as an App's rounds end (endBatch, flushState).
func benchSessions(b *testing.B, build func(*Builder)) {
	bl := NewBuilder()
	build(bl)
	discard := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) { promise(r, nil) }, false)
	a, err := NewApp("bench", bl, Brokers("127.0.0.1:1"), StateDir(b.TempDir()), discard)
	if err != nil {
		b.Fatal(err)
	}
	tk, err := a.newTask(taskID{sub: 0, partition: 0})
	if err != nil {
		b.Fatal(err)
	}
	defer tk.close()
	const keys = 20_000
	recs := make([]*kgo.Record, keys)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "events", Key: []byte(fmt.Sprintf("user-%06d", i)), Value: []byte("e")}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := recs[i%keys]
		r.Offset, r.Timestamp = int64(i), time.UnixMilli(int64(i))
		if err := tk.handle(ctx, r); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 {
			if err := tk.endBatch(); err != nil {
				b.Fatal(err)
			}
			if err := tk.flushState(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkTaskProcessTimers: a Process keeping a count per key and moving
// the key's event-time timer 10 s ahead on every record; every timer fires
// once (it emits the count and deletes it). Baseline in the same run:
// BenchmarkTaskProcessCountBaseline (the same keys counted by Count).
func BenchmarkTaskProcessTimers(b *testing.B) {
	benchSessions(b, func(bl *Builder) { sessionTopology(bl) })
}

func BenchmarkTaskProcessCountBaseline(b *testing.B) {
	benchSessions(b, func(bl *Builder) {
		Count(GroupByKey(From(bl, "events", String(), String())), StoreConfig{Name: "counts", TTL: time.Hour}).
			ToStream().To("out", String(), Int64())
	})
}

// BenchmarkTaskProcessStore: the same Process counting in its store, with
// no timer: the cost of the operator without the timers'.
func BenchmarkTaskProcessStore(b *testing.B) {
	benchSessions(b, func(bl *Builder) {
		counts := KeyValueStore[string, int64](StoreConfig{Name: "counts", TTL: time.Hour})
		Process(From(bl, "events", String(), String()), ProcessConfig{Name: "p", Stores: []ProcessStore{counts}},
			Processor[string, string, string, int64]{
				OnRecord: func(c *ProcessContext[string, string, int64], r Record[string, string]) error {
					n, _, err := counts.Get(c, r.Key)
					if err != nil {
						return err
					}
					if err := counts.Put(c, r.Key, n+1); err != nil {
						return err
					}
					return c.Forward(Record[string, int64]{Key: r.Key, Value: n + 1})
				},
			}).To("out", String(), Int64())
	})
}
