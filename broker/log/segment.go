package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weirhq/weir/vfs"
)

// File names of a segment: the base offset as 20 decimal digits, so that
// names sort by offset. The naming is part of the on-disk format.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

type vfsFile = vfs.File

func segmentName(base int64, suffix string) string { return fmt.Sprintf("%020d%s", base, suffix) }

// parseSegmentName returns the base offset of a segment file name with the
// given suffix.
func parseSegmentName(name, suffix string) (int64, bool) {
	s, ok := strings.CutSuffix(name, suffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// segment is one .log file with its indexes.
//
// Concurrency: base, fs, dir, f are immutable. size is published by the
// appender (under Log.mu) after the bytes are written, so readers never read
// past written data. mu guards the in-memory index state; idxFileMu
// serialises writes to the index files (lock order: Log.mu -> seg.mu is never
// held while taking idxFileMu's I/O, see flushIndexes). refs counts the Log's
// own reference (1 while the segment is in the log) plus readers; the files
// are closed and removed when a deleted segment's count drops to 0.
type segment struct {
	base int64
	fs   vfs.FS
	dir  string
	f    vfs.File // the .log file, read-write

	size    atomic.Int64
	pre     prealloc // guarded by Log.mu
	refs    atomic.Int32
	deleted atomic.Bool
	// rollMs is the time (ms) age-based rolling counts from: creation, or
	// the first batch's timestamp after a restart. Guarded by Log.mu.
	rollMs int64
	// dirtyTail: the file holds bytes past size that a rollback could not
	// truncate. Guarded by Log.mu.
	dirtyTail bool

	mu      sync.RWMutex
	loaded  bool          // ix holds the whole index (closed segments load lazily)
	ix      indexState    // valid in part even when !loaded: see maxTsKnown
	closed  bool          // no more appends
	lastUse atomic.Uint64 // for unloading indexes of closed segments

	// maxTsKnown: ix.maxTs/maxTsOff are valid (always for the active
	// segment; for a closed segment once read from its time index).
	maxTsKnown bool

	idxFileMu    sync.Mutex
	oFile, tFile vfs.File // open index files of the active segment, nil otherwise
	flushedO     int      // entries of oidx already written to oFile
	flushedT     int
}

func (s *segment) name() string { return segmentName(s.base, logSuffix) }
func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base, suffix))
}

// rel converts an absolute offset of this segment to a relative one.
func (s *segment) rel(off int64) uint32 { return uint32(off - s.base) }

// fitsOffsets reports whether offsets up to last can be indexed relative to
// base (relative offsets are uint32).
func (s *segment) fitsOffsets(last int64) bool { return last-s.base < math.MaxUint32 }

// acquire takes a reference; it fails if the segment is being deleted.
func (s *segment) acquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes and removes a deleted
// segment's files.
func (s *segment) release(l *Log) {
	if s.refs.Add(-1) == 0 {
		s.destroy(l)
	}
}

// destroy closes the files and, if the segment was deleted, removes them:
// the .log first, so that a crash leaves at worst orphan index files, which
// open removes.
func (s *segment) destroy(l *Log) {
	s.closeFiles()
	if !s.deleted.Load() {
		return
	}
	var errs []error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := s.fs.Remove(s.path(suf)); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	if err := vfs.SyncDir(s.fs, s.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		l.logger.Error("removing deleted segment", "segment", s.name(), "err", err)
	}
}

func (s *segment) closeFiles() {
	s.idxFileMu.Lock()
	if s.oFile != nil {
		s.oFile.Close()
		s.oFile = nil
	}
	if s.tFile != nil {
		s.tFile.Close()
		s.tFile = nil
	}
	s.idxFileMu.Unlock()
	if s.f != nil {
		s.f.Close()
	}
}

// indexState is a segment's in-memory indexes and timestamp summary, and
// the logic that builds them batch by batch (appends, recovery scans and
// index rebuilds all go through note).
type indexState struct {
	base       int64
	oidx       offsetIndex
	tidx       timeIndex
	maxTs      int64 // largest batch maxTimestamp, -1 if none
	maxTsOff   int64 // base offset of the batch carrying maxTs, -1 if none
	lastIdxPos int64 // position of the last offset index entry (0: none)
}

func newIndexState(base int64) indexState {
	return indexState{base: base, maxTs: -1, maxTsOff: -1}
}

func (x *indexState) rel(off int64) uint32 { return uint32(off - x.base) }

// note records a batch at position pos. An offset index entry (and, if the
// max timestamp grew, a time index entry) is added when at least interval
// bytes follow the previous entry.
func (x *indexState) note(pos int64, h *batchHeader, interval int64) {
	if h.MaxTimestamp > x.maxTs {
		x.maxTs, x.maxTsOff = h.MaxTimestamp, h.BaseOffset
	}
	if pos > 0 && pos-x.lastIdxPos >= interval {
		x.oidx.add(x.rel(h.BaseOffset), uint32(pos))
		x.lastIdxPos = pos
		x.addTimeEntry()
	}
}

// addTimeEntry appends (maxTs, maxTsOff) to the time index if maxTs grew.
// Called for every offset index entry and when a segment is closed, so that
// a closed segment's last time entry is its max timestamp.
func (x *indexState) addTimeEntry() {
	if x.maxTs < 0 {
		return
	}
	if ts, _, ok := x.tidx.last(); ok && ts >= x.maxTs {
		return
	}
	x.tidx.add(x.maxTs, x.rel(x.maxTsOff))
}

// truncate drops the index state for bytes at or after pos / offsets at or
// after next, and resets the max timestamp to (maxTs, maxTsOff), the value
// for the bytes below pos.
func (x *indexState) truncate(pos, next, maxTs, maxTsOff int64) {
	x.oidx.truncatePos(pos)
	x.tidx.truncateRel(x.rel(next))
	x.lastIdxPos = x.oidx.lastPos()
	x.maxTs, x.maxTsOff = maxTs, maxTsOff
	if ts, rel, ok := x.tidx.last(); ok && ts > x.maxTs {
		x.maxTs, x.maxTsOff = ts, x.base+int64(rel)
	}
}

// flushIndexes writes the index entries not yet in the index files, limited
// to those pointing below position maxPos / offset maxNext (the part of the
// segment known durable), and fsyncs the files. It is a no-op for a segment
// whose index files are not open (closed segments are written whole on roll).
func (s *segment) flushIndexes(maxPos, maxNext int64) error {
	s.idxFileMu.Lock()
	defer s.idxFileMu.Unlock()
	if s.oFile == nil {
		return nil
	}
	s.mu.RLock()
	o := s.ix.oidx
	t := s.ix.tidx
	s.mu.RUnlock()
	// Entries below the limits (entries are sorted by both fields).
	no := o.len()
	for no > s.flushedO {
		if _, p := o.entry(no - 1); int64(p) < maxPos {
			break
		}
		no--
	}
	nt := t.len()
	for nt > s.flushedT {
		if _, r := t.entry(nt - 1); s.base+int64(r) < maxNext {
			break
		}
		nt--
	}
	if no > s.flushedO {
		if _, err := s.oFile.WriteAt(o.b[s.flushedO*offsetEntrySize:no*offsetEntrySize], int64(indexHeaderSize+s.flushedO*offsetEntrySize)); err != nil {
			return err
		}
	}
	if nt > s.flushedT {
		if _, err := s.tFile.WriteAt(t.b[s.flushedT*timeEntrySize:nt*timeEntrySize], int64(indexHeaderSize+s.flushedT*timeEntrySize)); err != nil {
			return err
		}
	}
	if err := s.oFile.Sync(); err != nil {
		return err
	}
	if err := s.tFile.Sync(); err != nil {
		return err
	}
	s.flushedO, s.flushedT = no, nt
	return nil
}

// writeIndexFiles writes both index files of s whole, atomically (temp +
// rename; the caller syncs the directory). seg.mu must not be held.
func (s *segment) writeIndexFiles() error {
	s.mu.RLock()
	o := append(indexHeader(offsetIndexMagic, s.base), s.ix.oidx.b...)
	t := append(indexHeader(timeIndexMagic, s.base), s.ix.tidx.b...)
	s.mu.RUnlock()
	for _, x := range []struct {
		suffix string
		data   []byte
	}{{indexSuffix, o}, {timeIndexSuffix, t}} {
		if err := vfs.ReplaceFile(s.fs, s.path(x.suffix), x.data); err != nil {
			return err
		}
	}
	return nil
}

// readFull reads len(p) bytes at off.
func readFull(f vfs.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
