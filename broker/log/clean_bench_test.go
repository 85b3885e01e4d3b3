package log

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// BenchmarkCleanLarge (issue 6): builds a log of WEIR_CLEAN_BENCH_MB MiB
// (default 256) of 1 KiB records whose keys are 10% unique, on the real
// disk, then measures in the same run:
//   - produce latency while idle: durable appends of 4 KiB batches (4
//     records) for 3 s, p50/p99;
//   - one forced clean of the whole log (cleaner MB/s = log bytes before the
//     clean / clean duration; both passes read everything) with the same
//     producer running, and the produce p50/p99 during the clean.
//
// WEIR_CLEAN_RATE (bytes/s, default 0 = unlimited) sets the cleaner's I/O
// rate. Run with -benchtime 1x.
func BenchmarkCleanLarge(b *testing.B) {
	mb := 256
	if v, err := strconv.Atoi(os.Getenv("WEIR_CLEAN_BENCH_MB")); err == nil && v > 0 {
		mb = v
	}
	var rate int64
	if v, err := strconv.ParseInt(os.Getenv("WEIR_CLEAN_RATE"), 10, 64); err == nil {
		rate = v
	}
	for range b.N {
		dir := b.TempDir()
		cfg := Config{SegmentBytes: 128 << 20, Compact: true}
		tfs := &ioTraceFS{FS: vfs.Default}
		l, err := Open(Options{Dir: dir, Config: cfg, FS: tfs})
		if err != nil {
			b.Fatal(err)
		}
		const recSize, perBatch = 1000, 16
		nrec := mb << 20 / recSize
		keys := nrec / 10
		rng := rand.New(rand.NewPCG(1, 2))
		value := make([]byte, recSize-40)
		for i := range value {
			value[i] = byte('a' + i%26)
		}
		vs := string(value)
		for i := 0; i < nrec; i += perBatch {
			recs := make([]kv, perBatch)
			for j := range recs {
				recs[j] = kv{fmt.Sprintf("key-%08d", rng.IntN(keys)), &vs}
			}
			if _, err := l.Append(kvBatch(testBatch{firstTs: time.Now().UnixMilli()}, recs...), false); err != nil {
				b.Fatal(err)
			}
		}
		l.mu.Lock()
		if err := l.roll(); err != nil {
			b.Fatal(err)
		}
		l.mu.Unlock()
		size := l.Size()

		// The producer: durable 4 KiB appends, latencies per phase.
		var mu sync.Mutex
		var lat []time.Duration
		var at []time.Time
		stop := make(chan struct{})
		done := make(chan struct{})
		pbatch := kvBatch(testBatch{}, kv{"p-1", &vs}, kv{"p-2", &vs}, kv{"p-3", &vs}, kv{"p-4", &vs})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if _, err := l.Append(pbatch, true); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				at = append(at, t0)
				mu.Unlock()
			}
		}()
		take := func() []time.Duration {
			mu.Lock()
			defer mu.Unlock()
			out := lat
			lat, at = nil, nil
			return out
		}
		time.Sleep(3 * time.Second)
		idle := take()
		tfs.take()
		b.ResetTimer()
		t0 := time.Now()
		res, err := l.Clean(CleanOptions{Force: true, BytesPerSec: rate, MapBytes: 64 << 20})
		took := time.Since(t0)
		b.StopTimer()
		mu.Lock()
		dlat, dat := slices.Clone(lat), slices.Clone(at)
		mu.Unlock()
		during := take()
		close(stop)
		<-done
		if err != nil || !res.Cleaned {
			b.Fatalf("clean: %+v %v", res, err)
		}
		events := tfs.take()
		pct := func(d []time.Duration, q float64) float64 {
			if len(d) == 0 {
				return -1
			}
			slices.Sort(d)
			return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond)
		}
		idleP99 := pct(idle, 0.99)
		b.ReportMetric(float64(size)/(1<<20)/took.Seconds(), "cleaner_MB/s")
		b.ReportMetric(pct(idle, 0.5), "idle_p50_ms")
		b.ReportMetric(idleP99, "idle_p99_ms")
		b.ReportMetric(pct(during, 0.5), "during_p50_ms")
		b.ReportMetric(pct(during, 0.99), "during_p99_ms")
		b.ReportMetric(pct(during, 0.99)/idleP99, "p99_during/idle")
		b.Logf("produce latency ms  idle: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f (%d)  during: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f (%d)",
			pct(idle, 0.5), pct(idle, 0.9), idleP99, pct(idle, 0.999), pct(idle, 1), len(idle),
			pct(during, 0.5), pct(during, 0.9), pct(during, 0.99), pct(during, 0.999), pct(during, 1), len(during))
		// Which slow produces (over twice the idle p99) overlap one of the
		// cleaner's syncs, and how long those syncs took.
		var cleanerSyncs []ioEvent
		var syncTotal time.Duration
		for _, e := range events {
			if isCleanerIO(e) {
				cleanerSyncs = append(cleanerSyncs, e)
				syncTotal += e.dur
			}
		}
		slow, overlapping := 0, 0
		for i, d := range dlat {
			if float64(d)/float64(time.Millisecond) <= 2*idleP99 {
				continue
			}
			slow++
			s0, s1 := dat[i], dat[i].Add(d)
			for _, e := range cleanerSyncs {
				if e.start.Before(s1) && e.start.Add(e.dur).After(s0) {
					overlapping++
					break
				}
			}
		}
		type sample struct{ lat, at time.Duration }
		var worst []sample
		for i, d := range dlat {
			worst = append(worst, sample{d, dat[i].Sub(t0)})
		}
		slices.SortFunc(worst, func(a, b sample) int { return int(b.lat - a.lat) })
		worst = worst[:min(len(worst), 5)]
		b.Logf("slowest produces during the clean (latency, start after the clean's start): %v", worst)
		var syncDurs []time.Duration
		for _, e := range cleanerSyncs {
			syncDurs = append(syncDurs, e.dur)
		}
		b.Logf("produces over 2x idle p99 during the clean: %d of %d, %d of them overlap a cleaner sync; cleaner syncs: %d, total %v, p50 %.3f ms, max %.3f ms",
			slow, len(dlat), overlapping, len(cleanerSyncs), syncTotal, pct(syncDurs, 0.5), pct(syncDurs, 1))
		b.Logf("log %d MiB, %d keys: clean %v (read %d MiB, wrote %d MiB, removed %d records), %d produces idle, %d during; size after %d MiB",
			size>>20, keys, took, res.BytesRead>>20, res.BytesWritten>>20, res.RecordsRemoved, len(idle), len(during), l.Size()>>20)
		l.Close()
	}
}
