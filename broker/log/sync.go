package log

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/weirhq/weir/vfs"
)

// Group commit.
//
// The appender writes under mu and publishes l.written. A durable appender
// then waits until l.synced covers its end offset. Whoever finds no fsync in
// progress becomes the leader: it snapshots l.written, fsyncs that segment
// without holding any lock, then publishes the snapshot as l.synced (and, under
// SyncAlways, as the high watermark) and wakes every waiter. Appenders that
// arrive during an fsync queue behind it and are all covered by the next one,
// so N concurrent producers share one fsync instead of paying N. The
// background goroutine leads the same way for non-durable appends and for the
// SyncInterval ticker.
//
// A failed fsync (SyncAlways) rolls the log back to l.synced: the file is
// truncated, the in-memory state reset, and every appender whose batch lay
// beyond that point gets the error. Readers never saw that data (the high
// watermark only covers synced data).

// waitSynced blocks until the data up to offset end (written in rollback
// epoch epoch) is durable, leading an fsync if none is running.
func (l *Log) waitSynced(end int64, epoch uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	for {
		if err := l.rolledBackLocked(end, epoch); err != nil {
			return err
		}
		if l.synced.next >= end {
			return nil
		}
		if l.isClosed {
			return ErrClosed
		}
		if !l.syncing {
			l.leadSyncLocked()
			continue
		}
		l.syncCond.Wait()
	}
}

// leadSyncLocked fsyncs everything written so far. syncMu is held on entry
// and on return but released during the fsync.
func (l *Log) leadSyncLocked() {
	l.syncing = true
	target := l.written
	epoch := l.rollbacks
	l.syncMu.Unlock()
	var err error
	if target.seg.acquire() {
		err = target.seg.f.Sync()
		target.seg.release(l)
	} // else: the segment was deleted by retention, so it was closed, and rolls sync.
	if err != nil {
		if l.policy == SyncAlways {
			l.mu.Lock()
			l.rollbackLocked(err)
			l.mu.Unlock()
		} else {
			l.logger.Error("periodic fsync failed", "segment", target.seg.name(), "err", err)
		}
	}
	l.syncMu.Lock()
	l.syncing = false
	if err == nil && epoch == l.rollbacks && target.next > l.synced.next {
		l.synced = target
		if l.policy == SyncAlways {
			l.setHW(target.next)
		}
	}
	l.notifySyncedLocked()
}

// syncWritten makes everything written so far durable (background use).
func (l *Log) syncWritten() {
	l.syncMu.Lock()
	end, epoch := l.written.next, l.rollbacks
	l.syncMu.Unlock()
	_ = l.waitSynced(end, epoch)
}

// syncAllLocked fsyncs the active segment and publishes everything written
// as synced. On failure under SyncAlways the log is rolled back. mu must be
// held (so nothing is written meanwhile); it does not wait for a running
// leader, whose own result is reconciled by the rollback epoch.
func (l *Log) syncAllLocked() error {
	l.syncMu.Lock()
	target := l.written
	done := l.synced.next >= target.next && l.synced.seg == target.seg && l.synced.pos == target.pos
	l.syncMu.Unlock()
	if done {
		return nil
	}
	if err := target.seg.f.Sync(); err != nil {
		if l.policy == SyncAlways {
			l.rollbackLocked(err)
		}
		return storageErr("fsync "+target.seg.name(), err)
	}
	l.syncMu.Lock()
	if target.next >= l.synced.next {
		l.synced = target
		l.setHW(target.next)
	}
	l.notifySyncedLocked()
	l.syncMu.Unlock()
	return nil
}

// rollbackLocked undoes every append not known durable after a failed
// fsync: the active segment is truncated to the synced point. mu must be
// held.
func (l *Log) rollbackLocked(cause error) {
	l.syncMu.Lock()
	s := l.synced
	l.syncMu.Unlock()
	act := l.active
	pos, maxTs, maxTsOff := int64(0), int64(-1), int64(-1)
	if s.seg == act {
		pos, maxTs, maxTsOff = s.pos, s.maxTs, s.maxTsOff
	}
	next := s.next
	if act.size.Load() > pos || l.next > next {
		l.logger.Error("fsync failed: rolled back appends not known durable",
			"segment", act.name(), "pos", pos, "from_offset", next, "to_offset", l.next, "err", cause)
		if err := act.f.Truncate(pos); err != nil {
			l.logger.Error("truncate after failed fsync", "segment", act.name(), "pos", pos, "err", err)
			act.dirtyTail = true
		} else {
			act.truncated(pos)
		}
		act.mu.Lock()
		act.ix.truncate(pos, next, maxTs, maxTsOff)
		act.mu.Unlock()
		act.size.Store(pos)
		l.next = next
		l.leo.Store(next)
		// The producer state included the removed batches.
		if err := l.rebuildProducerStateLocked(); err != nil {
			l.logger.Error("rebuild producer state after rollback", "err", err)
		}
	}
	l.syncMu.Lock()
	l.written = syncPoint{seg: act, pos: pos, next: next, maxTs: maxTs, maxTsOff: maxTsOff}
	l.rollbacks++
	l.rbPoints = append(l.rbPoints, next)
	l.rbErr = storageErr(fmt.Sprintf("fsync %s", act.name()), cause)
	if l.policy == SyncAlways {
		// Nothing readers saw is lost: hw <= synced.next.
		l.hw.Store(min(l.hw.Load(), next))
	}
	l.notifySyncedLocked()
	l.syncMu.Unlock()
}

// Checkpoint pacing: the background goroutine advances the recovery point
// once at least checkpointBytes were synced since the last one, or
// checkpointMaxAge passed with any change. This bounds a crash recovery scan
// to about checkpointBytes (plus what checkpointMaxAge lets through at low
// rates) while costing a busy partition four fsyncs per checkpointBytes.
const (
	checkpointBytes  = 64 << 20
	checkpointMaxAge = 10 * time.Second
)

// checkpoint advances the recovery point to the synced end: the index
// entries below it are written and fsynced, then the recovery-point file is
// replaced atomically. Unless force, it skips when checkpoint pacing says
// it is not due.
func (l *Log) checkpoint(force bool) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.syncMu.Lock()
	p := l.synced
	l.syncMu.Unlock()
	if p.seg == nil {
		return nil
	}
	l.ckptFileMu.Lock()
	last, have, at := l.lastCkpt, l.haveCkpt, l.lastCkptAt
	l.ckptFileMu.Unlock()
	if have && last.segBase == p.seg.base && last.pos == p.pos {
		return nil
	}
	if !force && have && last.segBase == p.seg.base && p.pos-last.pos < checkpointBytes && time.Since(at) < checkpointMaxAge {
		return nil
	}
	if err := p.seg.flushIndexes(p.pos, p.next); err != nil {
		return storageErr("flush index of "+p.seg.name(), err)
	}
	if err := l.writeCheckpoint(checkpoint{segBase: p.seg.base, pos: p.pos, next: p.next, maxTs: p.maxTs, maxTsOff: p.maxTsOff}); err != nil {
		return err
	}
	// A producer snapshot at about the same point, so that a crash
	// recovery replays only what it scans anyway. Encoded under the append
	// lock (consistent with the log end), written outside it.
	l.mu.Lock()
	if l.shut {
		l.mu.Unlock()
		return nil
	}
	off, b := l.encodeSnapshotLocked()
	l.mu.Unlock()
	return l.writeSnapshotFile(off, b)
}

// writeCheckpoint replaces the recovery-point file with c unless the last
// one written is further along (a checkpoint never moves back).
func (l *Log) writeCheckpoint(c checkpoint) error {
	l.ckptFileMu.Lock()
	defer l.ckptFileMu.Unlock()
	if l.haveCkpt {
		lc := l.lastCkpt
		if c.segBase < lc.segBase || (c.segBase == lc.segBase && c.pos < lc.pos) {
			return nil
		}
		if c == lc {
			return nil
		}
	}
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, checkpointFile), c.encode()); err != nil {
		return storageErr("write checkpoint", err)
	}
	l.lastCkpt, l.haveCkpt, l.lastCkptAt = c, true, time.Now()
	return nil
}
