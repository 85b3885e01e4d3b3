package broker

import (
	"context"
	"fmt"
	"testing"
	"time"
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
