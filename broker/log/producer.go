package log

import (
	"encoding/binary"
	"errors"
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// Producer state: idempotence and transactions, per partition, atomic with
// Append (as Kafka's ProducerStateManager).
//
// For every producer id that wrote to the partition the log keeps the
// producer epoch, the last ProducerWindow batches' (first sequence, last
// sequence, first offset, last offset), the coordinator epoch of its last
// marker, the first offset of its ongoing transaction (if any), and its last
// offset and timestamp. Append checks each batch against it under the
// append lock, before writing, and applies the changes only once the bytes
// are written, so the state always describes exactly the batches in the
// log (a failed fsync's rollback rebuilds it, see rebuildProducerState).
//
// Rules (Kafka's, for batches with a producer id):
//   - epoch below the producer's current one: ErrInvalidProducerEpoch
//     (data and markers);
//   - same epoch and (first seq, last seq) equal to one of the last
//     ProducerWindow batches: a duplicate. Nothing is appended; the result
//     carries the original offsets and Duplicate = true (the broker answers
//     success, as Kafka does);
//   - same epoch: first seq must be last seq + 1 (wrapping at MaxInt32),
//     else ErrOutOfOrderSequence;
//   - a new epoch must start at sequence 0 (ErrOutOfOrderSequence) unless
//     the producer is unknown to the partition (never wrote, or its state
//     was dropped with the segments holding its batches): then any sequence
//     is accepted (KIP-360, as Kafka since 2.5);
//   - base sequence -1 with a producer id: a batch written by a
//     coordinator (the group coordinator's transactional offset commits);
//     no sequence check, the epoch and transaction rules still apply. The
//     broker refuses such batches from clients.
//   - a transactional batch starts the producer's transaction if none is
//     ongoing; a non-transactional batch while one is ongoing is
//     ErrInvalidTxnState;
//   - a control batch (COMMIT/ABORT marker, base sequence -1) ends the
//     ongoing transaction; an ABORT records (pid, first offset, marker
//     offset) in the aborted-transaction index. A marker with no ongoing
//     transaction is still appended (an idempotent re-send). A marker with
//     a higher epoch makes it the producer's epoch (its sequences restart).
//
// The last stable offset is min(first offset of every ongoing transaction,
// high watermark): read_committed readers read up to it.

// ProducerWindow is the number of recent batches remembered per producer
// for duplicate detection (Kafka's, and the most a client keeps in flight).
const ProducerWindow = 5

// Errors of the producer-state checks (errors.Is). Nothing was appended.
var (
	// ErrOutOfOrderSequence: a sequence gap. Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER.
	ErrOutOfOrderSequence = errors.New("log: out of order sequence number")
	// ErrInvalidProducerEpoch: the batch's (or marker's) producer epoch is
	// below the producer's current one (a fenced zombie).
	// Kafka: INVALID_PRODUCER_EPOCH.
	ErrInvalidProducerEpoch = errors.New("log: invalid producer epoch")
	// ErrInvalidTxnState: a non-transactional batch from a producer with an
	// ongoing transaction. Kafka: INVALID_TXN_STATE.
	ErrInvalidTxnState = errors.New("log: invalid transaction state")
)

// AbortedTxn is one entry of the aborted-transaction index: producer
// ProducerID's transaction whose first batch is at FirstOffset was aborted
// by the marker at LastOffset.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// ProducerInfo describes one producer's state (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	ProducerEpoch    int16
	LastSequence     int32 // -1 if none remembered
	LastTimestamp    int64 // ms, max timestamp of its last batch
	CoordinatorEpoch int32 // of its last marker, -1 if none
	TxnStartOffset   int64 // first offset of its ongoing transaction, -1 if none
}

// seqBatch is a remembered batch of a producer.
type seqBatch struct {
	firstSeq, lastSeq int32
	firstOff, lastOff int64
}

// producerEntry is the state of one producer id. Values are copied during
// checks and stored back only after the append succeeded.
type producerEntry struct {
	epoch      int16
	n          int // used entries of batches, oldest first
	batches    [ProducerWindow]seqBatch
	coordEpoch int32
	txnFirst   int64 // first offset of the ongoing transaction, -1 if none
	lastTs     int64
	lastOff    int64 // last offset of its last batch (data or marker)
}

func newProducerEntry() producerEntry {
	return producerEntry{epoch: -1, coordEpoch: -1, txnFirst: -1, lastTs: -1, lastOff: -1}
}

func (e *producerEntry) lastSeq() int32 {
	if e.n == 0 {
		return -1
	}
	return e.batches[e.n-1].lastSeq
}

func (e *producerEntry) addBatch(b seqBatch) {
	if e.n == ProducerWindow {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = b
	e.n++
}

// setEpoch makes epoch the producer's epoch; a change forgets the
// remembered sequences.
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch = epoch
		e.n = 0
	}
}

// producerState is a partition's producer state.
//
// Concurrency: writers hold Log.mu and mu; readers hold mu (read).
// firstUnstable is also readable without a lock.
type producerState struct {
	mu        sync.RWMutex
	producers map[int64]*producerEntry
	// aborted is the aborted-transaction index of the whole log, sorted by
	// LastOffset (markers are appended in offset order). It is persisted per
	// segment in .txnindex files (closed segments) and in the producer
	// snapshot (the active segment's entries). The cleaner removes the
	// entries whose data it removed (pruneAborted, at a swap).
	aborted []AbortedTxn
	// maxSpan bounds LastOffset-FirstOffset over aborted, so a range query
	// knows where to stop.
	maxSpan int64
	// firstUnstable is the smallest first offset of an ongoing
	// transaction, math.MaxInt64 if none.
	firstUnstable atomic.Int64
	// broken is set when a rebuild after a rollback failed: appends fail
	// until a retry succeeds. Guarded by Log.mu.
	broken error
}

func newProducerState() *producerState {
	ps := &producerState{producers: map[int64]*producerEntry{}}
	ps.firstUnstable.Store(math.MaxInt64)
	return ps
}

// recomputeUnstable sets firstUnstable. mu must be held for writing.
func (ps *producerState) recomputeUnstable() {
	v := int64(math.MaxInt64)
	for _, e := range ps.producers {
		if e.txnFirst >= 0 && e.txnFirst < v {
			v = e.txnFirst
		}
	}
	ps.firstUnstable.Store(v)
}

// addAborted appends to the aborted index (entries arrive in LastOffset
// order). mu must be held for writing.
func (ps *producerState) addAborted(a AbortedTxn) {
	if n := len(ps.aborted); n > 0 && ps.aborted[n-1].LastOffset > a.LastOffset {
		i := sort.Search(n, func(i int) bool { return ps.aborted[i].LastOffset > a.LastOffset })
		ps.aborted = append(ps.aborted, AbortedTxn{})
		copy(ps.aborted[i+1:], ps.aborted[i:])
		ps.aborted[i] = a
	} else {
		ps.aborted = append(ps.aborted, a)
	}
	if s := a.LastOffset - a.FirstOffset; s > ps.maxSpan {
		ps.maxSpan = s
	}
}

// psChange is the pending state of one producer during an append check.
type psChange struct {
	pid int64
	e   producerEntry
}

// psUpdate is the outcome of checking an append: the producers' new states
// and the aborted transactions the append's markers complete.
type psUpdate struct {
	changes []psChange
	aborted []AbortedTxn
	txn     bool // the ongoing-transaction set changes
}

func (u *psUpdate) entry(ps *producerState, pid int64) *producerEntry {
	for i := range u.changes {
		if u.changes[i].pid == pid {
			return &u.changes[i].e
		}
	}
	e := newProducerEntry()
	if cur, ok := ps.producers[pid]; ok {
		e = *cur
	}
	u.changes = append(u.changes, psChange{pid: pid, e: e})
	return &u.changes[len(u.changes)-1].e
}

// duplicate is a batch found already in the log.
type duplicate struct{ firstOff, lastOff int64 }

// incSeq is seq + delta with Kafka's wrap at MaxInt32.
func incSeq(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

func inSequence(last, next int32) bool {
	return next == last+1 || (next == 0 && last == math.MaxInt32)
}

// check checks the batches vs, which will get offsets from next on, against
// the producer state. It returns the update to apply once the append
// succeeded, or a duplicate (nothing must be appended), or an error.
// Log.mu must be held (so the state does not change meanwhile).
func (ps *producerState) check(vs []validated, next int64) (*psUpdate, *duplicate, error) {
	var u *psUpdate
	base := next
	for i := range vs {
		h := &vs[i].hdr
		first, last := base, base+int64(h.LastOffsetDelta)
		base = last + 1
		if h.ProducerID < 0 {
			continue
		}
		if u == nil {
			u = &psUpdate{}
		}
		e := u.entry(ps, h.ProducerID)
		if h.ProducerEpoch < e.epoch {
			return nil, nil, ErrInvalidProducerEpoch
		}
		if h.Attributes&attrControl != 0 {
			e.setEpoch(h.ProducerEpoch)
			e.coordEpoch = max(e.coordEpoch, vs[i].coordEpoch)
			if e.txnFirst >= 0 {
				if vs[i].controlType == controlAbort {
					u.aborted = append(u.aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: e.txnFirst, LastOffset: first})
				}
				e.txnFirst = -1
				u.txn = true
			}
			e.lastOff, e.lastTs = last, h.MaxTimestamp
			continue
		}
		if h.BaseSequence >= 0 {
			lastSeq := incSeq(h.BaseSequence, h.LastOffsetDelta)
			if h.ProducerEpoch == e.epoch {
				for j := 0; j < e.n; j++ {
					if b := e.batches[j]; b.firstSeq == h.BaseSequence && b.lastSeq == lastSeq {
						return nil, &duplicate{firstOff: b.firstOff, lastOff: b.lastOff}, nil
					}
				}
				if !inSequence(e.lastSeq(), h.BaseSequence) {
					return nil, nil, ErrOutOfOrderSequence
				}
			} else if h.BaseSequence != 0 && e.epoch >= 0 {
				return nil, nil, ErrOutOfOrderSequence
			}
			e.setEpoch(h.ProducerEpoch)
			e.addBatch(seqBatch{firstSeq: h.BaseSequence, lastSeq: lastSeq, firstOff: first, lastOff: last})
		} else {
			e.setEpoch(h.ProducerEpoch)
		}
		if h.Attributes&attrTransactional != 0 {
			if e.txnFirst < 0 {
				e.txnFirst = first
				u.txn = true
			}
		} else if e.txnFirst >= 0 {
			return nil, nil, ErrInvalidTxnState
		}
		e.lastOff, e.lastTs = last, h.MaxTimestamp
	}
	return u, nil, nil
}

// apply stores a checked update. Log.mu must be held. The aborted entries
// are published before the unstable offset moves, so a reader that sees
// the new last stable offset also sees them.
func (ps *producerState) apply(u *psUpdate) {
	if u == nil {
		return
	}
	ps.mu.Lock()
	for i := range u.changes {
		c := &u.changes[i]
		e := c.e
		ps.producers[c.pid] = &e
	}
	for _, a := range u.aborted {
		ps.addAborted(a)
	}
	if u.txn {
		ps.recomputeUnstable()
	}
	ps.mu.Unlock()
}

// LastStableOffset is the offset below which every transaction is decided:
// min(first offset of any ongoing transaction, high watermark).
// read_committed readers read up to it.
func (l *Log) LastStableOffset() int64 {
	return min(l.ps.firstUnstable.Load(), l.hw.Load())
}

// AbortedTransactions returns the aborted transactions whose records may lie
// in [from, to): those with LastOffset >= from and FirstOffset < to, in
// marker order. A read_committed Fetch returns them with the data read from
// from up to to. On a compacted log the cleaner drops the entries whose data
// it removed (clean_txn.go), so they are not carried forever.
func (l *Log) AbortedTransactions(from, to int64) []AbortedTxn {
	ps := l.ps
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	a := ps.aborted
	i := sort.Search(len(a), func(i int) bool { return a[i].LastOffset >= from })
	var out []AbortedTxn
	for ; i < len(a); i++ {
		if a[i].LastOffset-ps.maxSpan >= to {
			break // every later entry starts at or after to
		}
		if a[i].FirstOffset < to {
			out = append(out, a[i])
		}
	}
	return out
}

// Producers returns the state of every producer the partition knows, by
// producer id (DescribeProducers).
func (l *Log) Producers() []ProducerInfo {
	ps := l.ps
	ps.mu.RLock()
	out := make([]ProducerInfo, 0, len(ps.producers))
	for pid, e := range ps.producers {
		out = append(out, ProducerInfo{
			ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: e.lastSeq(),
			LastTimestamp: e.lastTs, CoordinatorEpoch: e.coordEpoch, TxnStartOffset: e.txnFirst,
		})
	}
	ps.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// dropProducersBelow forgets producers whose last batch lies below
// logStart and that have no ongoing transaction (their batches are gone, so
// a retry could not be a duplicate of anything readable; as Kafka, their next
// batch is accepted with any sequence), and the aborted-index entries whose
// marker is below logStart. Log.mu must be held.
func (ps *producerState) dropProducersBelow(logStart int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for pid, e := range ps.producers {
		if e.lastOff < logStart && e.txnFirst < 0 {
			delete(ps.producers, pid)
		}
	}
	i := sort.Search(len(ps.aborted), func(i int) bool { return ps.aborted[i].LastOffset >= logStart })
	if i > 0 {
		ps.aborted = append([]AbortedTxn(nil), ps.aborted[i:]...)
	}
}

// ProducerIDExpirationMs is Kafka's producer.id.expiration.ms default (1
// day): a producer with no ongoing transaction whose last batch's timestamp
// is older than that is forgotten by each retention pass, so the state stays
// bounded by the producers active in the last day. Its next batch is then
// accepted at any sequence (KIP-360).
const ProducerIDExpirationMs = 24 * 60 * 60 * 1000

// expire forgets idle producers (see ProducerIDExpirationMs). Log.mu must
// be held.
func (ps *producerState) expire(nowMs, afterMs int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for pid, e := range ps.producers {
		if e.txnFirst < 0 && e.lastTs >= 0 && nowMs-e.lastTs > afterMs {
			delete(ps.producers, pid)
		}
	}
}

// Control record types (the key's type field).
const (
	controlAbort  = 0
	controlCommit = 1
)

// parseControl decodes the single record of an uncompressed control batch
// b: key = version int16 (0) + type int16 (0 ABORT, 1 COMMIT), value =
// version int16 + coordinator epoch int32. It returns a reason on failure.
func parseControl(b []byte) (typ int16, coordEpoch int32, reason string) {
	h := parseHeader(b)
	if h.Compression() != codecNone {
		return 0, 0, "compressed control batch"
	}
	if h.Attributes&attrTransactional == 0 {
		return 0, 0, "control batch not transactional"
	}
	if h.NumRecords != 1 || h.ProducerID < 0 {
		return 0, 0, "control batch needs one record and a producer id"
	}
	recs := b[batchHeaderSize:]
	length, m := varint(recs)
	if m <= 0 || length < 1 || length > int64(len(recs)-m) {
		return 0, 0, "control record length"
	}
	rec := recs[m : m+int(length)]
	i := 1        // attributes
	for range 2 { // timestamp delta, offset delta
		_, n := varint(rec[i:])
		if n <= 0 {
			return 0, 0, "control record varint"
		}
		i += n
	}
	kl, n := varint(rec[i:])
	if n <= 0 || kl < 4 || kl > int64(len(rec)-i-n) {
		return 0, 0, "control record key"
	}
	key := rec[i+n : i+n+int(kl)]
	i += n + int(kl)
	if binary.BigEndian.Uint16(key) != 0 {
		return 0, 0, "control record key version"
	}
	typ = int16(binary.BigEndian.Uint16(key[2:]))
	if typ != controlAbort && typ != controlCommit {
		return 0, 0, "unknown control record type"
	}
	coordEpoch = -1
	if vl, n := varint(rec[i:]); n > 0 && vl >= 6 && vl <= int64(len(rec)-i-n) {
		v := rec[i+n:]
		coordEpoch = int32(binary.BigEndian.Uint32(v[2:]))
	}
	return typ, coordEpoch, ""
}
