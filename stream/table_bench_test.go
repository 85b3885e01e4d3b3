package stream

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTaskJoin measures the per-record path of a stream-table join
// (decode, Pebble point read of the table, decode of the table value,
// output) without a broker, every key present in the table. Baseline in the
// same run: BenchmarkTaskStateless.
func BenchmarkTaskJoin(b *testing.B) {
	bl := NewBuilder()
	in := From(bl, "in", String(), JSON[benchEvent]())
	zones := FromTable(bl, "zones", String(), String(), "zones")
	Join(in, zones, func(r Record[string, benchEvent], z string) (int64, error) { return r.Value.N + int64(len(z)), nil }).
		To("out", String(), Int64())
	outs := 0
	count := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		if r.Topic == "out" {
			outs++
		}
		promise(r, nil)
	}, false)
	a, err := NewApp("bench", bl, Brokers("127.0.0.1:1"), StateDir(b.TempDir()), count)
	if err != nil {
		b.Fatal(err)
	}
	tk, err := a.newTask(taskID{sub: 0, partition: 0})
	if err != nil {
		b.Fatal(err)
	}
	defer tk.close()
	ctx := context.Background()
	recs := make([]*kgo.Record, 4096)
	for i := range recs {
		k := fmt.Sprintf("zone-%06d", (i*7919)%100_000)
		v, _ := JSON[benchEvent]().Encode(benchEvent{Zone: k, Rider: "rider-0001", N: int64(i), Payload: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
		recs[i] = &kgo.Record{Topic: "in", Key: []byte(k), Value: v, Timestamp: t0}
		if err := tk.handle(ctx, &kgo.Record{Topic: "zones", Key: []byte(k), Value: []byte("surge-zone"), Offset: int64(i), Timestamp: t0}); err != nil {
			b.Fatal(err)
		}
	}
	if err := tk.flushState(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(recs[0].Value)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := recs[i%len(recs)]
		r.Offset = int64(i)
		if err := tk.handle(ctx, r); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 {
			if err := tk.flushState(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if outs != b.N {
		b.Fatalf("%d joined outputs for %d records: every key is in the table", outs, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
