package log

import (
	"context"
)

// Split durability.
//
// Append(batches, false) returns once the bytes are written and asks the
// background goroutine for an fsync; WaitDurable then blocks until that
// group-commit fsync (or a later one) covers the append. A caller that
// has several appends in hand (the partitions of a Produce request, or the
// pipelined requests of one connection) appends them all first and waits
// afterwards, so one fsync per partition covers all of them instead of one
// each.
//
// Visibility does not change: under SyncAlways the high watermark covers
// only synced data, whether or not anyone waits. WaitDurable never leads
// the fsync itself; the log's background goroutine does, so a waiter can
// give up when its context ends while the fsync goes on.

// WaitDurable blocks until the data of res (an Append result of this log)
// is durable: nil once an fsync covers it; the storage error (ErrStorage)
// if a failed fsync rolled it back; ErrClosed if the log closed first
// (Close syncs what was written, so data written before Close is durable
// when Close succeeds). If ctx ends first it returns ctx.Err(): the data
// stays appended and becomes durable with a later fsync, or is rolled back
// by a failed one.
//
// Under SyncInterval, and for results that need no wait (a durable Append
// already waited), it returns nil at once.
func (l *Log) WaitDurable(ctx context.Context, res *AppendResult) error {
	end, epoch := res.durableEnd, res.durableEpoch
	if end == 0 || l.policy != SyncAlways {
		return nil
	}
	l.syncMu.Lock()
	for {
		if err := l.rolledBackLocked(end, epoch); err != nil {
			l.syncMu.Unlock()
			return err
		}
		if l.synced.next >= end {
			l.syncMu.Unlock()
			return nil
		}
		if l.isClosed {
			l.syncMu.Unlock()
			return ErrClosed
		}
		done := l.syncDone
		l.syncMu.Unlock()
		// The running fsync (if any) may have started before this append
		// was written: make sure another one follows. A redundant kick
		// costs nothing: the background syncs only what is not yet synced.
		l.kickSync()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
		}
		l.syncMu.Lock()
	}
}

// kickSync asks the background goroutine for an fsync of everything
// written (a no-op if one is already requested).
func (l *Log) kickSync() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// rolledBackLocked returns the rollback error if a rollback after epoch
// cut the log below end. syncMu must be held.
func (l *Log) rolledBackLocked(end int64, epoch uint64) error {
	for i := epoch; i < l.rollbacks; i++ {
		if l.rbPoints[i] < end {
			return l.rbErr
		}
	}
	return nil
}

// notifySyncedLocked wakes every waiter after synced advanced, a rollback
// or Close. syncMu must be held.
func (l *Log) notifySyncedLocked() {
	l.syncCond.Broadcast()
	close(l.syncDone)
	l.syncDone = make(chan struct{})
}
