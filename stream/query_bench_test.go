package stream

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkQueryGet measures point lookups on one of two instances: keys of
// its own partitions (a Pebble read) against keys another instance owns
// (forwarded over HTTP), in the same run. Reported: ns per lookup of each
// kind and their ratio.
func BenchmarkQueryGet(bm *testing.B) {
	b := startBrokerB(bm)
	const parts, keys = 4, 100
	b.createTopic("events", parts)
	b.createTopic("counts", parts)
	var apps []*App
	for range 2 {
		bl := NewBuilder()
		countTopology(bl)
		a, err := NewApp("qb", bl, Brokers(b.seeds...), StateDir(bm.TempDir()), CommitInterval(20*time.Millisecond),
			QueryServer("127.0.0.1:0"))
		if err != nil {
			bm.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		bm.Cleanup(func() { cancel(); <-done })
		apps = append(apps, a)
	}
	truth := map[string]int64{}
	produceEvents(b, 0, 1000, keys, truth)
	a := apps[0]
	var local, remote [][]byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		local, remote = nil, nil
		mine := localPartitions(a)
		ready := len(mine) > 0 && len(mine)+len(localPartitions(apps[1])) == parts
		for k, want := range truth {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			e, found, err := a.Get(ctx, "counts", []byte(k))
			cancel()
			n, _ := Int64().Decode(e.Value)
			ready = ready && err == nil && found && n == want
			if slices.Contains(mine, e.Partition) {
				local = append(local, []byte(k))
			} else {
				remote = append(remote, []byte(k))
			}
		}
		if ready && len(local) > 0 && len(remote) > 0 {
			break
		}
		if time.Now().After(deadline) {
			bm.Fatal("instances did not settle")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := context.Background()
	run := func(ks [][]byte) time.Duration {
		start := time.Now()
		for i := range bm.N {
			if _, _, err := a.Get(ctx, "counts", ks[i%len(ks)]); err != nil {
				bm.Fatal(err)
			}
		}
		return time.Since(start)
	}
	bm.ResetTimer()
	dl := run(local)
	dr := run(remote)
	bm.StopTimer()
	bm.ReportMetric(float64(dl.Nanoseconds())/float64(bm.N), "ns-local")
	bm.ReportMetric(float64(dr.Nanoseconds())/float64(bm.N), "ns-remote")
	bm.ReportMetric(float64(dr)/float64(dl), "remote/local")
}
