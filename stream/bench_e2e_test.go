package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"syscall"
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

// e2eRecords is the input of the headline workload: every record a new key.
const e2eRecords = 100000

// e2eSteadyRecords is the input of the steady-state workload: the same
// 100k keys, each updated ten times, so start-up (stores, changelog topics,
// group join) is amortised over ten times the records.
const e2eSteadyRecords = 1_000_000

const e2eKeys = 100_000

func e2eSetup(b testing.TB) *testBroker { return e2eSetupN(b, e2eRecords) }

// e2eSetupN starts a broker with n input records: ~200-byte JSON values,
// key (i*7919) mod 100k (7919 is prime to 100k: the keys cycle through all
// 100k in a scattered order, each once per 100k records).
func e2eSetupN(b testing.TB, n int) *testBroker {
	tb := startBrokerB(b)
	tb.createTopic("in", 3)
	tb.createTopic("out", 3)
	const chunk = 100_000
	recs := make([]*kgo.Record, 0, min(n, chunk))
	for i := range n {
		k := fmt.Sprintf("zone-%06d", (i*7919)%e2eKeys)
		v, _ := json.Marshal(benchEvent{Zone: k, Rider: "rider-0001", N: int64(i),
			Payload: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(k), Value: v})
		if len(recs) == chunk || i == n-1 {
			tb.produce(recs...)
			recs = recs[:0]
		}
	}
	return tb
}

func waitOut(b testing.TB, tb *testBroker, n int64) {
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
		time.Sleep(2 * time.Millisecond)
	}
}

// waitInputHandled waits until a has handled n input records.
func waitInputHandled(b testing.TB, a *App, n int64) {
	deadline := time.Now().Add(5 * time.Minute)
	for counterValue(a.metrics.recordsIn) < float64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("the App handled %v of %d records within 5 minutes", counterValue(a.metrics.recordsIn), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func BenchmarkE2EHandLoop(b *testing.B) {
	for range b.N {
		r := runHandLoop(b)
		b.ReportMetric(r.rate(), "events/s")
		b.ReportMetric(r.perCPUSec(), "events/cpu-s")
		r.reportReqs(b, "")
	}
}

// e2eRun is one measured run of n records: wall time and the process's CPU
// time (the broker runs in the process too, for both the baseline and the
// App).
type e2eRun struct {
	n         int
	wall, cpu time.Duration
	reqs      reqCounts
}

func (r e2eRun) rate() float64      { return float64(r.n) / r.wall.Seconds() }
func (r e2eRun) perCPUSec() float64 { return float64(r.n) / r.cpu.Seconds() }

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scopedTB runs the cleanups registered on it (the test broker's) when done
// is called rather than at the end of the benchmark, so runs do not pile up
// brokers.
type scopedTB struct {
	testing.TB
	cleanups []func()
}

func (s *scopedTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *scopedTB) done() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// runHandLoop sets up a fresh broker (untimed) and times the floor: consume,
// decode, produce one record per input record with franz-go directly, no
// state, no commits.
func runHandLoop(b *testing.B) e2eRun { return runHandLoopN(b, e2eRecords) }

func runHandLoopN(b *testing.B, n int) e2eRun {
	b.StopTimer()
	scope := &scopedTB{TB: b}
	defer scope.done()
	tb := e2eSetupN(scope, n)
	b.StartTimer()
	defer profWindow("hand")()
	start, cpu0 := time.Now(), cpuTime(b)
	var reqs reqCounter
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.seeds...), kgo.ConsumerGroup("hand"), kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(&reqs))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	seen := 0
	for seen < n {
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
	return e2eRun{n: n, wall: time.Since(start), cpu: cpuTime(b) - cpu0, reqs: reqs.counts()}
}

// BenchmarkE2ERatio runs the hand loop, the keyed count at-least-once and
// the keyed count exactly-once alternately, e2eRatioRounds times each on a
// fresh broker, and reports the median ratio of each count to the hand loop
// of the same round (the machine is shared: ratios of neighbouring runs are
// what is comparable), the medians of events/s, and events per CPU-second of
// the whole process (broker included).
func BenchmarkE2ERatio(b *testing.B) { benchE2ERatio(b, e2eRecords, 5) }

// BenchmarkE2ERatioSteady is BenchmarkE2ERatio on the steady-state
// workload (e2eSteadyRecords over the same 100k keys), three rounds.
func BenchmarkE2ERatioSteady(b *testing.B) { benchE2ERatio(b, e2eSteadyRecords, 3) }

func benchE2ERatio(b *testing.B, n, rounds int) {
	for range b.N {
		var hand, alo, eos []e2eRun
		var rAlo, rEos, cAlo, cEos []float64
		for range rounds {
			h := runHandLoopN(b, n)
			a := runE2EAppN(b, n, buildKeyedCount)
			e := runE2EAppN(b, n, buildKeyedCount, Delivery(ExactlyOnce))
			hand, alo, eos = append(hand, h), append(alo, a), append(eos, e)
			rAlo = append(rAlo, a.rate()/h.rate())
			rEos = append(rEos, e.rate()/h.rate())
			cAlo = append(cAlo, a.perCPUSec()/h.perCPUSec())
			cEos = append(cEos, e.perCPUSec()/h.perCPUSec())
			b.Logf("round: alo/hand-cpu %.3f eos/hand-cpu %.3f (hand %.0f alo %.0f eos %.0f events/cpu-s; "+
				"produce requests per 1k records: hand %.1f alo %.1f eos %.1f)",
				a.perCPUSec()/h.perCPUSec(), e.perCPUSec()/h.perCPUSec(), h.perCPUSec(), a.perCPUSec(), e.perCPUSec(),
				h.perK(h.reqs.produce), a.perK(a.reqs.produce), e.perK(e.reqs.produce))
		}
		med := func(runs []e2eRun, f func(e2eRun) float64) float64 {
			xs := make([]float64, len(runs))
			for i, r := range runs {
				xs[i] = f(r)
			}
			return median(xs)
		}
		b.ReportMetric(median(rAlo), "alo/hand")
		b.ReportMetric(median(rEos), "eos/hand")
		b.ReportMetric(median(cAlo), "alo/hand-cpu")
		b.ReportMetric(median(cEos), "eos/hand-cpu")
		b.ReportMetric(med(hand, e2eRun.rate), "hand-events/s")
		b.ReportMetric(med(alo, e2eRun.rate), "alo-events/s")
		b.ReportMetric(med(eos, e2eRun.rate), "eos-events/s")
		b.ReportMetric(med(hand, e2eRun.perCPUSec), "hand-events/cpu-s")
		b.ReportMetric(med(alo, e2eRun.perCPUSec), "alo-events/cpu-s")
		b.ReportMetric(med(eos, e2eRun.perCPUSec), "eos-events/cpu-s")
	}
}

// reqCounter is a kgo hook counting the requests a client writes and the
// record batches it produces, to compare how the App and the hand loop use
// the broker.
type reqCounter struct {
	produce, fetch, other, batches, batchRecords atomic.Int64
}

// reqCounts is a snapshot of a reqCounter.
type reqCounts struct {
	produce, fetch, other, batches, batchRecords int64
}

func (c *reqCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	switch key {
	case 0:
		c.produce.Add(1)
	case 1:
		c.fetch.Add(1)
	default:
		c.other.Add(1)
	}
}

func (c *reqCounter) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	c.batches.Add(1)
	c.batchRecords.Add(int64(m.NumRecords))
}

func (c *reqCounter) counts() reqCounts {
	return reqCounts{produce: c.produce.Load(), fetch: c.fetch.Load(), other: c.other.Load(),
		batches: c.batches.Load(), batchRecords: c.batchRecords.Load()}
}

// perK is x per 1000 input records of the run.
func (r e2eRun) perK(x int64) float64 { return float64(x) * 1000 / float64(r.n) }

// reportReqs reports the run's requests per 1000 input records and the
// mean records per produced batch.
func (r e2eRun) reportReqs(b *testing.B, prefix string) {
	b.ReportMetric(r.perK(r.reqs.produce), prefix+"produce-reqs/1k")
	b.ReportMetric(r.perK(r.reqs.fetch), prefix+"fetch-reqs/1k")
	b.ReportMetric(r.perK(r.reqs.other), prefix+"other-reqs/1k")
	if r.reqs.batches > 0 {
		b.ReportMetric(float64(r.reqs.batchRecords)/float64(r.reqs.batches), prefix+"records/batch")
	}
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func buildKeyedCount(bl *Builder) {
	in := From(bl, "in", String(), JSON[benchEvent]())
	Count(GroupByKey(in, Codecs(String(), JSON[benchEvent]())), StoreConfig{Name: "c", TTL: time.Hour}).
		ToStream().To("out", String(), Int64())
}

func BenchmarkE2EKeyedCount(b *testing.B) { benchE2EApp(b, buildKeyedCount) }

// BenchmarkE2EKeyedCountExactlyOnce is the keyed count under ExactlyOnce.
func BenchmarkE2EKeyedCountExactlyOnce(b *testing.B) {
	benchE2EApp(b, buildKeyedCount, Delivery(ExactlyOnce))
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
		r := runE2EApp(b, build, opts...)
		b.ReportMetric(r.rate(), "events/s")
		b.ReportMetric(r.perCPUSec(), "events/cpu-s")
		r.reportReqs(b, "")
	}
}

// runE2EApp sets up a fresh broker (untimed) and times an App processing
// the e2eRecords inputs until all their outputs are written.
func runE2EApp(b *testing.B, build func(*Builder), opts ...Opt) e2eRun {
	return runE2EAppN(b, e2eRecords, build, opts...)
}

func runE2EAppN(b *testing.B, n int, build func(*Builder), opts ...Opt) e2eRun {
	b.StopTimer()
	scope := &scopedTB{TB: b}
	defer scope.done()
	tb := e2eSetupN(scope, n)
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
	defer profWindow("app")()
	start, cpu0 := time.Now(), cpuTime(b)
	go func() { done <- a.Run(ctx) }()
	// Every input handled (a table's updates are collapsed between
	// commits, so the outputs may be fewer than the inputs), then the
	// graceful stop, timed too: its final commit flushes the collapsed
	// updates and writes the state (and checkpoint) the run built up, as
	// the hand loop's final Flush and Close are timed.
	waitInputHandled(b, a, int64(n))
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return e2eRun{n: n, wall: time.Since(start), cpu: cpuTime(b) - cpu0, reqs: reqs.counts()}
}

// BenchmarkE2EStartup measures the fixed cost of starting the keyed count
// App (3 partitions): CPU from Run until its three tasks are open (stores
// opened and restored, changelog and dead-letter topics created, group
// joined), then the graceful stop. One input record makes the first poll
// return at once. It fails if a task's store was opened more than once.
func BenchmarkE2EStartup(b *testing.B) {
	for range b.N {
		b.StopTimer()
		scope := &scopedTB{TB: b}
		tb := startBrokerB(scope)
		tb.createTopic("in", 3)
		tb.createTopic("out", 3)
		tb.produce(&kgo.Record{Topic: "in", Key: []byte("zone-000001"), Value: []byte(`{"n":1}`)})
		bl := NewBuilder()
		buildKeyedCount(bl)
		a, err := NewApp("bench", bl, Brokers(tb.seeds...), StateDir(b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		stopProf := profWindow("startup")
		start, cpu0 := time.Now(), cpuTime(b)
		go func() { done <- a.Run(ctx) }()
		deadline := time.Now().Add(time.Minute)
		for counterValue(a.metrics.tasksOpened) < 3 {
			if time.Now().After(deadline) {
				b.Fatal("tasks not opened within a minute")
			}
			time.Sleep(time.Millisecond)
		}
		wallReady, cpuReady := time.Since(start), cpuTime(b)-cpu0
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		cpuAll := cpuTime(b) - cpu0
		stopProf()
		b.StopTimer()
		if n := counterValue(a.metrics.tasksOpened); n != 3 {
			b.Fatalf("%v tasks opened, want 3 (one per partition, once)", n)
		}
		scope.done()
		b.StartTimer()
		b.ReportMetric(float64(cpuReady.Microseconds())/1000, "cpu-ms-to-ready")
		b.ReportMetric(float64(cpuAll.Microseconds())/1000, "cpu-ms-with-stop")
		b.ReportMetric(float64(wallReady.Microseconds())/1000, "wall-ms-to-ready")
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
	Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Hour}).ToStream().To("out", String(), Int64())
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
		start, cpu0 := time.Now(), cpuTime(b)
		if err := tk.restore(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(e2eRecords)/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(float64(e2eRecords)/(cpuTime(b)-cpu0).Seconds(), "records/cpu-s")
		tk.close()
	}
}

// profWindow writes a CPU profile of one timed run to a new file in
// $E2E_PROF_DIR, if set: the timed window only (not the setup), for
// comparing the App's profile with the hand loop's.
func profWindow(kind string) func() {
	dir := os.Getenv("E2E_PROF_DIR")
	if dir == "" {
		return func() {}
	}
	f, err := os.CreateTemp(dir, kind+"-*.cpu")
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
