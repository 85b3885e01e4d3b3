package log

import (
	"sort"
)

// Transactions in a cleaning pass (Kafka's CleanedTransactionMetadata and
// KIP-534 delete horizons).
//
//   - Data batches of aborted transactions are removed.
//   - A COMMIT marker becomes removable once the pass reads no data batch of
//     its transaction before it; an ABORT marker likewise (its data is
//     removed by the pass that first reads it, so it is removable from the
//     following pass on). A batch kept empty for its producer's sake counts
//     as data: the marker then stays, so producer state rebuilt from the log
//     never sees a transaction without its end.
//   - A removable marker is not removed at once: the pass that first finds
//     it removable stamps it with a delete horizon (now +
//     delete.retention.ms) as Kafka does since 3.1 — attribute bit 6 set and
//     the batch's firstTimestamp replaced by the horizon, CRC recomputed — so
//     a consumer that read the transaction's data still finds its end. A
//     pass at or after the horizon removes it. With delete.retention.ms 0 it
//     is removed by the pass that finds it removable.
//   - The aborted-transaction index keeps only the transactions whose data
//     the pass still read: an entry whose data is gone is dropped from the
//     cleaned segment's .txnindex and, at the swap, from the in-memory
//     index, so read_committed fetches stop carrying it.
//
// The tracker follows the whole pass in offset order across its groups (a
// transaction's data may lie in an earlier group than its marker), which is
// stricter than Kafka's per-group state: a COMMIT whose data is kept in an
// earlier group is never taken for an empty transaction.

// abortedSeen is an aborted transaction the pass has reached.
type abortedSeen struct {
	a        AbortedTxn
	observed bool // the pass read a data batch of it
}

// txnTracker follows transactions through one pass. It also notes dueMs,
// the earliest time at which something the pass kept (a marker with a
// delete horizon, a tombstone) becomes removable, 0 if nothing: a log with
// no dirty data is cleaned again then (as Kafka cleans a log whose delete
// horizon passed).
type txnTracker struct {
	pending   []AbortedTxn // not yet reached, by FirstOffset
	aborted   map[int64]*abortedSeen
	committed map[int64]bool // pids with a data batch read and no marker yet
	kept      []AbortedTxn   // index entries of the current group to keep
	dueMs     int64
	// For tombstoneKept: the passes before this one, delete.retention.ms
	// and this pass's time.
	passes             []cleanPass
	retentionMs, nowMs int64
}

// tombstoneKept notes a tombstone at off that the pass kept: it becomes
// removable delete.retention.ms after the first pass that cleaned it (this
// one if none did).
func (t *txnTracker) tombstoneKept(off int64) {
	at := t.nowMs
	i := sort.Search(len(t.passes), func(i int) bool { return t.passes[i].End > off })
	if i < len(t.passes) {
		at = t.passes[i].TimeMs
	}
	t.noteDue(at + t.retentionMs)
}

// noteDue records that something kept becomes removable at ms.
func (t *txnTracker) noteDue(ms int64) {
	if t.dueMs == 0 || ms < t.dueMs {
		t.dueMs = ms
	}
}

// newTxnTracker takes the aborted transactions that start below end (the
// pass's cleaned range), wherever their marker lies: data in the range of a
// transaction aborted by a later marker is removed too. ps.mu must not be
// held.
func newTxnTracker(ps *producerState, end int64) *txnTracker {
	var pending []AbortedTxn
	ps.mu.RLock()
	for _, a := range ps.aborted {
		if a.FirstOffset < end {
			pending = append(pending, a)
		}
	}
	ps.mu.RUnlock()
	sort.SliceStable(pending, func(a, b int) bool { return pending[a].FirstOffset < pending[b].FirstOffset })
	return &txnTracker{pending: pending, aborted: map[int64]*abortedSeen{}, committed: map[int64]bool{}}
}

// reach starts tracking the aborted transactions that begin at or before
// off.
func (t *txnTracker) reach(off int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= off {
		a := t.pending[0]
		t.pending = t.pending[1:]
		// A producer has one transaction at a time: a later start
		// replaces an entry whose marker the pass never met.
		t.aborted[a.ProducerID] = &abortedSeen{a: a}
	}
}

// onData records a data batch and reports whether it belongs to an aborted
// transaction.
func (t *txnTracker) onData(h *batchHeader) bool {
	t.reach(h.LastOffset())
	if h.Attributes&attrTransactional == 0 || h.ProducerID < 0 {
		return false
	}
	if s, ok := t.aborted[h.ProducerID]; ok {
		if s.a.LastOffset > h.LastOffset() {
			s.observed = true
			return true
		}
		// The entry's marker lies before this batch but was never met (a
		// stale entry): that transaction is over; this is a new one.
		delete(t.aborted, h.ProducerID)
	}
	t.committed[h.ProducerID] = true
	return false
}

// onMarker records a control batch and reports whether it may be removed
// (no data of its transaction was read by this pass).
func (t *txnTracker) onMarker(b []byte, h *batchHeader) bool {
	t.reach(h.LastOffset())
	if h.NumRecords == 0 {
		return true // already emptied
	}
	typ, _, reason := parseControl(b)
	if reason != "" {
		return false // unknown: keep it
	}
	switch typ {
	case controlAbort:
		s, ok := t.aborted[h.ProducerID]
		delete(t.aborted, h.ProducerID)
		if ok && s.observed {
			if s.a.LastOffset == h.BaseOffset {
				t.kept = append(t.kept, s.a)
			}
			return false
		}
		return true
	case controlCommit:
		had := t.committed[h.ProducerID]
		delete(t.committed, h.ProducerID)
		return !had
	}
	return false
}

// takeKept returns the index entries kept for the group just cleaned and
// starts a new group.
func (t *txnTracker) takeKept() []AbortedTxn {
	k := t.kept
	t.kept = nil
	sort.Slice(k, func(i, j int) bool { return k[i].LastOffset < k[j].LastOffset })
	return k
}

// deleteHorizon returns the batch's delete horizon (ms) if it has one.
func deleteHorizon(h *batchHeader) (int64, bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.FirstTimestamp, true
}

// withDeleteHorizon returns a copy of batch b stamped with the delete
// horizon ms (KIP-534 layout).
func withDeleteHorizon(b []byte, horizon int64) []byte {
	nb := append([]byte(nil), b...)
	h := parseHeader(nb)
	h.Attributes |= attrDeleteHorizon
	h.FirstTimestamp = horizon
	h.Put(nb)
	putCRC(nb)
	return nb
}

// filterMarker decides what to keep of control batch b: b itself, nil
// (remove) or b stamped with a delete horizon.
func filterMarker(b []byte, h *batchHeader, tt *txnTracker, nowMs, retentionMs int64) ([]byte, bool) {
	if !tt.onMarker(b, h) {
		return b, false
	}
	if hz, ok := deleteHorizon(h); ok {
		if hz <= nowMs {
			return nil, true
		}
		tt.noteDue(hz)
		return b, false
	}
	if retentionMs <= 0 {
		return nil, true
	}
	tt.noteDue(nowMs + retentionMs)
	return withDeleteHorizon(b, nowMs+retentionMs), false
}

// pruneAborted replaces the in-memory index entries whose marker lies in
// [from, to) by kept (sorted by LastOffset). Log.mu must be held.
func (ps *producerState) pruneAborted(from, to int64, kept []AbortedTxn) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	i := sort.Search(len(ps.aborted), func(k int) bool { return ps.aborted[k].LastOffset >= from })
	j := sort.Search(len(ps.aborted), func(k int) bool { return ps.aborted[k].LastOffset >= to })
	dropped := (j - i) - len(kept)
	if dropped <= 0 {
		return 0
	}
	out := make([]AbortedTxn, 0, len(ps.aborted)-dropped)
	out = append(out, ps.aborted[:i]...)
	out = append(out, kept...)
	out = append(out, ps.aborted[j:]...)
	ps.aborted = out
	return dropped
}

// neutralEmptyBatch returns a batch without records covering the offsets of
// the removed batch b (b may be its header only) but without its producer,
// transaction and control fields, so a group whose batches were all removed
// keeps its segment (and the log start) without leaving a producer a half
// transaction to replay, or a marker a batch that looks like its data.
func neutralEmptyBatch(b []byte) []byte {
	nb := append([]byte(nil), b[:batchHeaderSize]...)
	h := parseHeader(nb)
	h.Attributes = 0
	h.FirstTimestamp = h.MaxTimestamp
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = -1, -1, -1
	h.NumRecords = 0
	h.Put(nb)
	SealBatch(nb)
	return nb
}
