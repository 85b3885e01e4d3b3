package log

import (
	"fmt"
	"path/filepath"

	"github.com/weirhq/weir/vfs"
)

// DeleteRecords advances the log start offset to before (-1 means the high
// watermark), persisting it (log-start-offset file, atomic) before it takes
// effect, and deletes the closed segments entirely below it. It returns the
// new log start offset. before must be <= HighWatermark
// (ErrOffsetOutOfRange otherwise); a value at or below the current log
// start changes nothing.
func (l *Log) DeleteRecords(before int64) (int64, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	hw := l.hw.Load()
	if before == -1 {
		before = hw
	}
	if before < 0 || before > hw {
		return l.logStart.Load(), fmt.Errorf("%w: delete before %d, high watermark %d", ErrOffsetOutOfRange, before, hw)
	}
	if before <= l.logStart.Load() {
		return l.logStart.Load(), nil
	}
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, logStartFile), encodeLogStart(before)); err != nil {
		return l.logStart.Load(), storageErr("write log start offset", err)
	}
	l.logStart.Store(before)
	l.mu.Lock()
	gone := l.deletePrefixLocked(func(i int, seg, next *segment) bool { return next.base <= before })
	l.ps.dropProducersBelow(before)
	l.mu.Unlock()
	n := l.dropSegments(gone)
	if n > 0 {
		l.logger.Info("deleted segments below log start offset", "segments", n, "log_start", before)
	}
	return before, nil
}

// ApplyRetention deletes the oldest closed segments whose max timestamp is
// older than retention.ms, or while the log exceeds retention.bytes by at
// least a whole segment, and those entirely below the log start offset.
// Only whole closed segments are deleted; if every closed segment is
// expired by time and so is the active one, the active one is rolled first
// (as Kafka does) so it can go too. Segments are removed from the log at
// once; their files are closed and removed when the last reader releases
// them. It returns the number of segments deleted.
func (l *Log) ApplyRetention() (int, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	cfg := l.config()
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	l.mu.Lock()
	locked := true
	defer func() {
		if locked {
			l.mu.Unlock()
		}
	}()
	if l.shut {
		return 0, ErrClosed
	}
	now := l.now().UnixMilli()
	l.ps.expire(now, ProducerIDExpirationMs)
	ls := l.logStart.Load()
	expired := func(seg *segment) bool {
		if !cfg.Delete || cfg.RetentionMs < 0 {
			return false
		}
		ts, _, err := l.segMaxTs(seg)
		if err != nil {
			l.logger.Warn("retention: max timestamp", "segment", seg.name(), "err", err)
			return false
		}
		return ts >= 0 && now-ts > cfg.RetentionMs
	}
	// Roll an expired active segment if everything before it is expired.
	segs := l.segments()
	act := l.active
	if act.size.Load() > 0 && expired(act) {
		all := true
		for _, s := range segs[:len(segs)-1] {
			if !expired(s) {
				all = false
				break
			}
		}
		if all {
			if err := l.roll(); err != nil {
				return 0, err
			}
		}
	}
	total := l.Size()
	gone := l.deletePrefixLocked(func(i int, seg, next *segment) bool {
		switch {
		case next.base <= ls:
		case expired(seg):
		case cfg.Delete && cfg.RetentionBytes >= 0 && total-seg.size.Load() >= cfg.RetentionBytes:
		default:
			return false
		}
		total -= seg.size.Load()
		return true
	})
	if len(gone) > 0 {
		l.ps.dropProducersBelow(l.logStart.Load())
	}
	l.mu.Unlock()
	locked = false
	n := l.dropSegments(gone)
	if n > 0 {
		l.logger.Info("retention deleted segments", "segments", n, "log_start", l.logStart.Load())
	}
	return n, nil
}

// deletePrefixLocked removes the longest prefix of closed segments for which
// del holds (next is the following segment) from the log and advances the
// log start offset to the first remaining base. The active segment is never
// removed. The caller passes the result to dropSegments after releasing mu.
// mu must be held.
func (l *Log) deletePrefixLocked(del func(i int, seg, next *segment) bool) []*segment {
	l.segsMu.Lock()
	segs := l.segs
	n := 0
	for n < len(segs)-1 && del(n, segs[n], segs[n+1]) {
		n++
	}
	if n == 0 {
		l.segsMu.Unlock()
		return nil
	}
	gone := segs[:n]
	l.segs = append([]*segment(nil), segs[n:]...)
	first := l.segs[0].base
	l.segsMu.Unlock()
	for {
		cur := l.logStart.Load()
		if cur >= first || l.logStart.CompareAndSwap(cur, first) {
			break
		}
	}
	return gone
}

// dropSegments marks removed segments deleted and drops the log's reference:
// each one's files are removed now, or when its last reader finishes. It
// does I/O, so no lock is held.
func (l *Log) dropSegments(gone []*segment) int {
	for _, seg := range gone {
		seg.deleted.Store(true)
		seg.release(l)
	}
	return len(gone)
}

// logDirName is the directory of a partition under a manager's data dir.
func logDirName(dir, topic string, partition int32) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d", topic, partition))
}
