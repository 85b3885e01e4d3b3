package log

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/weirhq/weir/vfs"
)

// Recovery.
//
// The recovery-point file names a durable point (segment, byte position,
// next offset). Everything before it was fsynced before the file was
// written, so open trusts it without reading it: segments before the
// checkpoint's segment are opened lazily (only their file size is read;
// indexes load on first use), and the checkpoint segment's index entries
// below the point are loaded as they are. Only the bytes after the point
// (in the checkpoint segment and any later segment) are scanned, batch by
// batch, checking framing, CRC-32C and offset order. The first bad batch
// ends the log: it and everything after it is a torn or corrupt tail,
// truncated with a logged CorruptionError. Since synced data is always a
// prefix of the written data, nothing synced is ever behind a torn write, so
// no acknowledged batch is dropped.
//
// After a clean Close the checkpoint is at the end of the log: nothing is
// scanned.

// recover opens the directory, rebuilding state after a crash if needed, in
// phases: list the segment files (removing orphans), read the log start and
// recovery point, open every segment, choose where the scan starts, scan
// the tail (truncating a torn or corrupt one), and make the last segment
// active.
func (l *Log) recover() error {
	// A new partition (create.go).
	if created, err := l.createIfMissing(); err != nil || created {
		return err
	}
	// An interrupted compaction swap is finished or undone first
	// (clean_swap.go).
	if err := l.recoverCleanSwap(); err != nil {
		return err
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	logStart, ckpt, err := l.readRecoveryFiles()
	if err != nil {
		return err
	}
	if len(bases) == 0 {
		seg, err := l.createSegment(logStart)
		if err != nil {
			return err
		}
		l.segs = []*segment{seg}
		return l.finishOpen(seg, logStart, logStart, true)
	}
	if err := l.openSegments(bases); err != nil {
		return err
	}
	sp := l.scanStart(ckpt)
	scan, err := l.scanTail(sp)
	if err != nil {
		return err
	}
	return l.activate(logStart, ckpt, sp, scan)
}

// listSegments returns the base offsets of the directory's segments in
// order, after removing orphan files: interrupted atomic writes and index
// files whose .log was deleted first.
func (l *Log) listSegments() ([]int64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, storageErr("list log dir", err)
	}
	var bases []int64
	haveLog := map[int64]bool{}
	var orphans []string
	for _, n := range names {
		if b, ok := parseSegmentName(n, logSuffix); ok {
			bases = append(bases, b)
			haveLog[b] = true
		}
	}
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, vfs.TmpSuffix):
			orphans = append(orphans, n) // an interrupted atomic write
		case strings.HasSuffix(n, indexSuffix) || strings.HasSuffix(n, timeIndexSuffix):
			b, ok := parseSegmentName(n, indexSuffix)
			if !ok {
				b, ok = parseSegmentName(n, timeIndexSuffix)
			}
			if ok && !haveLog[b] {
				orphans = append(orphans, n) // the .log was deleted first
			}
		}
	}
	for _, n := range orphans {
		if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil && !isNotExist(err) {
			return nil, storageErr("remove "+n, err)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// readRecoveryFiles reads the log start offset (0 if absent) and the
// recovery point (nil if absent). A damaged file is logged and ignored:
// the log start then comes from the first segment, and the scan starts at
// the last segment.
func (l *Log) readRecoveryFiles() (logStart int64, ckpt *checkpoint, err error) {
	if b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, logStartFile)); err == nil {
		if v, derr := decodeLogStart(b); derr == nil {
			logStart = v
		} else {
			l.logger.Error("ignoring damaged log start offset file", "err",
				&CorruptionError{Segment: logStartFile, Reason: derr.Error()})
		}
	} else if !isNotExist(err) {
		return 0, nil, storageErr("read log start offset", err)
	}
	if b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, checkpointFile)); err == nil {
		if c, derr := decodeCheckpoint(b); derr == nil {
			ckpt = &c
		} else {
			l.logger.Error("ignoring damaged recovery point, scanning all segments", "err",
				&CorruptionError{Segment: checkpointFile, Reason: derr.Error()})
		}
	} else if !isNotExist(err) {
		return 0, nil, storageErr("read recovery point", err)
	}
	return logStart, ckpt, nil
}

// openSegments opens every segment file as a closed segment (only its size
// is read) and drops an empty segment that is not the last: a leftover of
// a roll that failed after creating its file.
func (l *Log) openSegments(bases []int64) error {
	for _, b := range bases {
		seg := &segment{base: b, fs: l.fs, dir: l.dir, ix: newIndexState(b)}
		seg.refs.Store(1)
		f, err := l.fs.OpenReadWrite(seg.path(logSuffix))
		if err != nil {
			return storageErr("open "+seg.name(), err)
		}
		seg.f = f
		l.segs = append(l.segs, seg)
		st, err := f.Stat()
		if err != nil {
			return storageErr("stat "+seg.name(), err)
		}
		seg.size.Store(st.Size())
		seg.closed = true
	}
	kept := l.segs[:0]
	for i, seg := range l.segs {
		if i < len(l.segs)-1 && seg.size.Load() == 0 {
			l.logger.Warn("removing empty segment left by a failed roll", "segment", seg.name())
			seg.deleted.Store(true)
			seg.release(l)
			continue
		}
		kept = append(kept, seg)
	}
	l.segs = kept
	return nil
}

// scanPoint is where recovery's scan starts: segment index seg, byte pos in
// it, next offset at that byte. trusted: it is the recovery point (the
// bytes before it are durable and need no scan); indexOK: the segment's
// index entries below pos were loaded from its index files.
type scanPoint struct {
	seg     int
	pos     int64
	next    int64
	trusted bool
	indexOK bool
}

// scanStart decides where the scan starts. Without a usable recovery point:
// at the start of the last segment, since a segment is closed only after its
// data and index files are fsynced (roll), so every closed segment is whole.
// It marks the start segment loaded.
func (l *Log) scanStart(ckpt *checkpoint) scanPoint {
	lastSeg := len(l.segs) - 1
	sp := scanPoint{seg: lastSeg, next: l.segs[lastSeg].base}
	if ckpt == nil {
		if len(l.segs) == 1 && l.segs[0].size.Load() == 0 {
			// A new partition that never got data: it has no recovery
			// point yet (create.go).
			l.logger.Debug("no recovery point in an empty log")
		} else {
			l.logger.Warn("no recovery point, scanning the last segment", "segment", l.segs[lastSeg].name())
		}
	} else {
		i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base >= ckpt.segBase })
		switch {
		case i == len(l.segs) || l.segs[i].base != ckpt.segBase:
			l.logger.Warn("recovery point names a missing segment, scanning the last segment",
				"recovery_point_segment", segmentName(ckpt.segBase, logSuffix), "segment", l.segs[lastSeg].name())
		case ckpt.pos > l.segs[i].size.Load():
			l.logger.Error("segment shorter than its recovery point, scanning it", "err", &CorruptionError{
				Segment: l.segs[i].name(), Offset: l.segs[i].size.Load(),
				Reason: fmt.Sprintf("recovery point at byte %d", ckpt.pos)})
			sp.seg, sp.next = i, l.segs[i].base
		default:
			sp = scanPoint{seg: i, pos: ckpt.pos, next: ckpt.next, trusted: true}
		}
	}
	first := l.segs[sp.seg]
	first.mu.Lock()
	first.loaded = true
	first.maxTsKnown = true
	sp.indexOK = sp.trusted
	if sp.trusted {
		if err := l.loadCheckpointIndexes(first, ckpt); err != nil {
			l.logger.Warn("rebuilding index of checkpoint segment", "err", err)
			sp.pos, sp.next = 0, first.base
			first.ix = newIndexState(first.base)
			first.flushedO, first.flushedT = 0, 0
			sp.indexOK = false
		}
	}
	first.mu.Unlock()
	return sp
}

// scanResult is what scanTail found: the index of the last segment kept,
// the next offset after the last good batch, and whether any byte was
// scanned.
type scanResult struct {
	last    int
	next    int64
	scanned bool
}

// scanTail scans from sp to the end of the log, batch by batch. The first
// bad batch ends the log: its segment is truncated there (synced) and every
// later segment is dropped. A segment that does not start where the
// previous one ended ends the log the same way.
func (l *Log) scanTail(sp scanPoint) (scanResult, error) {
	res := scanResult{last: len(l.segs) - 1, next: sp.next}
	l.scanFrom = -1
	interval := int64(l.config().IndexIntervalBytes)
	for i := sp.seg; i < len(l.segs); i++ {
		seg := l.segs[i]
		pos := int64(0)
		if i == sp.seg {
			pos = sp.pos
		} else {
			seg.mu.Lock()
			seg.loaded, seg.maxTsKnown = true, true
			seg.mu.Unlock()
			if seg.base != res.next {
				// A segment is created at the log end by a roll.
				l.logger.Error("segment does not start where the previous one ends", "err",
					&CorruptionError{Segment: seg.name(), Reason: fmt.Sprintf("base offset %d, previous segment ends at %d", seg.base, res.next)})
				res.last = i - 1
				break
			}
			res.next = seg.base
		}
		if pos == seg.size.Load() {
			continue
		}
		if !res.scanned {
			l.scanFrom = res.next
		}
		res.scanned = true
		end, n, cerr, err := scanSegment(seg, pos, res.next, interval, true, &seg.ix, &seg.mu, l.collectProducerBatch)
		if err != nil {
			return res, storageErr("scan "+seg.name(), err)
		}
		res.next = n
		if cerr == nil && i < len(l.segs)-1 {
			// A closed segment whose tail was scanned: make sure the
			// bytes are durable (a process crash leaves them in the page
			// cache only) before anything depends on them.
			if err := seg.f.Sync(); err != nil {
				return res, storageErr("sync "+seg.name(), err)
			}
		}
		if cerr != nil {
			l.logger.Warn("truncating torn or corrupt tail", "segment", seg.name(), "pos", end, "err", cerr)
			if err := seg.f.Truncate(end); err != nil {
				return res, storageErr("truncate "+seg.name(), err)
			}
			if err := seg.f.Sync(); err != nil {
				return res, storageErr("sync "+seg.name(), err)
			}
			seg.size.Store(end)
			if i < len(l.segs)-1 {
				l.logger.Error("dropping segments after a corrupt batch", "from", l.segs[i+1].name())
			}
			res.last = i
			break
		}
	}
	// Drop segments after a corruption point (files removed, .log first).
	for _, seg := range l.segs[res.last+1:] {
		seg.deleted.Store(true)
		seg.release(l)
	}
	l.segs = l.segs[:res.last+1]
	return res, nil
}

// activate makes the last segment the active one after a scan: the closed
// segments that were scanned get their index files rewritten, the active
// segment's index files are opened, a scanned tail is synced before it
// becomes visible, and the offsets are set (finishOpen).
func (l *Log) activate(logStart int64, ckpt *checkpoint, sp scanPoint, scan scanResult) error {
	act := l.segs[scan.last]
	rewrote := false
	for i := sp.seg; i < scan.last; i++ {
		seg := l.segs[i]
		seg.mu.Lock()
		seg.ix.addTimeEntry()
		seg.mu.Unlock()
		if err := seg.writeIndexFiles(); err != nil {
			return storageErr("write index of "+seg.name(), err)
		}
		rewrote = true
	}
	if err := l.openActiveIndexFiles(act, sp.indexOK && sp.seg == scan.last); err != nil {
		return err
	}
	if rewrote {
		if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			return storageErr("sync log dir", err)
		}
	}
	if scan.scanned {
		// The recovered tail may be only in the page cache (a process
		// crash): make it durable before it becomes visible.
		if err := act.f.Sync(); err != nil {
			return storageErr("sync "+act.name(), err)
		}
	}
	act.closed = false
	act.rollMs = l.now().UnixMilli()
	if act.size.Load() >= batchHeaderSize {
		var hb [batchHeaderSize]byte
		if err := readFull(act.f, hb[:], 0); err == nil {
			if h := parseHeader(hb[:]); h.MaxTimestamp >= 0 && h.MaxTimestamp < act.rollMs {
				act.rollMs = h.MaxTimestamp
			}
		}
	}
	if err := l.finishOpen(act, logStart, scan.next, scan.scanned || !sp.trusted); err != nil {
		return err
	}
	if sp.trusted && ckpt.clean && !scan.scanned {
		l.logger.Debug("opened after clean shutdown", "segments", len(l.segs), "log_end", scan.next)
	} else {
		l.logger.Info("recovered log", "segments", len(l.segs), "log_end", scan.next,
			"scanned_from_segment", l.segs[sp.seg].name(), "scanned_from_pos", sp.pos)
	}
	return nil
}

// finishOpen sets the offsets and sync state once the segments are known,
// and writes a checkpoint at the end if recovery changed anything.
func (l *Log) finishOpen(act *segment, logStart, next int64, writeCkpt bool) error {
	l.active = act
	l.next = next
	l.leo.Store(next)
	l.hw.Store(next)
	logStart = max(logStart, l.segs[0].base)
	logStart = min(logStart, next)
	l.logStart.Store(logStart)
	act.mu.RLock()
	pt := syncPoint{seg: act, pos: act.size.Load(), next: next, maxTs: act.ix.maxTs, maxTsOff: act.ix.maxTsOff}
	act.mu.RUnlock()
	l.written, l.synced = pt, pt
	if !writeCkpt {
		l.lastCkpt, l.haveCkpt = checkpoint{segBase: act.base, pos: pt.pos, next: next, maxTs: pt.maxTs, maxTsOff: pt.maxTsOff, clean: true}, true
		return nil
	}
	if err := act.flushIndexes(pt.pos, next); err != nil {
		return storageErr("flush index of "+act.name(), err)
	}
	return l.writeCheckpoint(checkpoint{segBase: act.base, pos: pt.pos, next: next, maxTs: pt.maxTs, maxTsOff: pt.maxTsOff})
}

// loadCheckpointIndexes loads the index entries of the checkpoint segment
// that point below the checkpoint (those are durable). seg.mu must be held.
func (l *Log) loadCheckpointIndexes(seg *segment, c *checkpoint) error {
	ob, err := vfs.ReadFile(l.fs, seg.path(indexSuffix))
	if err != nil {
		return err
	}
	tb, err := vfs.ReadFile(l.fs, seg.path(timeIndexSuffix))
	if err != nil {
		return err
	}
	o, err := parseOffsetIndex(ob, seg.base, -1)
	if err != nil {
		return &CorruptionError{Segment: segmentName(seg.base, indexSuffix), Reason: err.Error()}
	}
	t, err := parseTimeIndex(tb, seg.base)
	if err != nil {
		return &CorruptionError{Segment: segmentName(seg.base, timeIndexSuffix), Reason: err.Error()}
	}
	seg.ix.oidx, seg.ix.tidx = o, t
	seg.ix.truncate(c.pos, c.next, c.maxTs, c.maxTsOff)
	// These entries are in the files; the scan adds the rest in memory.
	seg.flushedO, seg.flushedT = seg.ix.oidx.len(), seg.ix.tidx.len()
	return nil
}

// openActiveIndexFiles opens the index files of the active segment for
// appending entries: truncated to the entries loaded from them below the
// checkpoint (trusted), or recreated empty; the entries in memory beyond
// those are written by the next checkpoint.
func (l *Log) openActiveIndexFiles(act *segment, trusted bool) error {
	act.idxFileMu.Lock()
	defer act.idxFileMu.Unlock()
	no, nt := act.flushedO, act.flushedT // set by loadCheckpointIndexes
	open := func(suffix, magic string, n, size int) (f vfsFile, flushed int, err error) {
		name := act.path(suffix)
		if trusted {
			if f, err = l.fs.OpenReadWrite(name); err == nil {
				if err = f.Truncate(int64(indexHeaderSize + n*size)); err == nil {
					return f, n, nil
				}
				f.Close()
			}
			l.logger.Warn("recreating index file", "file", name, "err", err)
		}
		f, err = l.createIndexFile(name, magic, act.base)
		return f, 0, err
	}
	var err error
	if act.oFile, act.flushedO, err = open(indexSuffix, offsetIndexMagic, no, offsetEntrySize); err != nil {
		return storageErr("open index of "+act.name(), err)
	}
	if act.tFile, act.flushedT, err = open(timeIndexSuffix, timeIndexMagic, nt, timeEntrySize); err != nil {
		return storageErr("open time index of "+act.name(), err)
	}
	if !trusted {
		if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			return storageErr("sync log dir", err)
		}
	}
	return nil
}

// scanSegment reads seg's batches from pos, checking framing, CRC and that
// offsets increase from next; each good batch is noted in ix (under mu).
// strict requires offsets to be contiguous (a tail written by Append); a
// closed segment may have gaps (compaction). It returns the end of the last
// good batch and the offset after it; cerr
// describes the first bad batch (nil if the scan reached the end); err is an
// I/O error.
//
// collect, if not nil, is called with every good batch (its bytes valid only
// during the call), before the next one is checked.
func scanSegment(seg *segment, pos, next, interval int64, strict bool, ix *indexState, mu sync.Locker, collect func(h *batchHeader, b []byte)) (end, nextOut int64, cerr *CorruptionError, err error) {
	size := seg.size.Load()
	r := newChunkReader(seg.f, 1<<20, size)
	bad := func(reason string, args ...any) (int64, int64, *CorruptionError, error) {
		return pos, next, &CorruptionError{Segment: seg.name(), Offset: pos, Reason: fmt.Sprintf(reason, args...)}, nil
	}
	for pos < size {
		if size-pos < batchHeaderSize {
			return bad("%d bytes, less than a batch header", size-pos)
		}
		hb, err := r.get(pos, batchHeaderSize)
		if err != nil {
			return pos, next, nil, err
		}
		h := parseHeader(hb)
		if reason := h.checkFraming(size - pos); reason != "" {
			return bad("%s", reason)
		}
		if h.BaseOffset < next || (strict && h.BaseOffset != next) {
			return bad("base offset %d, expected %d", h.BaseOffset, next)
		}
		if !seg.fitsOffsets(h.LastOffset()) {
			return bad("offset %d too far from segment base", h.LastOffset())
		}
		b, err := r.get(pos, int(h.Size()))
		if err != nil {
			return pos, next, nil, err
		}
		if c := BatchCRC(b); c != h.CRC {
			return bad("crc mismatch: stored %08x, computed %08x", h.CRC, c)
		}
		mu.Lock()
		ix.note(pos, &h, interval)
		mu.Unlock()
		if collect != nil {
			collect(&h, b)
		}
		pos += h.Size()
		next = h.LastOffset() + 1
	}
	return pos, next, nil, nil
}

// chunkReader serves sequential reads of a file from a buffer refilled in
// large chunks.
type chunkReader struct {
	f     vfsFile
	buf   []byte
	start int64 // file position of buf[0]
	n     int   // valid bytes in buf
	chunk int
	limit int64 // file size: reads stop there
}

func newChunkReader(f vfsFile, chunk int, limit int64) *chunkReader {
	return &chunkReader{f: f, chunk: chunk, limit: limit}
}

// get returns n bytes at pos, valid until the next call.
func (r *chunkReader) get(pos int64, n int) ([]byte, error) {
	if pos >= r.start && pos+int64(n) <= r.start+int64(r.n) {
		o := int(pos - r.start)
		return r.buf[o : o+n], nil
	}
	want := max(n, int(min(int64(r.chunk), r.limit-pos)))
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	m, err := r.f.ReadAt(r.buf, pos)
	r.start, r.n = pos, m
	if m < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return r.buf[:n], nil
}

func parentDir(dir string) string { return filepath.Dir(filepath.Clean(dir)) }
