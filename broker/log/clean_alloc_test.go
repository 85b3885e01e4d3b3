package log

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/weirhq/weir/vfs"
)

// A pass allocates per segment, not per batch or record: the cleaner's
// garbage would otherwise make the appenders pay for GC cycles (assists,
// the workers' CPU) while it runs.
func TestCleanAllocationsPerSegmentNotPerBatch(t *testing.T) {
	clk := newClock()
	cfg := Config{SegmentBytes: 2 << 20, Compact: true}
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: cfg, Now: clk.Now})
	defer l.Close()
	value := strings.Repeat("v", 200)
	const batches, perBatch, keys = 16000, 4, 6400
	rng := rand.New(rand.NewPCG(1, 2))
	for range batches {
		recs := make([]kv, perBatch)
		for j := range recs {
			recs[j] = kv{fmt.Sprintf("key-%05d", rng.IntN(keys)), &value}
		}
		mustAppend(t, l, kvBatch(testBatch{firstTs: clk.Now().UnixMilli()}, recs...), false)
	}
	l.mu.Lock()
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
	l.mu.Unlock()
	segs := len(l.segments())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := l.Clean(CleanOptions{Force: true})
	runtime.ReadMemStats(&after)
	if err != nil || !res.Cleaned || res.RecordsRemoved == 0 {
		t.Fatalf("clean: %+v %v", res, err)
	}
	allocs := after.Mallocs - before.Mallocs
	t.Logf("%d segments, %d batches: %d allocations, %d bytes", segs, batches, allocs, after.TotalAlloc-before.TotalAlloc)
	// What a pass allocates per segment (buffers, names, the swap's files)
	// is bounded; per batch nothing.
	if limit := uint64(200 * segs); allocs > limit {
		t.Fatalf("a pass over %d batches in %d segments allocated %d times, want at most %d", batches, segs, allocs, limit)
	}
}
