package log

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// The Manager's background cleaner: every CleanerInterval it picks, among
// the compacted logs, the one with the highest dirty ratio at or above its
// min.cleanable.dirty.ratio (or one overdue by max.compaction.lag.ms), cleans
// it at CleanerBytesPerSec, and repeats while some log is due.

// DefaultCleanerInterval is how often the cleaner looks for work (Kafka's
// log.cleaner.backoff.ms is 15 s).
const DefaultCleanerInterval = 15 * time.Second

// DefaultCleanerBytesPerSec is the cleaner's default I/O budget (reads of
// both passes plus writes). Unlimited, a clean saturates a core and the
// disk and multiplies the appenders' p99 latency (16x on the 2-vCPU build
// VM, BenchmarkCleanLarge); at 250 MB/s it cleans ~119 MB of log per second
// with produce p99 within 2x of idle.
const DefaultCleanerBytesPerSec = 250_000_000

// cleanerRate is the effective I/O budget (0 in the options: default; < 0:
// unlimited).
func (m *Manager) cleanerRate() int64 {
	switch r := m.opts.CleanerBytesPerSec; {
	case r == 0:
		return DefaultCleanerBytesPerSec
	case r < 0:
		return 0
	default:
		return r
	}
}

// managerCleaner runs the loop; stop/done are owned by the Manager.
type managerCleaner struct {
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	stats CleanerStats
}

// CleanerStats are the Manager's cleaner totals since it was opened (as
// Kafka's kafka.log:type=LogCleaner and LogCleanerManager metrics). Passes
// by the background loop and by Manager.Clean/CleanOnce are counted; direct
// Log.Clean calls are not.
type CleanerStats struct {
	Passes         int64 // passes that rewrote segments
	Errors         int64 // passes that failed (storage errors, corruption; not a pass aborted by retention)
	BytesRead      int64
	BytesWritten   int64
	RecordsRemoved int64
	MarkersRemoved int64
	AbortedPruned  int64 // aborted-transaction index entries dropped
	// LastPassDuration is the duration of the last pass that ran.
	LastPassDuration time.Duration
	// MaxDirtyRatio and MaxCompactionDelay are from the last look over the
	// compacted logs (each loop tick, each CleanOnce): the highest dirty
	// ratio, and how far the most overdue log is past its
	// max.compaction.lag.ms (0 if none).
	MaxDirtyRatio      float64
	MaxCompactionDelay time.Duration
	LastLook           time.Time // zero before the first look
}

// CleanerStats returns the cleaner's totals.
func (m *Manager) CleanerStats() CleanerStats {
	if m.cleaner == nil {
		return CleanerStats{}
	}
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	return m.cleaner.stats
}

// recordPass adds one pass's outcome to the stats.
func (m *Manager) recordPass(res CleanResult, err error) {
	if m.cleaner == nil {
		return
	}
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	st := &m.cleaner.stats
	st.BytesRead += res.BytesRead
	st.BytesWritten += res.BytesWritten
	st.RecordsRemoved += res.RecordsRemoved
	st.MarkersRemoved += res.MarkersRemoved
	st.AbortedPruned += res.AbortedPruned
	if res.Cleaned {
		st.Passes++
		st.LastPassDuration = res.Duration
	}
	if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, errCleanAborted) {
		st.Errors++
	}
}

// recordLook stores the result of a look over the compacted logs.
func (m *Manager) recordLook(maxRatio float64, maxOverdueMs int64, at time.Time) {
	if m.cleaner == nil {
		return
	}
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	m.cleaner.stats.MaxDirtyRatio = maxRatio
	m.cleaner.stats.MaxCompactionDelay = time.Duration(maxOverdueMs) * time.Millisecond
	m.cleaner.stats.LastLook = at
}

// startCleaner starts the loop unless disabled (CleanerInterval < 0).
func (m *Manager) startCleaner() {
	m.cleaner = &managerCleaner{stop: make(chan struct{}), done: make(chan struct{})}
	if m.opts.CleanerInterval < 0 {
		close(m.cleaner.done)
		return
	}
	iv := m.opts.CleanerInterval
	if iv == 0 {
		iv = DefaultCleanerInterval
	}
	go func() {
		defer close(m.cleaner.done)
		t := time.NewTicker(iv)
		defer t.Stop()
		for {
			select {
			case <-m.cleaner.stop:
				return
			case <-t.C:
			}
			// Keep cleaning while a log is due (bounded per tick).
			for range 64 {
				res, err := m.CleanOnce(false)
				if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, errCleanAborted) {
					m.opts.Logger.Warn("log cleaner", "err", err)
				}
				if !res.Cleaned {
					break
				}
				select {
				case <-m.cleaner.stop:
					return
				default:
				}
			}
		}
	}()
}

// stopCleaner stops the loop and waits for a running pass to finish.
func (m *Manager) stopCleaner() {
	if m.cleaner == nil {
		return
	}
	close(m.cleaner.stop)
	<-m.cleaner.done
}

// CleanOnce cleans the dirtiest compacted log that is due (all of them are
// considered due with force). It returns the pass's result (Cleaned false
// if nothing was due).
func (m *Manager) CleanOnce(force bool) (CleanResult, error) {
	type cand struct {
		l     *Log
		ratio float64
	}
	var cs []cand
	maxRatio, maxOverdue := 0.0, int64(0)
	for _, l := range m.openLogs() {
		cfg := l.config()
		if !cfg.Compact || l.closed.Load() {
			continue
		}
		l.cleaner.mu.Lock()
		err := l.loadCleanerLocked()
		var p cleanPlan
		if err == nil {
			p, err = l.planClean(cfg, l.now().UnixMilli(), force)
		}
		l.cleaner.mu.Unlock()
		if err != nil {
			m.opts.Logger.Warn("log cleaner: planning", "log", l.dir, "err", err)
			continue
		}
		maxRatio, maxOverdue = max(maxRatio, p.ratio), max(maxOverdue, p.overdueMs)
		if p.due {
			cs = append(cs, cand{l, p.ratio})
		}
	}
	m.recordLook(maxRatio, maxOverdue, m.opts.Now())
	if len(cs) == 0 {
		return CleanResult{}, nil
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].ratio > cs[j].ratio })
	res, err := cs[0].l.Clean(CleanOptions{Force: force, BytesPerSec: m.cleanerRate(), MapBytes: m.opts.CleanerMapBytes})
	m.recordPass(res, err)
	if err != nil {
		return res, fmt.Errorf("%s: %w", cs[0].l.dir, err)
	}
	return res, nil
}

// Clean cleans every compacted log that is due (force: every compacted log
// with dirty segments) once, and returns the number of logs cleaned. Tests
// and tools call it; the background loop uses CleanOnce.
func (m *Manager) Clean(force bool) (int, error) {
	n := 0
	var errs []error
	for _, l := range m.openLogs() {
		if !l.config().Compact {
			continue
		}
		res, err := l.Clean(CleanOptions{Force: force, BytesPerSec: m.cleanerRate(), MapBytes: m.opts.CleanerMapBytes})
		m.recordPass(res, err)
		if err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, fmt.Errorf("%s: %w", l.dir, err))
		}
		if res.Cleaned {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// openLogs is a snapshot of the open logs.
func (m *Manager) openLogs() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out
}
