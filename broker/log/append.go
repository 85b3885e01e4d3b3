package log

import (
	"fmt"
	"math"

	"github.com/weirhq/weir/vfs"
)

// Append validates every RecordBatch v2 in batches (one or more
// concatenated, as in a Produce request), assigns offsets and writes them.
// Nothing is appended if any batch is invalid (ErrCorruptBatch) or too large
// (ErrMessageTooLarge).
//
// Append rewrites fields of batches in place (base offset, partition leader
// epoch = 0, maxTimestamp and CRC when the timestamp type requires), so the
// bytes stored are exactly the bytes a consumer reads. The caller must not
// use batches concurrently.
//
// Under SyncAlways, a durable Append returns only once an fsync covers its
// bytes (group commit: concurrent appenders share one fsync); a non-durable
// one returns after the write and is synced promptly in the background; in
// both cases readers see the data once it is synced. Under SyncInterval the
// data is visible at once and durable is ignored. A non-durable Append
// followed by WaitDurable is a durable Append split in two: the caller can
// append more (and let one fsync cover it all) before it waits.
//
// On an I/O error (ErrStorage) the log is rolled back to its last good
// state and stays readable; later appends succeed once the disk recovers.
func (l *Log) Append(batches []byte, durable bool) (AppendResult, error) {
	if l.closed.Load() {
		return AppendResult{}, ErrClosed
	}
	cfg := l.config()
	vs, logAppendTime, err := l.prepareAppend(batches, cfg)
	if err != nil {
		return AppendResult{}, err
	}
	l.mu.Lock()
	res, err := l.appendLocked(batches, vs, cfg, logAppendTime)
	l.mu.Unlock()
	if err != nil {
		return AppendResult{}, err
	}
	// What is left is waiting for durability, outside the append lock
	// (group commit): res.durableEnd/durableEpoch were taken under it, so a
	// rollback after the unlock is seen by waitSynced.
	switch {
	case l.policy == SyncInterval:
	case res.Duplicate:
		if durable {
			err = l.waitSynced(res.durableEnd, res.durableEpoch)
		}
	case !durable:
		l.kickSync()
	default:
		err = l.waitSynced(res.durableEnd, res.durableEpoch)
	}
	if err != nil {
		return AppendResult{}, err
	}
	return res, nil
}

// prepareAppend validates the batches (framing, CRC, records; keys on a
// compacted topic; timestamp bounds under CreateTime) and applies Kafka's
// timestamp rules to them, rewriting a batch's max timestamp (and CRC) where
// needed. It returns the LogAppendTime stamped on every batch (-1 under
// CreateTime). It runs before the append lock: it is CPU work on the
// caller's bytes only.
func (l *Log) prepareAppend(batches []byte, cfg *Config) (vs []validated, logAppendTime int64, err error) {
	vs, err = splitAndValidate(batches, cfg, &l.codecs)
	if err != nil {
		return nil, 0, err
	}
	if cfg.Compact {
		// Kafka refuses keyless records on a compacted topic.
		if err := checkKeys(batches, vs, &l.codecs); err != nil {
			return nil, 0, err
		}
	}
	if cfg.TimestampType == CreateTime {
		if err := checkTimestampBounds(batches, vs, cfg, l.now().UnixMilli(), &l.codecs); err != nil {
			return nil, 0, err
		}
	}
	pos := 0
	logAppendTime = -1
	if cfg.TimestampType == LogAppendTime {
		logAppendTime = l.now().UnixMilli()
	}
	for i := range vs {
		b := batches[pos : pos+int(vs[i].hdr.Size())]
		pos += len(b)
		h := &vs[i].hdr
		lat := h.Attributes&attrLogAppendTime != 0
		switch {
		case cfg.TimestampType == LogAppendTime:
			setMaxTimestamp(b, logAppendTime, true)
			h.MaxTimestamp = logAppendTime
			h.Attributes |= attrLogAppendTime
		case lat || vs[i].recordsMaxTimestamp != h.MaxTimestamp:
			setMaxTimestamp(b, vs[i].recordsMaxTimestamp, false)
			h.MaxTimestamp = vs[i].recordsMaxTimestamp
			h.Attributes &^= attrLogAppendTime
		}
	}
	return vs, logAppendTime, nil
}

// appendLocked writes the prepared batches at the log end: producer-state
// checks (a duplicate is answered with the original offsets, see
// duplicateLocked), a roll if due, offsets assigned, the write, the index
// entries, and the written point published. A failed write is rolled back.
// Durability is the caller's (Append) to wait for. mu must be held.
func (l *Log) appendLocked(batches []byte, vs []validated, cfg *Config, logAppendTime int64) (AppendResult, error) {
	if l.shut {
		return AppendResult{}, ErrClosed
	}
	if err := l.fixTailLocked(); err != nil {
		return AppendResult{}, err
	}
	// Producer-state checks (idempotence, transactions): before the write;
	// applied once the bytes are written.
	if l.ps.broken != nil {
		if err := l.rebuildProducerStateLocked(); err != nil {
			return AppendResult{}, err
		}
	}
	upd, dup, err := l.ps.check(vs, l.next)
	if err != nil {
		return AppendResult{}, err
	}
	if dup != nil {
		return l.duplicateLocked(dup), nil
	}
	if err := l.maybeRoll(cfg, int64(len(batches)), vs); err != nil {
		return AppendResult{}, err
	}
	seg := l.active
	start := seg.size.Load()
	next := l.next
	pos := 0
	for i := range vs {
		h := &vs[i].hdr
		h.BaseOffset = next
		h.LeaderEpoch = 0
		setBaseOffset(batches[pos:], next, 0)
		pos += int(h.Size())
		next = h.LastOffset() + 1
	}
	seg.preallocate(start+int64(len(batches)), cfg.SegmentBytes)
	if _, err := seg.f.WriteAt(batches, start); err != nil {
		// Roll back a partial write; if the truncate fails too, the garbage
		// past start is overwritten by the next append (positions come
		// from size, not the file) or cut by recovery (CRC).
		if terr := seg.f.Truncate(start); terr != nil {
			l.logger.Error("truncate after failed write", "segment", seg.name(), "pos", start, "err", terr)
			seg.dirtyTail = true
		} else {
			seg.truncated(start)
		}
		return AppendResult{}, storageErr(fmt.Sprintf("write %s", seg.name()), err)
	}
	res := AppendResult{LogAppendTime: logAppendTime, Batches: make([]BatchInfo, len(vs))}
	interval := int64(cfg.IndexIntervalBytes)
	seg.mu.Lock()
	p := start
	for i := range vs {
		h := &vs[i].hdr
		seg.ix.note(p, h, interval)
		p += h.Size()
		res.Batches[i] = BatchInfo{
			BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(),
			ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence,
			NumRecords: h.NumRecords, MaxTimestamp: h.MaxTimestamp,
			Transactional: h.Attributes&attrTransactional != 0, Control: h.Attributes&attrControl != 0,
		}
	}
	maxTs, maxTsOff := seg.ix.maxTs, seg.ix.maxTsOff
	seg.mu.Unlock()
	seg.size.Store(p)
	l.ps.apply(upd)
	l.next = next
	l.leo.Store(next)
	res.BaseOffset = res.Batches[0].BaseOffset
	res.LastOffset = next - 1
	res.LogStartOffset = l.logStart.Load()

	l.syncMu.Lock()
	l.written = syncPoint{seg: seg, pos: p, next: next, maxTs: maxTs, maxTsOff: maxTsOff}
	if l.policy == SyncInterval {
		l.setHW(next)
	} else {
		res.durableEnd, res.durableEpoch = next, l.rollbacks
	}
	l.syncMu.Unlock()
	return res, nil
}

// duplicateLocked answers an append whose batch is already in the log with
// the original offsets; a durable append still waits until those are synced
// (Append). mu must be held.
func (l *Log) duplicateLocked(d *duplicate) AppendResult {
	res := AppendResult{BaseOffset: d.firstOff, LastOffset: d.lastOff, LogAppendTime: -1,
		LogStartOffset: l.logStart.Load(), Duplicate: true}
	if l.policy == SyncAlways {
		l.syncMu.Lock()
		res.durableEnd, res.durableEpoch = d.lastOff+1, l.rollbacks
		l.syncMu.Unlock()
	}
	return res
}

// checkTimestampBounds applies message.timestamp.before/after.max.ms to the
// validated batches vs of batches: every record timestamp other than -1 must
// be within [now-before, now+after] (saturating). The batches' timestamp
// ranges decide; the records are walked again only to name the first one
// out of range.
func checkTimestampBounds(batches []byte, vs []validated, cfg *Config, now int64, c *codecs) error {
	// Both bounds are >= 0 (withDefaults).
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if now >= math.MinInt64+cfg.TimestampBeforeMaxMs {
		lo = now - cfg.TimestampBeforeMaxMs
	}
	if now <= math.MaxInt64-cfg.TimestampAfterMaxMs {
		hi = now + cfg.TimestampAfterMaxMs
	}
	pos, index := 0, int32(0)
	for i := range vs {
		b := batches[pos : pos+int(vs[i].hdr.Size())]
		pos += len(b)
		if vs[i].recordsMinTimestamp >= lo && vs[i].recordsMaxTimestamp <= hi {
			index += vs[i].hdr.NumRecords
			continue
		}
		te := &TimestampError{Index: index, Min: lo, Max: hi}
		recordTimestamps(b, c, func(_, ts int64) bool {
			if ts != -1 && (ts < lo || ts > hi) {
				te.Timestamp = ts
				return false
			}
			te.Index++
			return true
		})
		return te
	}
	return nil
}

// splitAndValidate splits concatenated batches and validates each one.
func splitAndValidate(b []byte, cfg *Config, c *codecs) ([]validated, error) {
	if len(b) == 0 {
		return nil, batchErr("no record batches")
	}
	var vs []validated
	for off := 0; off < len(b); {
		rest := b[off:]
		size, ok := BatchSize(rest)
		if !ok {
			return nil, batchErr("%d trailing bytes", len(rest))
		}
		if size < batchHeaderSize || size > int64(len(rest)) {
			return nil, batchErr("batch length %d invalid for %d remaining bytes", size-logOverhead, len(rest))
		}
		if size > int64(cfg.MaxMessageBytes) {
			return nil, fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", ErrMessageTooLarge, size, cfg.MaxMessageBytes)
		}
		v, err := validateBatch(rest[:size], c)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
		off += int(size)
	}
	return vs, nil
}

// maybeRoll starts a new segment if the append of n bytes (batches vs) would
// overflow segment.bytes, the active segment is older than segment.ms, or
// its offsets would not fit the index. mu must be held.
func (l *Log) maybeRoll(cfg *Config, n int64, vs []validated) error {
	seg := l.active
	size := seg.size.Load()
	if size == 0 {
		return nil
	}
	var count int64
	for i := range vs {
		count += int64(vs[i].hdr.LastOffsetDelta) + 1
	}
	switch {
	case size+n > cfg.SegmentBytes:
	case size+n > math.MaxInt32:
	case l.now().UnixMilli()-seg.rollMs > cfg.SegmentMs:
	case !seg.fitsOffsets(l.next + count):
	default:
		return nil
	}
	return l.roll()
}

// roll closes the active segment (fsync data, write its whole indexes) and
// opens a new one at the log end, then checkpoints at the new segment's
// start. mu must be held.
func (l *Log) roll() error {
	old := l.active
	if err := l.fixTailLocked(); err != nil {
		return err
	}
	if err := l.syncAllLocked(); err != nil {
		return err
	}
	old.releasePrealloc(l)
	old.mu.Lock()
	old.ix.addTimeEntry()
	old.mu.Unlock()
	if err := old.flushIndexes(math.MaxInt64, math.MaxInt64); err != nil {
		return storageErr("flush index of "+old.name(), err)
	}
	if err := l.writeTxnIndex(old, l.next); err != nil {
		return err
	}
	seg, err := l.createSegment(l.next)
	if err != nil {
		return err
	}
	old.idxFileMu.Lock()
	if old.oFile != nil {
		old.oFile.Close()
		old.tFile.Close()
		old.oFile, old.tFile = nil, nil
	}
	old.idxFileMu.Unlock()
	old.mu.Lock()
	old.closed = true
	old.loaded = true
	old.lastUse.Store(l.useTick.Add(1))
	old.mu.Unlock()

	l.segsMu.Lock()
	l.segs = append(l.segs, seg)
	l.active = seg
	l.segsMu.Unlock()
	l.syncMu.Lock()
	pt := syncPoint{seg: seg, pos: 0, next: l.next, maxTs: -1, maxTsOff: -1}
	l.written, l.synced = pt, pt
	l.syncMu.Unlock()
	l.unloadIndexes()
	// A producer snapshot at the new segment's start: crash recovery
	// replays only the active segment. If it fails, recovery replays more.
	if err := l.writeSnapshotLocked(); err != nil {
		l.logger.Warn("producer snapshot after roll failed", "err", err)
	}
	// A checkpoint at the new segment's start: recovery never rescans the
	// closed one. If it fails, the older checkpoint still holds (recovery
	// scans more).
	if err := l.writeCheckpoint(checkpoint{segBase: seg.base, next: l.next, maxTs: -1, maxTsOff: -1}); err != nil {
		l.logger.Warn("checkpoint after roll failed", "err", err)
	}
	l.logger.Debug("rolled segment", "closed", old.name(), "new", seg.name())
	return nil
}

// createSegment creates the files of an empty segment at base (and syncs
// the directory). The segment is returned with one reference.
func (l *Log) createSegment(base int64) (*segment, error) {
	seg := &segment{base: base, fs: l.fs, dir: l.dir, ix: newIndexState(base), maxTsKnown: true, loaded: true}
	seg.rollMs = l.now().UnixMilli()
	seg.refs.Store(1)
	fail := func(op string, err error) (*segment, error) {
		// Remove what was created (best effort; recovery also drops an
		// empty segment that is not the last).
		seg.closeFiles()
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			_ = l.fs.Remove(seg.path(suf))
		}
		return nil, storageErr(op+" "+seg.name(), err)
	}
	var err error
	if seg.f, err = l.fs.Create(seg.path(logSuffix)); err != nil {
		return fail("create", err)
	}
	if seg.oFile, err = l.createIndexFile(seg.path(indexSuffix), offsetIndexMagic, base); err != nil {
		return fail("create index", err)
	}
	if seg.tFile, err = l.createIndexFile(seg.path(timeIndexSuffix), timeIndexMagic, base); err != nil {
		return fail("create time index", err)
	}
	if err := vfs.SyncDir(l.fs, l.dir); err != nil {
		return fail("sync dir for", err)
	}
	return seg, nil
}

// createIndexFile creates an index file holding just its header, synced.
func (l *Log) createIndexFile(name, magic string, base int64) (f vfs.File, err error) {
	f, err = l.fs.Create(name)
	if err != nil {
		return nil, err
	}
	if _, err = f.WriteAt(indexHeader(magic, base), 0); err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// fixTailLocked retries the truncation of bytes past the active segment's
// logical end left by a failed write or fsync whose rollback could not
// truncate. Until it succeeds no append is accepted, so a segment is never
// closed with garbage after its last batch. mu must be held.
func (l *Log) fixTailLocked() error {
	seg := l.active
	if !seg.dirtyTail {
		return nil
	}
	if err := seg.f.Truncate(seg.size.Load()); err != nil {
		return storageErr("truncate "+seg.name(), err)
	}
	seg.dirtyTail = false
	seg.truncated(seg.size.Load())
	return nil
}
