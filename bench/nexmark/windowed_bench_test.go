package nexmark

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

// BenchmarkWindowedQueries runs each windowed query bounded over the same
// generated events on the embedded broker, with q0 (pass-through) as the
// baseline of the same run, and reports events per second of wall time and
// per CPU-second of the whole process (broker included). One iteration is
// one bounded run over every event: run with -benchtime=1x (or Nx).
func BenchmarkWindowedQueries(b *testing.B) {
	const n = 100_000
	g, err := NewGenerator(GeneratorConfig{Seed: 1, BaseTime: 1_700_000_000_000, EventsPerSecond: 10_000, Disorder: windowedDisorder})
	if err != nil {
		b.Fatal(err)
	}
	events := make([]Event, n)
	for i := range events {
		events[i] = g.Next()
	}
	br := weirtest.Start(b, weirtest.Topic("events", 3))
	ctx := context.Background()
	if err := WriteEvents(ctx, br.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "events", events, 3); err != nil {
		b.Fatal(err)
	}
	o := Options{OutOfOrderness: windowedDisorder}
	run := 0
	for _, q := range append([]string{"q0"}, windowedQueries...) {
		b.Run(q, func(b *testing.B) {
			cpu0, t0 := cpuTime(), time.Now()
			for range b.N {
				run++
				out := fmt.Sprintf("%s-bench-%d", q, run)
				br.CreateTopic(out, 3)
				bl := stream.NewBuilder()
				if err := Build(bl, q, "events", out, o); err != nil {
					b.Fatal(err)
				}
				a, err := stream.NewApp("bench-"+out, bl, append(AppOptions(o), stream.Brokers(br.Addr()), stream.StateDir(b.TempDir()))...)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.RunBounded(ctx); err != nil {
					b.Fatal(err)
				}
			}
			wall, cpu := time.Since(t0).Seconds(), (cpuTime() - cpu0).Seconds()
			b.ReportMetric(float64(n*b.N)/wall, "events/s")
			b.ReportMetric(float64(n*b.N)/cpu, "events/cpu-s")
		})
	}
}

// cpuTime is the user plus system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
