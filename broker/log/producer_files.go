package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/weirhq/weir/internal/crc32c"
	"github.com/weirhq/weir/vfs"
)

// Producer-state files. Layouts and constants are part of the on-disk
// format (docs/format/log.md). All integers are
// big-endian; each file ends with a CRC-32C of everything before it and is
// written atomically (temp, fsync, rename, fsync dir).
//
// <offset, 20 digits>.snapshot: the producer state at <offset> (the log
// end when written: at a segment roll, at a clean Close, after recovery).
//
//	+--------+---------+----------+--------+-----------+-------+-------------+----------+------------+--------+
//	| "WPSN" | version | reserved | offset | indexedTo | nprod | producers.. | naborted | aborted .. | crc32c |
//	|        | 1 B = 1 | 3 B      | int64  | int64     | int32 |             | int32    |            | uint32 |
//	+--------+---------+----------+--------+-----------+-------+-------------+----------+------------+--------+
//	producer: pid int64, epoch int16, coordinator epoch int32, txn first offset int64 (-1: none),
//	          last timestamp int64, last offset int64, n uint8 (<= 5), n x (first seq int32,
//	          last seq int32, first offset int64, last offset int64)
//	aborted:  pid int64, first offset int64, last offset int64 (the marker)
//
// indexedTo: aborted transactions whose marker is below it are in the
// .txnindex files of their segments; the snapshot holds those from
// indexedTo up to offset.
//
// <base, 20 digits>.txnindex: the aborted transactions whose marker lies in
// the closed segment <base> (written when it is closed, only if any).
//
//	+--------+---------+----------+-------+--------+------------+--------+
//	| "WTXI" | version | reserved | base  | count  | entries .. | crc32c |
//	|        | 1 B = 1 | 3 B      | int64 | int32  | 24 B each  | uint32 |
//	+--------+---------+----------+-------+--------+------------+--------+
const (
	snapshotSuffix  = ".snapshot"
	txnIndexSuffix  = ".txnindex"
	snapshotMagic   = "WPSN"
	txnIndexMagic   = "WTXI"
	producerVersion = 1
	snapshotsKept   = 2
	abortedSize     = 24
)

// psSnapshot is a decoded .snapshot file.
type psSnapshot struct {
	offset    int64
	indexedTo int64
	producers map[int64]*producerEntry
	aborted   []AbortedTxn
}

func encodeSnapshot(s *psSnapshot) []byte {
	be := binary.BigEndian
	b := make([]byte, 0, 32+len(s.producers)*64+len(s.aborted)*abortedSize)
	b = append(b, snapshotMagic...)
	b = append(b, producerVersion, 0, 0, 0)
	b = be.AppendUint64(b, uint64(s.offset))
	b = be.AppendUint64(b, uint64(s.indexedTo))
	b = be.AppendUint32(b, uint32(len(s.producers)))
	pids := make([]int64, 0, len(s.producers))
	for pid := range s.producers {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		e := s.producers[pid]
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint32(b, uint32(e.coordEpoch))
		b = be.AppendUint64(b, uint64(e.txnFirst))
		b = be.AppendUint64(b, uint64(e.lastTs))
		b = be.AppendUint64(b, uint64(e.lastOff))
		b = append(b, byte(e.n))
		for _, sb := range e.batches[:e.n] {
			b = be.AppendUint32(b, uint32(sb.firstSeq))
			b = be.AppendUint32(b, uint32(sb.lastSeq))
			b = be.AppendUint64(b, uint64(sb.firstOff))
			b = be.AppendUint64(b, uint64(sb.lastOff))
		}
	}
	b = appendAborted(b, s.aborted)
	return be.AppendUint32(b, crc32c.Checksum(b))
}

func appendAborted(b []byte, as []AbortedTxn) []byte {
	be := binary.BigEndian
	b = be.AppendUint32(b, uint32(len(as)))
	for _, a := range as {
		b = be.AppendUint64(b, uint64(a.ProducerID))
		b = be.AppendUint64(b, uint64(a.FirstOffset))
		b = be.AppendUint64(b, uint64(a.LastOffset))
	}
	return b
}

// decoder reads big-endian fields, remembering the first shortfall.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || len(d.b) < n {
		d.bad = true
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
func (d *decoder) u8() uint8    { return d.take(1)[0] }
func (d *decoder) i16() int16   { return int16(binary.BigEndian.Uint16(d.take(2))) }
func (d *decoder) i32() int32   { return int32(binary.BigEndian.Uint32(d.take(4))) }
func (d *decoder) i64() int64   { return int64(binary.BigEndian.Uint64(d.take(8))) }
func (d *decoder) left() int    { return len(d.b) }
func (d *decoder) failed() bool { return d.bad }

// checkFile checks magic, version and CRC and returns the body after the
// 8-byte header (without the CRC).
func checkFile(b []byte, magic string) (*decoder, error) {
	if len(b) < 12 {
		return nil, fmt.Errorf("size %d too small", len(b))
	}
	if string(b[:4]) != magic {
		return nil, fmt.Errorf("bad magic %q", b[:4])
	}
	if b[4] != producerVersion {
		return nil, fmt.Errorf("unsupported version %d", b[4])
	}
	n := len(b) - 4
	if c := crc32c.Checksum(b[:n]); c != binary.BigEndian.Uint32(b[n:]) {
		return nil, errors.New("crc mismatch")
	}
	return &decoder{b: b[8:n]}, nil
}

func decodeAborted(d *decoder) ([]AbortedTxn, error) {
	n := d.i32()
	if n < 0 || int64(n)*abortedSize > int64(d.left()) {
		return nil, fmt.Errorf("aborted count %d invalid", n)
	}
	out := make([]AbortedTxn, n)
	prev := int64(-1)
	for i := range out {
		a := AbortedTxn{ProducerID: d.i64(), FirstOffset: d.i64(), LastOffset: d.i64()}
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.LastOffset < a.FirstOffset || a.LastOffset < prev {
			return nil, errors.New("aborted transaction out of range")
		}
		prev = a.LastOffset
		out[i] = a
	}
	return out, nil
}

func decodeSnapshot(b []byte) (*psSnapshot, error) {
	d, err := checkFile(b, snapshotMagic)
	if err != nil {
		return nil, err
	}
	s := &psSnapshot{offset: d.i64(), indexedTo: d.i64(), producers: map[int64]*producerEntry{}}
	if s.offset < 0 || s.indexedTo < 0 || s.indexedTo > s.offset {
		return nil, errors.New("offsets out of range")
	}
	np := d.i32()
	if np < 0 || int64(np)*39 > int64(d.left()) {
		return nil, fmt.Errorf("producer count %d invalid", np)
	}
	for range np {
		pid := d.i64()
		e := producerEntry{epoch: d.i16(), coordEpoch: d.i32(), txnFirst: d.i64(), lastTs: d.i64(), lastOff: d.i64()}
		e.n = int(d.u8())
		if d.failed() || pid < 0 || e.n > ProducerWindow || e.txnFirst < -1 || e.txnFirst > s.offset || e.lastOff >= s.offset {
			return nil, fmt.Errorf("producer %d out of range", pid)
		}
		for j := range e.n {
			e.batches[j] = seqBatch{firstSeq: d.i32(), lastSeq: d.i32(), firstOff: d.i64(), lastOff: d.i64()}
		}
		if _, dup := s.producers[pid]; dup {
			return nil, fmt.Errorf("producer %d twice", pid)
		}
		s.producers[pid] = &e
	}
	if s.aborted, err = decodeAborted(d); err != nil {
		return nil, err
	}
	if d.failed() || d.left() != 0 {
		return nil, errors.New("length does not match contents")
	}
	return s, nil
}

func encodeTxnIndex(base int64, as []AbortedTxn) []byte {
	b := make([]byte, 0, 24+len(as)*abortedSize)
	b = append(b, txnIndexMagic...)
	b = append(b, producerVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(base))
	b = appendAborted(b, as)
	return binary.BigEndian.AppendUint32(b, crc32c.Checksum(b))
}

func decodeTxnIndex(b []byte, base int64) ([]AbortedTxn, error) {
	d, err := checkFile(b, txnIndexMagic)
	if err != nil {
		return nil, err
	}
	if got := d.i64(); got != base {
		return nil, fmt.Errorf("base offset %d, file named %d", got, base)
	}
	as, err := decodeAborted(d)
	if err != nil {
		return nil, err
	}
	if d.failed() || d.left() != 0 {
		return nil, errors.New("length does not match contents")
	}
	for _, a := range as {
		if a.LastOffset < base {
			return nil, errors.New("entry below the segment base")
		}
	}
	return as, nil
}

// snapshotOffsets lists the snapshot files of the directory, newest first.
func (l *Log) snapshotOffsets() ([]int64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, n := range names {
		if o, ok := parseSegmentName(n, snapshotSuffix); ok {
			offs = append(offs, o)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] > offs[j] })
	return offs, nil
}

// writeSnapshotLocked writes the producer state at the log end and removes
// all but the newest snapshotsKept snapshots. The log end need not be
// durable: after a crash a snapshot beyond the recovered log end is
// ignored (and removed). Log.mu must be held.
func (l *Log) writeSnapshotLocked() error {
	off, b := l.encodeSnapshotLocked()
	return l.writeSnapshotFile(off, b)
}

// encodeSnapshotLocked encodes the producer state at the log end; indexedTo
// is the base of the active segment. Log.mu must be held.
func (l *Log) encodeSnapshotLocked() (int64, []byte) {
	ps := l.ps
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	s := &psSnapshot{offset: l.next, indexedTo: l.active.base, producers: ps.producers}
	i := sort.Search(len(ps.aborted), func(i int) bool { return ps.aborted[i].LastOffset >= s.indexedTo })
	s.aborted = ps.aborted[i:]
	return s.offset, encodeSnapshot(s)
}

// writeSnapshotFile writes an encoded snapshot and prunes old ones.
func (l *Log) writeSnapshotFile(off int64, b []byte) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, segmentName(off, snapshotSuffix)), b); err != nil {
		return storageErr("write producer snapshot", err)
	}
	offs, err := l.snapshotOffsets()
	if err != nil {
		return storageErr("list snapshots", err)
	}
	for i, o := range offs {
		if i < snapshotsKept {
			continue
		}
		if err := l.fs.Remove(filepath.Join(l.dir, segmentName(o, snapshotSuffix))); err != nil && !isNotExist(err) {
			l.logger.Warn("remove old producer snapshot", "offset", o, "err", err)
		}
	}
	return nil
}

// writeTxnIndex writes the .txnindex of the closed segment seg, whose
// offsets end before end, if it has aborted transactions.
func (l *Log) writeTxnIndex(seg *segment, end int64) error {
	ps := l.ps
	ps.mu.RLock()
	i := sort.Search(len(ps.aborted), func(i int) bool { return ps.aborted[i].LastOffset >= seg.base })
	j := sort.Search(len(ps.aborted), func(i int) bool { return ps.aborted[i].LastOffset >= end })
	as := append([]AbortedTxn(nil), ps.aborted[i:j]...)
	ps.mu.RUnlock()
	if len(as) == 0 {
		return nil
	}
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, segmentName(seg.base, txnIndexSuffix)), encodeTxnIndex(seg.base, as)); err != nil {
		return storageErr("write txn index of "+seg.name(), err)
	}
	return nil
}

// recoveredBatch is a batch with a producer id seen by the recovery scan.
type recoveredBatch struct {
	h      batchHeader
	ctype  int16
	cepoch int32
}

// collectProducerBatch is the recovery scan's callback: it keeps the
// batches with a producer id, so replaying the scanned tail reads nothing
// more.
func (l *Log) collectProducerBatch(h *batchHeader, b []byte) {
	if h.ProducerID < 0 {
		return
	}
	rb := recoveredBatch{h: *h, ctype: -1, cepoch: -1}
	if h.Attributes&attrControl != 0 {
		var reason string
		if rb.ctype, rb.cepoch, reason = parseControl(b); reason != "" {
			l.logger.Warn("ignoring malformed control batch", "offset", h.BaseOffset, "reason", reason)
			rb.ctype = -1
		}
	}
	l.recovered = append(l.recovered, rb)
}

// recoverProducerState builds the producer state at open: from the newest
// usable snapshot at or below the log end plus the .txnindex files below
// its indexedTo, then by replaying the batches after the snapshot (all of
// them without a snapshot): those before the recovery scan's start are
// read, those of the scanned tail were collected by the scan. If anything
// was replayed, the re-derived .txnindex files and a new snapshot are
// written.
func (l *Log) recoverProducerState() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	recovered, scanFrom := l.recovered, l.scanFrom
	l.recovered = nil
	if scanFrom < 0 {
		scanFrom = l.next
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return storageErr("list log dir", err)
	}
	have := map[int64]bool{}
	for _, s := range l.segs {
		have[s.base] = true
	}
	for _, n := range names {
		if b, ok := parseSegmentName(n, txnIndexSuffix); ok && !have[b] {
			_ = l.fs.Remove(filepath.Join(l.dir, n)) // orphan of a deleted segment
		}
	}
	from, indexedTo, err := l.loadSnapshotLocked(true)
	if err != nil {
		return err
	}
	if from < l.next {
		if from < scanFrom {
			if err := l.replayLocked(from, scanFrom); err != nil {
				return err
			}
		}
		l.ps.mu.Lock()
		for i := range recovered {
			rb := &recovered[i]
			if rb.h.LastOffset() >= from && rb.h.BaseOffset < l.next {
				l.ps.replay(&rb.h, rb.ctype, rb.cepoch)
			}
		}
		l.ps.recomputeUnstable()
		l.ps.mu.Unlock()
		for i, seg := range l.segs[:len(l.segs)-1] {
			if seg.base >= indexedTo {
				if err := l.writeTxnIndex(seg, l.segs[i+1].base); err != nil {
					return err
				}
			}
		}
		if err := l.writeSnapshotLocked(); err != nil {
			return err
		}
		l.logger.Info("rebuilt producer state", "from_offset", from, "log_end", l.next, "producers", len(l.ps.producers))
	}
	l.ps.dropProducersBelow(l.logStart.Load())
	return nil
}

// loadSnapshotLocked resets the producer state to the newest usable
// snapshot at or below the log end (or to empty) and returns where replay
// must start and the snapshot's indexedTo. With loadIndex, the aborted
// index is read from the .txnindex files below indexedTo; without (after a
// rollback), the in-memory entries below the snapshot are kept. Snapshots
// beyond the log end (stale after a truncation) are removed. Log.mu must be
// held.
func (l *Log) loadSnapshotLocked(loadIndex bool) (from, indexedTo int64, err error) {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return 0, 0, storageErr("list snapshots", err)
	}
	first := l.segs[0].base
	var snap *psSnapshot
	for _, o := range offs {
		name := segmentName(o, snapshotSuffix)
		if o > l.next {
			l.logger.Warn("removing producer snapshot beyond the log end", "snapshot", name, "log_end", l.next)
			_ = l.fs.Remove(filepath.Join(l.dir, name))
			continue
		}
		b, rerr := vfs.ReadFile(l.fs, filepath.Join(l.dir, name))
		if rerr != nil {
			return 0, 0, storageErr("read "+name, rerr)
		}
		s, derr := decodeSnapshot(b)
		if derr == nil && s.offset != o {
			derr = fmt.Errorf("offset %d in a file named %d", s.offset, o)
		}
		if derr != nil {
			l.logger.Error("ignoring damaged producer snapshot", "err", &CorruptionError{Segment: name, Reason: derr.Error()})
			continue
		}
		snap = s
		break
	}
	ps := l.ps
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.maxSpan = 0
	if snap == nil {
		ps.producers = map[int64]*producerEntry{}
		ps.aborted = nil
		ps.firstUnstable.Store(1<<63 - 1)
		return first, first, nil
	}
	ps.producers = snap.producers
	var aborted []AbortedTxn
	if loadIndex {
		for _, seg := range l.segs {
			if seg.base >= snap.indexedTo {
				break
			}
			name := segmentName(seg.base, txnIndexSuffix)
			b, rerr := vfs.ReadFile(l.fs, filepath.Join(l.dir, name))
			if isNotExist(rerr) {
				continue
			}
			if rerr != nil {
				return 0, 0, storageErr("read "+name, rerr)
			}
			as, derr := decodeTxnIndex(b, seg.base)
			if derr != nil {
				// Derived data, but only rebuildable by a full replay.
				l.logger.Error("damaged txn index: rebuilding producer state from the whole log",
					"err", &CorruptionError{Segment: name, Reason: derr.Error()})
				ps.producers = map[int64]*producerEntry{}
				ps.aborted = nil
				ps.firstUnstable.Store(1<<63 - 1)
				return first, first, nil
			}
			aborted = append(aborted, as...)
		}
		aborted = append(aborted, snap.aborted...)
	} else {
		i := sort.Search(len(ps.aborted), func(i int) bool { return ps.aborted[i].LastOffset >= snap.offset })
		aborted = append(aborted, ps.aborted[:i]...)
	}
	ps.aborted = nil
	for _, a := range aborted {
		ps.addAborted(a)
	}
	ps.recomputeUnstable()
	return max(snap.offset, first), snap.indexedTo, nil
}

// replayLocked applies the batches holding offsets in [from, to) to the
// producer state, without checks (the log holds what was accepted), reading
// them from the segments. Log.mu must be held.
func (l *Log) replayLocked(from, to int64) error {
	ps := l.ps
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i, seg := range l.segs {
		size := seg.size.Load()
		if size == 0 || (i+1 < len(l.segs) && l.segs[i+1].base <= from) {
			continue
		}
		r := newChunkReader(seg.f, 1<<20, size)
		if seg.base >= to {
			break
		}
		for pos := int64(0); pos < size; {
			if size-pos < batchHeaderSize {
				return fmt.Errorf("%w: replay %s at %d: short batch", ErrStorage, seg.name(), pos)
			}
			hb, err := r.get(pos, batchHeaderSize)
			if err != nil {
				return storageErr("replay "+seg.name(), err)
			}
			h := parseHeader(hb)
			if reason := h.checkFraming(size - pos); reason != "" {
				return &CorruptionError{Segment: seg.name(), Offset: pos, Reason: reason}
			}
			pos += h.Size()
			if h.BaseOffset >= to {
				break
			}
			if h.LastOffset() < from || h.ProducerID < 0 {
				continue
			}
			ctype, cepoch := int16(-1), int32(-1)
			if h.Attributes&attrControl != 0 {
				b, err := r.get(pos-h.Size(), int(h.Size()))
				if err != nil {
					return storageErr("replay "+seg.name(), err)
				}
				var reason string
				if ctype, cepoch, reason = parseControl(b); reason != "" {
					return &CorruptionError{Segment: seg.name(), Offset: pos - h.Size(), Reason: reason}
				}
			}
			ps.replay(&h, ctype, cepoch)
		}
	}
	ps.recomputeUnstable()
	return nil
}

// replay applies one stored batch. ps.mu must be held for writing.
func (ps *producerState) replay(h *batchHeader, ctype int16, cepoch int32) {
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		ne := newProducerEntry()
		e = &ne
		ps.producers[h.ProducerID] = e
	}
	if h.ProducerEpoch > e.epoch {
		e.setEpoch(h.ProducerEpoch)
	}
	e.lastOff, e.lastTs = h.LastOffset(), h.MaxTimestamp
	if h.Attributes&attrControl != 0 {
		e.coordEpoch = max(e.coordEpoch, cepoch)
		if e.txnFirst >= 0 {
			if ctype == controlAbort {
				ps.addAborted(AbortedTxn{ProducerID: h.ProducerID, FirstOffset: e.txnFirst, LastOffset: h.BaseOffset})
			}
			e.txnFirst = -1
		}
		return
	}
	if h.BaseSequence >= 0 {
		e.addBatch(seqBatch{firstSeq: h.BaseSequence, lastSeq: incSeq(h.BaseSequence, h.LastOffsetDelta),
			firstOff: h.BaseOffset, lastOff: h.LastOffset()})
	}
	if h.Attributes&attrTransactional != 0 && e.txnFirst < 0 {
		e.txnFirst = h.BaseOffset
	}
}

// rebuildProducerStateLocked re-derives the producer state after a
// rollback removed appended batches: from the newest snapshot at or below
// the new log end, replaying the rest. On failure appends are refused
// (ErrStorage) until a retry succeeds. Log.mu must be held.
func (l *Log) rebuildProducerStateLocked() error {
	from, _, err := l.loadSnapshotLocked(false)
	if err == nil {
		err = l.replayLocked(from, l.next)
	}
	if err != nil {
		l.ps.broken = err
		return storageErr("rebuild producer state", err)
	}
	l.ps.broken = nil
	return nil
}
