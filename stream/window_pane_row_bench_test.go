package stream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkHoppingTask is one task's share of BenchmarkWindowRatio's
// hopping count (10 s windows advancing 2 s, row form) without the broker:
// its records (a third of 1M, over a third of the 100k keys, in event-time
// order over 20 s; int64 values instead of JSON) are fed to the task as
// its loop would, in rounds of 1000 records, outputs discarded, then a
// record an hour later closes every window. Every 64 rounds the store
// cache is written to Pebble, as an App's checkpoint does every 2 s
// (defaultCheckpointInterval; at about 30k records per second and task).
// It reports the operator path alone in CPU time of the process (Pebble's
// compactions included) per input record, where BenchmarkWindowRatio
// measures the whole process, broker included.
func BenchmarkHoppingTask(b *testing.B) {
	const n, keys = 333_334, 33_334
	w := Hopping(10*time.Second, 2*time.Second)
	base := t0.UnixMilli()
	recs := make([]*kgo.Record, 0, n+1)
	one := int64Bytes(1)
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "in", Offset: int64(i), Key: fmt.Appendf(nil, "zone-%06d", (i*7919)%keys),
			Value: one, Timestamp: time.UnixMilli(base + int64(i)*windowBenchSpan/n)})
	}
	recs = append(recs, &kgo.Record{Topic: "in", Offset: n, Key: []byte("last"), Value: one,
		Timestamp: time.UnixMilli(base + 3600_000)})
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		tk, outs := windowCountTask(b, "hop", w, WindowedKeys(String(), w))
		ctx := context.Background()
		b.StartTimer()
		cpu0 := cpuTime(b)
		for i, r := range recs {
			if err := tk.handle(ctx, r); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 || i == len(recs)-1 {
				for first := true; first || tk.closesPending(); first = false {
					if err := tk.endBatch(); err != nil {
						b.Fatal(err)
					}
					if err := tk.flushState(); err != nil {
						b.Fatal(err)
					}
				}
				if i%64_000 == 63_999 {
					if err := tk.db.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		cpu += cpuTime(b) - cpu0
		b.StopTimer()
		b.ReportMetric(float64(*outs), "results")
		tk.close()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*len(recs)), "cpu-ns/record")
}

// windowCountTask is the task of partition 0 of an App counting "in"
// (String keys, Int64 values) in windows w (DropLate, EmitFinal) to "out"
// (keys in codec keys), without a broker: its outputs are discarded,
// counted in *outs.
func windowCountTask(b *testing.B, app string, w Windows, keys Codec[Windowed[string]]) (tk *task, outs *int) {
	bl := NewBuilder()
	WindowedCount(GroupByKey(From(bl, "in", String(), Int64())), w, WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}).
		ToStream().To("out", keys, Int64())
	outs = new(int)
	discard := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		if r.Topic == "out" {
			*outs++
		}
		promise(r, nil)
	}, false)
	a, err := NewApp(app, bl, Brokers("127.0.0.1:1"), StateDir(b.TempDir()), discard)
	if err != nil {
		b.Fatal(err)
	}
	if tk, err = a.newTask(taskID{sub: 0, partition: 0}); err != nil {
		b.Fatal(err)
	}
	return tk, outs
}
