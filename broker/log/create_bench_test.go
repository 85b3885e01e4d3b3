package log

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// BenchmarkCreatePartitions creates 1,000 partitions on the OS file system,
// 16 at a time (the broker's open pool), alternating between the creation
// path (2 fsyncs) and the path every Open took before it (8 fsyncs: the
// directory made durable first, then the segment files and a recovery
// point synced one by one; Open of an existing empty directory still goes
// that way), so both see the same machine load. It reports the mean time
// of each per 1,000 partitions and their ratio (new/old):
//
//	go test -run '^$' -bench CreatePartitions -benchtime 3x ./broker/log
func BenchmarkCreatePartitions(b *testing.B) {
	const parts, pool = 1000, 16
	root := b.TempDir()
	variants := []struct {
		name string
		open func(dir string) (*Log, error)
	}{
		{"old8", func(dir string) (*Log, error) {
			if err := vfs.MkdirAllDurable(vfs.Default, dir); err != nil {
				return nil, err
			}
			return Open(Options{Dir: dir})
		}},
		{"new2", func(dir string) (*Log, error) { return Open(Options{Dir: dir}) }},
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for j, v := range variants {
			parent := filepath.Join(root, fmt.Sprintf("%s-%d", v.name, i))
			if err := vfs.MkdirAllDurable(vfs.Default, parent); err != nil {
				b.Fatal(err)
			}
			logs := make([]*Log, parts)
			sem := make(chan struct{}, pool)
			var wg sync.WaitGroup
			var errOnce sync.Once
			var firstErr error
			start := time.Now()
			for p := range parts {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					l, err := v.open(filepath.Join(parent, fmt.Sprintf("t-%d", p)))
					if err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
					logs[p] = l
				})
			}
			wg.Wait()
			spent[j] += time.Since(start)
			b.StopTimer()
			for _, l := range logs {
				if l != nil {
					l.Close()
				}
			}
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	old := float64(spent[0].Milliseconds()) / float64(b.N)
	cur := float64(spent[1].Milliseconds()) / float64(b.N)
	b.ReportMetric(old, "ms/1000-old8")
	b.ReportMetric(cur, "ms/1000-new2")
	b.ReportMetric(cur/old, "ratio")
}
