package log

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// TestManagerCleanerStats: the Manager's cleaner totals follow its passes
// (bytes, records, passes, last duration), the look before a pass records
// the max dirty ratio and how far the most overdue log is past
// max.compaction.lag.ms (from the injected clock), and both drop to 0 once
// the log is clean.
func TestManagerCleanerStats(t *testing.T) {
	clk := newClock()
	m, err := OpenManager(ManagerOptions{FS: vfs.NewCrashableMem(), Dir: "/d", RetentionCheckInterval: -1, CleanerInterval: -1, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if st := m.CleanerStats(); st != (CleanerStats{}) {
		t.Fatalf("fresh: %+v", st)
	}
	cfg := compactCfg()
	cfg.MinCleanableDirtyRatio = 0.99
	cfg.MaxCompactionLagMs = time.Minute.Milliseconds()
	l, err := m.Open("t", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; len(l.segments()) < 4; i++ {
		ts := clk.Now().UnixMilli()
		mustAppend(t, l, kvBatch(testBatch{firstTs: ts}, kv{fmt.Sprint("k", i%4), val(strings.Repeat("v", 80))}), true)
	}
	clk.Advance(2 * time.Minute)
	res, err := m.CleanOnce(false)
	if err != nil || !res.Cleaned {
		t.Fatalf("clean (overdue): %+v %v", res, err)
	}
	st := m.CleanerStats()
	if st.Passes != 1 || st.Errors != 0 || st.BytesRead != res.BytesRead || st.BytesWritten != res.BytesWritten ||
		st.RecordsRemoved != res.RecordsRemoved || st.RecordsRemoved == 0 || st.LastPassDuration != res.Duration {
		t.Fatalf("after a pass: %+v, pass %+v", st, res)
	}
	if st.MaxCompactionDelay != time.Minute || st.MaxDirtyRatio != 1 || !st.LastLook.Equal(clk.Now()) {
		t.Fatalf("look before the pass: delay %v ratio %v at %v", st.MaxCompactionDelay, st.MaxDirtyRatio, st.LastLook)
	}
	if res, err := m.CleanOnce(false); err != nil || res.Cleaned {
		t.Fatalf("nothing due: %+v %v", res, err)
	}
	if st := m.CleanerStats(); st.MaxCompactionDelay != 0 || st.MaxDirtyRatio != 0 || st.Passes != 1 {
		t.Fatalf("clean log: %+v", st)
	}
}

// TestManagerCleanerStatsErrors: a pass that fails on I/O (ENOSPC writing
// the cleaned segment) counts as an error, not as a pass; the next one
// succeeds once the disk recovers.
func TestManagerCleanerStatsErrors(t *testing.T) {
	tog := errorfs.NewToggle(errorfs.FailIf(errorfs.PathContains(".cleaned"), syscall.ENOSPC))
	m, err := OpenManager(ManagerOptions{FS: errorfs.Wrap(vfs.NewCrashableMem(), tog), Dir: "/d", RetentionCheckInterval: -1, CleanerInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Open("t", 0, compactCfg())
	if err != nil {
		t.Fatal(err)
	}
	fillSegments(t, l, "a")
	tog.On()
	if _, err := m.CleanOnce(true); !errors.Is(err, ErrStorage) {
		t.Fatalf("clean on a full disk: %v", err)
	}
	if st := m.CleanerStats(); st.Errors != 1 || st.Passes != 0 {
		t.Fatalf("after a failed pass: %+v", st)
	}
	tog.Off()
	if res, err := m.CleanOnce(true); err != nil || !res.Cleaned {
		t.Fatalf("after recovery: %+v %v", res, err)
	}
	if st := m.CleanerStats(); st.Errors != 1 || st.Passes != 1 {
		t.Fatalf("after a good pass: %+v", st)
	}
}
