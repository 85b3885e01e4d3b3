package group

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
)

// BenchmarkOffsetCommit measures acknowledged (fsynced) OffsetCommits per
// second on a real file system, with 1 committer (the baseline: one fsync
// per commit) and with 16 concurrent committers, whose appends the writer
// coalesces into one fsync.
//
//	go test -run XXX -bench OffsetCommit -benchtime 2000x ./broker/group
func BenchmarkOffsetCommit(b *testing.B) {
	for _, committers := range []int{1, 16} {
		b.Run(fmt.Sprintf("committers=%d", committers), func(b *testing.B) {
			l, err := wlog.Open(wlog.Options{FS: vfs.Default, Dir: b.TempDir(), Config: wlog.Config{Compact: true}})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			topics := newFakeTopics(map[string]int32{"t": 64})
			c, err := NewCoordinator(Options{Offsets: l, Topics: topics})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var next atomic.Int64
			done := make(chan struct{})
			var failed atomic.Int64
			start := time.Now()
			for w := range committers {
				go func() {
					defer func() { done <- struct{}{} }()
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						req := commitReq(fmt.Sprintf("g%d", w), "", -1, "t", map[int32]int64{int32(n % 64): n})
						resp, err := c.Handle(context.Background(), req)
						if err != nil || resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
							failed.Add(1)
						}
					}
				}()
			}
			for range committers {
				<-done
			}
			if failed.Load() > 0 {
				b.Fatalf("%d commits failed", failed.Load())
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		})
	}
}
