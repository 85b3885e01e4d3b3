package log

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Compaction (cleanup.policy=compact).
//
// Clean rewrites closed segments keeping, for every key, only the record with
// the latest offset. It works as Kafka's LogCleaner:
//
//   - The dirty range starts at the cleaner checkpoint (the end of the last
//     clean, persisted in the cleaner-checkpoint file) and covers closed
//     segments that lie entirely below the last stable offset and whose
//     newest record is older than min.compaction.lag.ms. The active segment
//     is never cleaned.
//   - A pass runs when dirty bytes / (clean + dirty bytes) >=
//     min.cleanable.dirty.ratio, or when a dirty segment is older than
//     max.compaction.lag.ms, or when forced.
//   - Pass 1 reads the dirty range into a fixed-size offset map (key hash ->
//     latest offset). If the map fills up, the range ends at the last
//     segment that fit.
//   - Pass 2 rewrites every segment from the log start to the end of that
//     range, in groups of consecutive segments whose total size fits
//     segment.bytes, keeping a record unless a later offset of its key is in
//     the map. Offsets are preserved (gaps are normal). A batch that keeps
//     all its records is copied unchanged; one that keeps some is re-encoded
//     uncompressed with the same base offset, lastOffsetDelta, producer
//     fields and first timestamp (so the producer's last sequence and the
//     record timestamps are unchanged, as Kafka does); one that keeps none is
//     dropped unless it is its producer's last batch, which is kept as an
//     empty batch (header only), so producer state rebuilt from the log stays
//     right (an empty batch of a producer that has written since is
//     dropped). A group whose records are all removed keeps a neutral empty
//     batch (no producer, transaction or control fields) at its last
//     batch's offsets, so the segment stays and the log start offset never
//     moves because of compaction (a consumer's position stays in range;
//     reads skip the gaps).
//   - Tombstones (null value) are removed once delete.retention.ms has passed
//     since the pass that first cleaned them (the checkpoint keeps the time
//     of each pass). Data of aborted transactions is removed; markers are
//     removed once safe and the aborted-transaction index is pruned (see
//     clean_txn.go).
//   - Each group is swapped in atomically (see clean_swap.go).
//
// The cleaner holds its own lock; appends and reads go on while it copies
// (the append lock is held only to swap the segment list). Retention and
// DeleteRecords wait while a group is swapped.

// cleanerState is a Log's compaction state.
type cleanerState struct {
	mu     sync.Mutex // one clean at a time
	loaded bool
	passes []cleanPass // from the cleaner-checkpoint file, by end
	// Mirrors for readers that must not wait for a running pass (set with
	// mu held, read without): the last pass's end and time (valid once
	// loaded is mirrored by statusKnown), and the dirty ratio found by the
	// last planning (float64 bits).
	statusKnown atomic.Bool
	progress    atomic.Int64
	lastRun     atomic.Int64
	lastRatio   atomic.Uint64
	// nextDue (ms, 0: none) is when the last pass's kept markers or
	// tombstones start to become removable: a log without dirty data is
	// cleaned again then (horizon pass). Not persisted: after a restart the
	// next dirty pass removes them.
	nextDue atomic.Int64
}

// cleanPass says that a clean finished at time TimeMs (ms) with everything
// below End cleaned.
type cleanPass struct {
	End, TimeMs int64
}

// CleanOptions tune one Clean call.
type CleanOptions struct {
	// Force cleans even if the dirty ratio is below
	// min.cleanable.dirty.ratio (the lag limits still apply).
	Force bool
	// BytesPerSec bounds the read+write rate (0: unlimited).
	BytesPerSec int64
	// MapBytes is the offset map memory (default DefaultCleanerMapBytes).
	MapBytes int
}

// CleanResult describes one Clean call.
type CleanResult struct {
	Cleaned        bool // a pass ran
	DirtyRatio     float64
	FirstDirty     int64 // start of the dirty range
	CleanedTo      int64 // end of the cleaned range (the new checkpoint)
	Segments       int   // segments read in pass 2
	BytesRead      int64 // bytes read (both passes)
	BytesWritten   int64
	RecordsRemoved int64
	// MarkersRemoved counts transaction markers removed (their
	// transaction's data gone and their delete horizon passed);
	// AbortedPruned the aborted-transaction index entries dropped.
	MarkersRemoved int64
	AbortedPruned  int64
	Duration       time.Duration
}

// compactionDefaults fills in the compaction fields of Config.
func (c Config) compactionDefaults() Config {
	switch {
	case c.MinCleanableDirtyRatio == 0:
		c.MinCleanableDirtyRatio = 0.5
	case c.MinCleanableDirtyRatio < 0:
		c.MinCleanableDirtyRatio = 0
	}
	if c.MinCompactionLagMs < 0 {
		c.MinCompactionLagMs = 0
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = math.MaxInt64
	}
	switch {
	case c.DeleteRetentionMs == 0:
		c.DeleteRetentionMs = 24 * 60 * 60 * 1000
	case c.DeleteRetentionMs < 0:
		c.DeleteRetentionMs = 0
	}
	return c
}

// CleanerProgress returns the offset below which the log has been compacted
// (only the latest record of each key, plus tombstones younger than
// delete.retention.ms, remain there) and the time of the last pass; -1 and
// the zero time if the log was never cleaned.
func (l *Log) CleanerProgress() (cleanedTo int64, at time.Time) {
	l.cleaner.mu.Lock()
	defer l.cleaner.mu.Unlock()
	if err := l.loadCleanerLocked(); err != nil || len(l.cleaner.passes) == 0 {
		return -1, time.Time{}
	}
	p := l.cleaner.passes[len(l.cleaner.passes)-1]
	return p.End, time.UnixMilli(p.TimeMs)
}

// CleanerStatus is what the cleaner knows of one log, for operators.
type CleanerStatus struct {
	Compacted bool // cleanup.policy contains compact
	// CleanedTo is the cleaner checkpoint (first dirty offset): below it
	// only the latest record per key (and tombstones younger than
	// delete.retention.ms) remain; from it on the full history. -1: never
	// cleaned.
	CleanedTo int64
	LastClean time.Time // zero if never cleaned
	// DirtyRatio is dirty bytes / cleanable bytes of the closed segments
	// eligible for cleaning, at the last planning (0 when nothing is
	// cleanable). Fresh unless a pass was running (then the value its
	// planning found).
	DirtyRatio float64
	Cleaning   bool // a pass was running when asked
}

// CleanerStatus reports the cleaner's reach and state without waiting for a
// running pass.
func (l *Log) CleanerStatus() CleanerStatus {
	cfg := l.config()
	st := CleanerStatus{Compacted: cfg.Compact, CleanedTo: -1}
	if !cfg.Compact {
		return st
	}
	if l.cleaner.mu.TryLock() {
		if err := l.loadCleanerLocked(); err == nil && !l.closed.Load() {
			_, _ = l.planClean(cfg, l.now().UnixMilli(), false) // refreshes lastRatio
		}
		l.cleaner.mu.Unlock()
	} else {
		st.Cleaning = true
	}
	if l.cleaner.statusKnown.Load() {
		if p := l.cleaner.progress.Load(); p >= 0 {
			st.CleanedTo = p
			st.LastClean = time.UnixMilli(l.cleaner.lastRun.Load())
		}
	}
	st.DirtyRatio = math.Float64frombits(l.cleaner.lastRatio.Load())
	return st
}

// mirrorPassesLocked publishes the newest pass for CleanerStatus.
// cleaner.mu must be held.
func (l *Log) mirrorPassesLocked() {
	if n := len(l.cleaner.passes); n > 0 {
		l.cleaner.progress.Store(l.cleaner.passes[n-1].End)
		l.cleaner.lastRun.Store(l.cleaner.passes[n-1].TimeMs)
	} else {
		l.cleaner.progress.Store(-1)
	}
	l.cleaner.statusKnown.Store(true)
}

// cleanPlan is the outcome of planning a pass.
type cleanPlan struct {
	segs       []*segment // cleanable closed segments, from the first
	nextBase   []int64    // nextBase[i]: base of the segment after segs[i]
	firstDirty int        // index in segs of the first dirty segment
	ratio      float64
	due        bool  // the pass should run
	overdueMs  int64 // how far the oldest dirty segment is past max.compaction.lag.ms (0: not overdue)
	// horizonOnly: no dirty segment, but kept markers or tombstones are
	// due for removal: the pass rewrites the clean segments only.
	horizonOnly bool
	checkpoint  int64 // the cleaner checkpoint the plan started from
}

// planClean picks the cleanable segments. cleaner.mu must be held.
func (l *Log) planClean(cfg *Config, now int64, force bool) (cleanPlan, error) {
	var p cleanPlan
	segs := l.segments()
	if len(segs) < 2 {
		l.cleaner.lastRatio.Store(0)
		return p, nil
	}
	stable := min(l.ps.firstUnstable.Load(), l.hw.Load())
	firstDirtyOff := int64(0)
	if n := len(l.cleaner.passes); n > 0 {
		firstDirtyOff = l.cleaner.passes[n-1].End
	}
	var clean, dirty int64
	p.firstDirty = -1
	overdue := false
	for i := 0; i < len(segs)-1; i++ {
		s, next := segs[i], segs[i+1].base
		if next > stable {
			break // an undecided transaction or unsynced data
		}
		ts, _, err := l.segMaxTs(s)
		if err != nil {
			return p, err
		}
		if cfg.MinCompactionLagMs > 0 && ts >= 0 && now-ts < cfg.MinCompactionLagMs {
			break
		}
		p.segs = append(p.segs, s)
		p.nextBase = append(p.nextBase, next)
		if next > firstDirtyOff {
			if p.firstDirty < 0 {
				p.firstDirty = len(p.segs) - 1
			}
			dirty += s.size.Load()
			if cfg.MaxCompactionLagMs != math.MaxInt64 {
				// The segment's age: from its creation when known
				// (rollMs is 0 for segments loaded at open), else from
				// its newest record (later than Kafka's first-record
				// rule, never earlier).
				first := s.rollMs
				switch {
				case first > 0 && ts >= 0:
					first = min(first, ts)
				case first <= 0:
					first = ts
				}
				if first >= 0 && now-first > cfg.MaxCompactionLagMs {
					overdue = true
					p.overdueMs = max(p.overdueMs, now-first-cfg.MaxCompactionLagMs)
				}
			}
		} else {
			clean += s.size.Load()
		}
	}
	p.checkpoint = firstDirtyOff
	if p.firstDirty < 0 {
		l.cleaner.lastRatio.Store(0)
		if nd := l.cleaner.nextDue.Load(); nd > 0 && now >= nd && len(p.segs) > 0 {
			p.horizonOnly, p.due = true, true
			p.firstDirty = len(p.segs)
		}
		return p, nil
	}
	if clean+dirty > 0 {
		p.ratio = float64(dirty) / float64(clean+dirty)
	}
	l.cleaner.lastRatio.Store(math.Float64bits(p.ratio))
	p.due = force || overdue || p.ratio >= cfg.MinCleanableDirtyRatio
	return p, nil
}

// Clean runs one compaction pass if the log is compacted and a pass is due
// (see the comment at the top of clean.go). It is safe to call concurrently
// with appends, reads and retention.
func (l *Log) Clean(opts CleanOptions) (CleanResult, error) {
	var res CleanResult
	if l.closed.Load() {
		return res, ErrClosed
	}
	cfg := l.config()
	if !cfg.Compact {
		return res, nil
	}
	l.cleaner.mu.Lock()
	defer l.cleaner.mu.Unlock()
	if err := l.loadCleanerLocked(); err != nil {
		return res, err
	}
	start := time.Now()
	nowMs := l.now().UnixMilli()
	if err := l.rollForCompactionLag(cfg, nowMs); err != nil {
		return res, err
	}
	plan, err := l.planClean(cfg, nowMs, opts.Force)
	if err != nil {
		return res, err
	}
	res.DirtyRatio = plan.ratio
	if !plan.due {
		return res, nil
	}
	// Hold the planned segments: retention may remove them meanwhile (the
	// swap then notices and aborts), but their files stay readable.
	for i, s := range plan.segs {
		if !s.acquire() {
			for _, r := range plan.segs[:i] {
				r.release(l)
			}
			return res, errCleanAborted
		}
	}
	// held[i]: plan.segs[i]'s reference is still held. A group's segments
	// are released as soon as it is swapped: a replaced segment's files
	// (and page cache) are freed then, one group at a time, not all at the
	// end of the pass in one burst of unlinks that the appenders' journal
	// commits would wait behind.
	held := make([]bool, len(plan.segs))
	for i := range held {
		held[i] = true
	}
	defer func() {
		for i, s := range plan.segs {
			if held[i] {
				s.release(l)
			}
		}
	}()
	thr := newThrottle(opts.BytesPerSec)
	mapBytes := opts.MapBytes
	if mapBytes <= 0 {
		mapBytes = DefaultCleanerMapBytes
	}
	if plan.horizonOnly {
		mapBytes = 0 // nothing to map
	}
	om := newOffsetMap(mapBytes)
	var bufs cleanBufs
	res.FirstDirty = plan.checkpoint
	if plan.firstDirty < len(plan.segs) {
		res.FirstDirty = plan.segs[plan.firstDirty].base
	}
	// Pass 1: the offset map over the dirty segments.
	end := plan.firstDirty
	for i := plan.firstDirty; i < len(plan.segs); i++ {
		n, full, err := l.mapSegment(plan.segs[i], om, thr, &bufs)
		res.BytesRead += n
		if err != nil {
			return res, err
		}
		if full {
			if i == plan.firstDirty {
				return res, fmt.Errorf("log: cleaner offset map (%d bytes) too small for segment %s", mapBytes, plan.segs[i].name())
			}
			break // this segment did not fit: the range ends before it
		}
		end = i + 1
		if om.full() {
			break
		}
	}
	if end == plan.firstDirty && !plan.horizonOnly {
		return res, nil
	}
	// A horizon pass claims nothing new: its end is the checkpoint.
	cleanedTo := max(plan.nextBase[end-1], plan.checkpoint)
	horizon := l.tombstoneHorizon(cfg, nowMs)
	tt := newTxnTracker(l.ps, cleanedTo)
	tt.passes, tt.retentionMs, tt.nowMs = l.cleaner.passes, cfg.DeleteRetentionMs, nowMs
	// Pass 2: rewrite [0, end) in groups.
	segs, nexts := plan.segs[:end], plan.nextBase[:end]
	for i := 0; i < len(segs); {
		j := i + 1
		size := segs[i].size.Load()
		for j < len(segs) && size+segs[j].size.Load() <= cfg.SegmentBytes && nexts[j]-segs[i].base < math.MaxUint32 {
			size += segs[j].size.Load()
			j++
		}
		st, err := l.cleanGroup(segs[i:j], nexts[j-1], om, horizon, tt, nowMs, thr, &bufs, cfg)
		res.BytesRead += st.read
		res.BytesWritten += st.written
		res.RecordsRemoved += st.removed
		res.MarkersRemoved += st.markers
		res.AbortedPruned += st.pruned
		res.Segments += j - i
		if err != nil {
			return res, err
		}
		for k := i; k < j; k++ {
			dropCache(segs[k].f, segs[k].size.Load())
			held[k] = false
			segs[k].release(l)
		}
		i = j
	}
	if err := l.addCleanPass(cleanPass{End: cleanedTo, TimeMs: nowMs}, cfg.DeleteRetentionMs, nowMs); err != nil {
		return res, err
	}
	l.cleaner.nextDue.Store(tt.dueMs)
	res.Cleaned = true
	res.CleanedTo = cleanedTo
	res.Duration = time.Since(start)
	l.logger.Info("compacted", "segments", res.Segments, "cleaned_to", cleanedTo, "read", res.BytesRead,
		"written", res.BytesWritten, "removed_records", res.RecordsRemoved, "removed_markers", res.MarkersRemoved,
		"pruned_aborted", res.AbortedPruned, "dirty_ratio", plan.ratio, "took", res.Duration)
	return res, nil
}

// rollForCompactionLag rolls the active segment when its oldest record is
// older than max.compaction.lag.ms, so that it becomes cleanable (as Kafka
// rolls for max.compaction.lag.ms).
func (l *Log) rollForCompactionLag(cfg *Config, now int64) error {
	if cfg.MaxCompactionLagMs == math.MaxInt64 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		return ErrClosed
	}
	act := l.active
	if act.size.Load() == 0 || now-act.rollMs <= cfg.MaxCompactionLagMs {
		return nil
	}
	// Only data below the high watermark is cleanable; a roll syncs it.
	return l.roll()
}

// tombstoneHorizon is the offset below which tombstones may be removed:
// the end of the newest pass that is older than delete.retention.ms.
// cleaner.mu must be held.
func (l *Log) tombstoneHorizon(cfg *Config, now int64) int64 {
	h := int64(0)
	for _, p := range l.cleaner.passes {
		if now-p.TimeMs >= cfg.DeleteRetentionMs {
			h = max(h, p.End)
		}
	}
	return h
}

// segmentScanner reads a closed segment's batches in order.
type segmentScanner struct {
	l    *Log // a pass stops (ErrClosed) when the log is closed
	seg  *segment
	buf  []byte
	pos  int64 // file position of buf[0]
	r, w int   // buf[r:w] unread
	end  int64
	thr  *throttle
	read int64
}

// newSegmentScanner reads seg in pieces of cleanIOChunk bytes into buf
// (grown if a batch is larger, else reused: the caller passes the buffer of
// the previous scanner, see scanBuf).
func newSegmentScanner(l *Log, seg *segment, thr *throttle, buf []byte) *segmentScanner {
	if len(buf) < cleanIOChunk {
		buf = make([]byte, cleanIOChunk)
	}
	return &segmentScanner{l: l, seg: seg, buf: buf, end: seg.size.Load(), thr: thr}
}

// scanBuf returns the scanner's buffer for the next scanner.
func (s *segmentScanner) scanBuf() []byte { return s.buf }

// next returns the next whole batch (valid until the following call), or
// nil at the end of the segment.
func (s *segmentScanner) next() ([]byte, batchHeader, error) {
	for {
		avail := s.buf[s.r:s.w]
		if len(avail) >= batchHeaderSize {
			h := parseHeader(avail)
			filePos := s.pos + int64(s.r)
			if r := h.checkFraming(s.end - filePos); r != "" {
				return nil, h, &CorruptionError{Segment: s.seg.name(), Offset: filePos, Reason: r}
			}
			if int64(len(avail)) >= h.Size() {
				s.r += int(h.Size())
				return avail[:h.Size()], h, nil
			}
			if h.Size() > int64(len(s.buf)) {
				nb := make([]byte, h.Size())
				copy(nb, avail)
				s.buf = nb
				s.pos, s.r, s.w = filePos, 0, len(avail)
			}
		}
		filePos := s.pos + int64(s.w)
		if filePos >= s.end {
			if s.r < s.w {
				return nil, batchHeader{}, &CorruptionError{Segment: s.seg.name(), Offset: s.pos + int64(s.r), Reason: "truncated batch"}
			}
			return nil, batchHeader{}, nil
		}
		if s.l.closed.Load() {
			return nil, batchHeader{}, ErrClosed
		}
		// Move the unread bytes to the front and fill.
		n := copy(s.buf, s.buf[s.r:s.w])
		s.pos += int64(s.r)
		s.r, s.w = 0, n
		// One piece at a time (at most cleanIOChunk), however large
		// the buffer grew for a large batch.
		want := min(int64(len(s.buf)-s.w), s.end-filePos, cleanIOChunk)
		got, err := readSome(s.seg.f, s.buf[s.w:s.w+int(want)], filePos)
		if err != nil {
			return nil, batchHeader{}, storageErr("read "+s.seg.name(), err)
		}
		if got == 0 {
			return nil, batchHeader{}, &CorruptionError{Segment: s.seg.name(), Offset: filePos, Reason: "short read"}
		}
		s.w += int(got)
		s.read += got
		s.thr.wait(got)
	}
}

// mapSegment adds the keys of seg's data records to om. Records of aborted
// transactions are skipped (they must not hide an earlier value). full is
// true if the segment did not fit (om is then unusable beyond the previous
// segments: the caller stops before this segment, and the later entries
// only make pass 2 keep less of what the map does not cover — see below).
func (l *Log) mapSegment(seg *segment, om *offsetMap, thr *throttle, bufs *cleanBufs) (int64, bool, error) {
	sc := newSegmentScanner(l, seg, thr, bufs.read)
	defer func() { bufs.read = sc.scanBuf() }()
	for {
		b, h, err := sc.next()
		if err != nil || b == nil {
			return sc.read, false, err
		}
		if h.Attributes&attrControl != 0 || l.isAborted(&h) {
			continue
		}
		full := false
		err = forEachRecord(b, h, &l.codecs, func(body []byte) error {
			r, ok := parseRecordBody(body)
			if !ok {
				return &CorruptionError{Segment: seg.name(), Reason: fmt.Sprintf("bad record in batch %d", h.BaseOffset)}
			}
			if r.key == nil {
				return nil
			}
			if err := om.put(r.key, h.BaseOffset+r.offDelta); err != nil {
				full = true
				return err
			}
			return nil
		})
		if full {
			return sc.read, true, nil
		}
		if err != nil {
			return sc.read, false, err
		}
	}
}

// isAborted reports whether a transactional data batch belongs to an
// aborted transaction.
func (l *Log) isAborted(h *batchHeader) bool {
	if h.Attributes&attrTransactional == 0 || h.Attributes&attrControl != 0 {
		return false
	}
	for _, a := range l.AbortedTransactions(h.BaseOffset, h.LastOffset()+1) {
		if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && a.LastOffset > h.LastOffset() {
			return true
		}
	}
	return false
}

// groupStats counts the work of cleaning one group.
type groupStats struct {
	read, written, removed int64
	markers, pruned        int64
}

// filterBatch decides what to keep of batch b. It returns b itself (keep
// whole), nil (drop) or a re-encoded batch in *scratch's storage, valid
// until the next call (*scratch keeps the grown buffer: a pass allocates
// nothing per batch once it holds the largest batch).
// Control batches are decided by filterMarker, not here.
func (l *Log) filterBatch(b []byte, h batchHeader, om *offsetMap, horizon int64, lastOfProducer map[int64]int64, tt *txnTracker, scratch *[]byte) ([]byte, int64, error) {
	last, known := lastOfProducer[h.ProducerID]
	isLast := h.ProducerID >= 0 && known && last == h.LastOffset()
	if tt.onData(&h) {
		if isLast {
			*scratch = emptyBatch(*scratch, b)
			return *scratch, int64(h.NumRecords), nil
		}
		return nil, int64(h.NumRecords), nil
	}
	if h.NumRecords == 0 && !isLast {
		// An empty batch kept for a producer that has written since:
		// no longer needed (a group left empty keeps a neutral one).
		return nil, 0, nil
	}
	// The kept records are appended after a copy of the header; the
	// header's fields are fixed up below if the batch is re-encoded.
	nb := append((*scratch)[:0], b[:batchHeaderSize]...)
	defer func() { *scratch = nb[:0] }()
	var kept, dropped int32
	maxTs := int64(-1)
	err := forEachRecord(b, h, &l.codecs, func(body []byte) error {
		r, ok := parseRecordBody(body)
		if !ok {
			return batchErr("bad record in batch %d", h.BaseOffset)
		}
		off := h.BaseOffset + r.offDelta
		retain := true
		if r.key != nil {
			if latest := om.get(r.key); latest > off {
				retain = false
			} else if r.valueNull && off < horizon {
				retain = false
			} else if r.valueNull {
				tt.tombstoneKept(off)
			}
		}
		if !retain {
			dropped++
			return nil
		}
		kept++
		maxTs = max(maxTs, h.FirstTimestamp+r.tsDelta)
		nb = appendVarint(nb, int64(len(body)))
		nb = append(nb, body...)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	switch {
	case dropped == 0:
		return b, 0, nil
	case kept == 0 && isLast:
		nb = emptyBatch(nb, b)
		return nb, int64(dropped), nil
	case kept == 0:
		return nil, int64(dropped), nil
	}
	// Re-encode: same header fields but records, count, length,
	// uncompressed; maxTimestamp from the kept records (LogAppendTime
	// batches keep theirs).
	nh := parseHeader(nb)
	nh.Attributes &^= attrCompression
	if !h.LogAppendTime() {
		nh.MaxTimestamp = maxTs
	}
	nh.NumRecords = kept
	nh.Put(nb)
	SealBatch(nb)
	return nb, int64(dropped), nil
}

// emptyBatch returns the header of batch b as a batch without records (as
// Kafka's cleaner keeps for a producer's last batch), in dst's storage:
// same base offset, lastOffsetDelta, producer fields and timestamps, so the
// offsets it covers and the producer's last sequence stay known.
func emptyBatch(dst, b []byte) []byte {
	nb := append(dst[:0], b[:batchHeaderSize]...)
	h := parseHeader(nb)
	h.Attributes &^= attrCompression
	h.NumRecords = 0
	h.Put(nb)
	SealBatch(nb)
	return nb
}

// errCleanAborted: the log changed under a group being cleaned (retention
// removed one of its segments); the pass stops, a later one retries.
var errCleanAborted = errors.New("log: clean aborted: segments changed")
