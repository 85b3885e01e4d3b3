package stream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTaskKeyedCount measures the library's own per-record path for a
// keyed count (decode, Pebble read-modify-write, changelog and output
// records), without a broker: the produced records are dropped. Baseline in
// the same run: BenchmarkTaskStateless (decode, map, encode, output).
func BenchmarkTaskKeyedCount(b *testing.B) {
	bl := NewBuilder()
	in := From(bl, "in", String(), JSON[benchEvent]())
	Count(GroupByKey(in, String(), JSON[benchEvent]()), StoreConfig{Name: "c", TTL: time.Hour}).
		To("out", String(), Int64())
	benchTask(b, bl)
}

func BenchmarkTaskStateless(b *testing.B) {
	bl := NewBuilder()
	in := From(bl, "in", String(), JSON[benchEvent]())
	Map(in, func(r Record[string, benchEvent]) (int64, error) { return r.Value.N, nil }).To("out", String(), Int64())
	benchTask(b, bl)
}

type benchEvent struct {
	Zone    string `json:"zone"`
	Rider   string `json:"rider"`
	N       int64  `json:"n"`
	Payload string `json:"payload"`
}

func benchTask(b *testing.B, bl *Builder) {
	var offset int64
	drop := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		r.Offset = offset
		offset++
		promise(r, nil)
	}, false)
	a, err := NewApp("bench", bl, Brokers("127.0.0.1:1"), StateDir(b.TempDir()), drop)
	if err != nil {
		b.Fatal(err)
	}
	tk, err := a.newTask(taskID{sub: 0, partition: 0})
	if err != nil {
		b.Fatal(err)
	}
	defer tk.close()
	const keys = 100_000
	recs := make([]*kgo.Record, 4096)
	for i := range recs {
		k := fmt.Sprintf("zone-%06d", (i*7919)%keys)
		v, _ := JSON[benchEvent]().Encode(benchEvent{Zone: k, Rider: "rider-0001", N: int64(i), Payload: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
		recs[i] = &kgo.Record{Topic: "in", Key: []byte(k), Value: v, Timestamp: t0}
	}
	ctx := context.Background()
	b.SetBytes(int64(len(recs[0].Value)))
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		r := recs[i%len(recs)]
		r.Offset = int64(i)
		if err := tk.handle(ctx, r); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 { // a processing round
			if err := tk.flushState(); err != nil {
				b.Fatal(err)
			}
		}
		if i%20_000 == 19_999 { // a commit (the App's default interval is 1s)
			if err := tk.checkpoint(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "events/cpu-s")
}
