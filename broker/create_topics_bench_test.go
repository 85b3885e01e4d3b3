package broker

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
)

// BenchmarkCreateTopic1000Partitions creates 1,000-partition topics with
// CreateTopics on the OS file system, alternating the partition-open pool
// between 1 (the old, serial path: the log manager held its lock across
// each open) and the default size, so both see the same machine load. It
// reports the mean time of each and their ratio (parallel/serial):
//
//	go test -run '^$' -bench CreateTopic1000 -benchtime 3x ./broker
func BenchmarkCreateTopic1000Partitions(b *testing.B) {
	br, _ := testBroker(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl := newClient(b, br)
	pools := []int{1, openConcurrency}
	var spent [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for j, pool := range pools {
			br.topics.openSem = make(chan struct{}, pool)
			req := createTopicsReq(600_000, false, map[string]int32{fmt.Sprintf("wide-%d-%d", i, pool): 1000})
			start := time.Now()
			resp, err := req.RequestWith(ctx, cl)
			spent[j] += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if c := resp.Topics[0].ErrorCode; c != 0 {
				b.Fatalf("create: code %d", c)
			}
		}
	}
	b.StopTimer()
	serial := float64(spent[0].Milliseconds()) / float64(b.N)
	parallel := float64(spent[1].Milliseconds()) / float64(b.N)
	b.ReportMetric(serial, "ms/topic-pool1")
	b.ReportMetric(parallel, fmt.Sprintf("ms/topic-pool%d", openConcurrency))
	b.ReportMetric(parallel/serial, "ratio")
}

// BenchmarkRecover1000Partitions reopens a data dir holding one
// 1,000-partition topic (the topic registry and every log, as at broker
// start), alternating the open pool between 1 and the default size, and
// reports the mean of each and their ratio (parallel/serial).
func BenchmarkRecover1000Partitions(b *testing.B) {
	dir := b.TempDir()
	br, _ := testBroker(b, func(c *Config) { c.DataDir = dir })
	resp, err := createTopicsReq(600_000, false, map[string]int32{"wide": 1000}).RequestWith(testCtx(b), newClient(b, br))
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		b.Fatalf("create: %v %+v", err, resp)
	}
	if err := br.Close(); err != nil {
		b.Fatal(err)
	}
	pools := []int{1, openConcurrency}
	var spent [2]time.Duration
	b.ResetTimer()
	for range b.N {
		for j, pool := range pools {
			start := time.Now()
			logs, err := wlog.OpenManager(wlog.ManagerOptions{Dir: logsDir(dir), RetentionCheckInterval: -1, CleanerInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			r, err := openRegistryPool(vfs.Default, dir, logs, slog.New(slog.DiscardHandler), maxPartitionsPerTopic, pool)
			if err != nil {
				b.Fatal(err)
			}
			spent[j] += time.Since(start)
			if tp, ok := r.get("wide"); !ok || len(tp.parts) != 1000 {
				b.Fatal("topic not recovered")
			}
			if err := logs.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	serial := float64(spent[0].Milliseconds()) / float64(b.N)
	parallel := float64(spent[1].Milliseconds()) / float64(b.N)
	b.ReportMetric(serial, "ms/open-pool1")
	b.ReportMetric(parallel, fmt.Sprintf("ms/open-pool%d", openConcurrency))
	b.ReportMetric(parallel/serial, "ratio")
}
