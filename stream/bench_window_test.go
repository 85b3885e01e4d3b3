package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/window"
)

// Windowed count benchmarks against the hand loop of BenchmarkE2ERatioSteady
// (same broker, same 1M ~200-byte JSON records over 100k keys), measured
// alternately in the same run: the ratio of input events per CPU-second.
//
// The records carry event times: 1M records over 20 s (50 per ms), in
// order; keys cycle every 100k records (2 s), so each key has 5 records in
// each of the two 10 s tumbling windows (200k final results), and is in 15
// hopping windows of 10 s advancing 2 s (1.5M final results). Records far
// in event time on every partition close all windows; the run ends when
// every final result is written.

const windowBenchSpan = 20_000 // ms of event time the records span

func windowBenchSetup(b testing.TB, n int) *testBroker {
	tb := startBrokerB(b)
	tb.createTopic("in", 3)
	tb.createTopic("out", 3)
	const chunk = 100_000
	base := t0.UnixMilli()
	recs := make([]*kgo.Record, 0, min(n, chunk))
	for i := range n {
		k := fmt.Sprintf("zone-%06d", (i*7919)%e2eKeys)
		v, _ := json.Marshal(benchEvent{Zone: k, Rider: "rider-0001", N: int64(i),
			Payload: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
		ts := base + int64(i)*windowBenchSpan/int64(n)
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(k), Value: v, Timestamp: time.UnixMilli(ts)})
		if len(recs) == chunk || i == n-1 {
			tb.produce(recs...)
			recs = recs[:0]
		}
	}
	for p := int32(0); p < 3; p++ {
		tb.produce(&kgo.Record{Topic: "in", Key: []byte(sentinelKey(p, 3)), Value: []byte(`{"n":0}`),
			Timestamp: time.UnixMilli(base + 3600_000)})
	}
	return tb
}

func buildWindowedCount(w Windows) func(*Builder) {
	return func(bl *Builder) {
		in := From(bl, "in", String(), JSON[benchEvent]())
		WindowedCount(GroupByKey(in, Codecs(String(), JSON[benchEvent]())), w,
			WindowedStore{Name: "w", Late: DropLate(), Emit: EmitFinal()}).
			ToStream().To("out", WindowedKeys(String(), w), Int64())
	}
}

// runWindowApp times an App over windowBenchSetup's records until outs
// final results are written.
func runWindowApp(b *testing.B, n int, outs int64, build func(*Builder), opts ...Opt) e2eRun {
	b.StopTimer()
	scope := &scopedTB{TB: b}
	defer scope.done()
	tb := windowBenchSetup(scope, n)
	run := timeApp(b, tb, n, outs, build, opts...)
	b.Logf("changelog records: %d for %d input records", topicRecords(b, tb, "bench-w-changelog"), n)
	return run
}

// topicRecords is the number of records in topic (the sum of its end
// offsets: with transactions, control records included).
func topicRecords(b testing.TB, tb *testBroker, topic string) int64 {
	ends, err := tb.adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum
}

// BenchmarkWindowRatio runs the hand loop, the tumbling windowed count and
// the hopping one alternately (WINDOW_BENCH_ROUNDS rounds, default 1;
// WINDOW_BENCH_N records, default 1M; WINDOW_BENCH_CACHE_MB: the store
// cache per task, default StoreCache's; WINDOW_BENCH_CLOSES: the
// operators' WindowClosesPerRound, default its default;
// WINDOW_BENCH_NO_HOPPING: tumbling only) and
// reports tumbling/hand and hopping/tumbling in events per CPU-second (of
// the whole process, broker included), medians over rounds.
// WINDOW_BENCH_ONLY_HOPPING runs the hopping count alone and reports its
// events per CPU-second (for two binaries run alternately).
func BenchmarkWindowRatio(b *testing.B) {
	rounds := 1
	if s := os.Getenv("WINDOW_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	n := e2eSteadyRecords
	if s := os.Getenv("WINDOW_BENCH_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	var opts []Opt
	if s := os.Getenv("WINDOW_BENCH_CACHE_MB"); s != "" {
		mb, _ := strconv.Atoi(s)
		opts = append(opts, StoreCache(int64(mb)<<20))
	}
	if s := os.Getenv("WINDOW_BENCH_CLOSES"); s != "" {
		n, _ := strconv.Atoi(s)
		opts = append(opts, WindowClosesPerRound(n))
	}
	tumbling, hopping := Tumbling(10*time.Second), Hopping(10*time.Second, 2*time.Second)
	if os.Getenv("WINDOW_BENCH_ONLY_HOPPING") != "" {
		for range b.N {
			var rh []float64
			for range rounds {
				ho := runWindowApp(b, n, windowBenchResults(n, hopping.w), buildWindowedCount(hopping), opts...)
				rh = append(rh, ho.perCPUSec())
				b.Logf("round: hopping %.0f events/cpu-s", ho.perCPUSec())
			}
			b.ReportMetric(median(rh), "hopping-events/cpu-s")
		}
		return
	}
	for range b.N {
		var rt, rh, rw []float64
		for range rounds {
			h := runHandLoopN(b, n)
			tu := runWindowApp(b, n, windowBenchResults(n, tumbling.w), buildWindowedCount(tumbling), opts...)
			ho := tu
			if os.Getenv("WINDOW_BENCH_NO_HOPPING") == "" {
				ho = runWindowApp(b, n, windowBenchResults(n, hopping.w), buildWindowedCount(hopping), opts...)
			}
			rt = append(rt, tu.perCPUSec()/h.perCPUSec())
			rh = append(rh, tu.perCPUSec()/ho.perCPUSec())
			rw = append(rw, tu.rate()/h.rate())
			b.Logf("round: hand %.0f tumbling %.0f hopping %.0f events/cpu-s; tumbling/hand-cpu %.3f hopping cost %.2fx tumbling",
				h.perCPUSec(), tu.perCPUSec(), ho.perCPUSec(), tu.perCPUSec()/h.perCPUSec(), tu.perCPUSec()/ho.perCPUSec())
		}
		b.ReportMetric(median(rt), "tumbling/hand-cpu")
		b.ReportMetric(median(rw), "tumbling/hand-wall")
		b.ReportMetric(median(rh), "hopping-cost/tumbling")
	}
}

// BenchmarkWindowOpenRSS holds WINDOW_OPEN (default 1M) windows open at once
// (distinct keys, one hour-long tumbling window each, nothing closes) in
// one task, fed directly in rounds of 1000 records as an App's loop would
// (outputs discarded), with the default store cache, and reports the
// process's resident memory and Go heap after, and at a tenth of the
// windows: the growth between the two is what the windows cost in memory.
func BenchmarkWindowOpenRSS(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("WINDOW_OPEN"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for range b.N {
		tk, outs := windowCountTask(b, "rss", Tumbling(time.Hour), TimeWindowed(String(), time.Hour))
		v := int64Bytes(1)
		ctx := context.Background()
		var rss10, heap10 uint64
		start := time.Now()
		for i := range n {
			r := &kgo.Record{Topic: "in", Offset: int64(i), Key: []byte(fmt.Sprintf("key-%07d", i)), Value: v, Timestamp: t0}
			if err := tk.handle(ctx, r); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 || i == n-1 {
				if err := tk.endBatch(); err != nil {
					b.Fatal(err)
				}
				if err := tk.flushState(); err != nil {
					b.Fatal(err)
				}
			}
			if i == n/10 {
				rss10, heap10 = memNow()
			}
		}
		elapsed := time.Since(start)
		rss, heap := memNow()
		if *outs != 0 {
			b.Fatalf("%d results: windows closed", *outs)
		}
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(rss10)/(1<<20), "rss-MiB-at-10%")
		b.ReportMetric(float64(heap10)/(1<<20), "heap-MiB-at-10%")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
		tk.close()
	}
}

// memNow returns the process's resident set (VmRSS) and the Go heap in use
// after a garbage collection.
func memNow() (rss, heap uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	return rss, ms.HeapInuse
}

// windowBenchResults is the number of final results of windowBenchSetup's
// n records in windows w: the distinct (key, window) pairs.
func windowBenchResults(n int, w window.TimeWindows) int64 {
	base := t0.UnixMilli()
	seen := map[[2]int64]bool{}
	var wins []window.Window
	for i := range n {
		ts := base + int64(i)*windowBenchSpan/int64(n)
		for _, win := range w.AssignTo(wins[:0], ts) {
			seen[[2]int64{int64((i * 7919) % e2eKeys), win.Start}] = true
		}
	}
	return int64(len(seen))
}

// timeApp times an App over tb's "in" until "out" holds outs records.
func timeApp(b *testing.B, tb *testBroker, n int, outs int64, build func(*Builder), opts ...Opt) e2eRun {
	bl := NewBuilder()
	build(bl)
	var reqs reqCounter
	a, err := NewApp("bench", bl, append([]Opt{Brokers(tb.seeds...), StateDir(b.TempDir()),
		ClientOpts(kgo.WithHooks(&reqs))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.StartTimer()
	defer profWindow("window")()
	start, cpu0 := time.Now(), cpuTime(b)
	go func() { done <- a.Run(ctx) }()
	waitOutFor(b, tb, outs, 30*time.Minute)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return e2eRun{n: n, wall: time.Since(start), cpu: cpuTime(b) - cpu0, reqs: reqs.counts()}
}

// waitOutFor is waitOut with a longer bound: the hopping run writes 1.5M
// results on a loaded machine.
func waitOutFor(b testing.TB, tb *testBroker, n int64, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
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
		time.Sleep(5 * time.Millisecond)
	}
}
