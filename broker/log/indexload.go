package log

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/weirhq/weir/vfs"
)

// Index loading. The active segment's indexes are always in memory. A
// closed segment's are loaded on first use (so opening a large log reads no
// index), and at most Log.maxIndex closed segments keep theirs loaded, least
// recently used first out. A closed segment's max timestamp (for retention
// and timestamp lookups) is read from the last entry of its time index
// without loading the rest.

// ensureIndex loads seg's indexes if needed, rebuilding them from the log if
// they are missing or damaged.
func (l *Log) ensureIndex(seg *segment) error {
	seg.lastUse.Store(l.useTick.Add(1))
	seg.mu.RLock()
	ok := seg.loaded
	seg.mu.RUnlock()
	if ok {
		return nil
	}
	seg.mu.Lock()
	if seg.loaded {
		seg.mu.Unlock()
		return nil
	}
	ix, err := l.readIndexes(seg)
	var rebuilt bool
	if err != nil {
		l.logger.Warn("rebuilding index", "segment", seg.name(), "err", err)
		ix = newIndexState(seg.base)
		var nop nopLocker
		_, _, cerr, ioerr := scanSegment(seg, 0, seg.base, int64(l.config().IndexIntervalBytes), false, &ix, nop, nil)
		if ioerr != nil {
			seg.mu.Unlock()
			return storageErr("scan "+seg.name(), ioerr)
		}
		if cerr != nil {
			l.logger.Error("corrupt batch in closed segment; index covers the bytes before it", "err", cerr)
		}
		ix.addTimeEntry()
		rebuilt = true
	}
	seg.ix = ix
	seg.loaded, seg.maxTsKnown = true, true
	seg.mu.Unlock()
	if rebuilt {
		if err := seg.writeIndexFiles(); err != nil {
			l.logger.Warn("writing rebuilt index", "segment", seg.name(), "err", err)
		} else if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			l.logger.Warn("sync dir after index rebuild", "err", err)
		}
	}
	l.unloadIndexes()
	return nil
}

type nopLocker struct{}

func (nopLocker) Lock()   {}
func (nopLocker) Unlock() {}

// readIndexes reads and validates both index files of a closed segment.
func (l *Log) readIndexes(seg *segment) (indexState, error) {
	ix := newIndexState(seg.base)
	ob, err := vfs.ReadFile(l.fs, seg.path(indexSuffix))
	if err != nil {
		return ix, err
	}
	tb, err := vfs.ReadFile(l.fs, seg.path(timeIndexSuffix))
	if err != nil {
		return ix, err
	}
	if ix.oidx, err = parseOffsetIndex(ob, seg.base, seg.size.Load()); err != nil {
		return ix, &CorruptionError{Segment: segmentName(seg.base, indexSuffix), Reason: err.Error()}
	}
	if ix.tidx, err = parseTimeIndex(tb, seg.base); err != nil {
		return ix, &CorruptionError{Segment: segmentName(seg.base, timeIndexSuffix), Reason: err.Error()}
	}
	ix.lastIdxPos = ix.oidx.lastPos()
	if ts, rel, ok := ix.tidx.last(); ok {
		ix.maxTs, ix.maxTsOff = ts, seg.base+int64(rel)
	}
	return ix, nil
}

// segMaxTs returns the largest batch timestamp of seg and its batch's base
// offset (-1, -1 if none).
func (l *Log) segMaxTs(seg *segment) (int64, int64, error) {
	seg.mu.RLock()
	known, ts, off := seg.maxTsKnown, seg.ix.maxTs, seg.ix.maxTsOff
	seg.mu.RUnlock()
	if known {
		return ts, off, nil
	}
	ts, off, err := l.readLastTimeEntry(seg)
	if err != nil {
		l.logger.Warn("time index unreadable, loading it whole", "segment", seg.name(), "err", err)
		if err := l.ensureIndex(seg); err != nil {
			return -1, -1, err
		}
		seg.mu.RLock()
		defer seg.mu.RUnlock()
		return seg.ix.maxTs, seg.ix.maxTsOff, nil
	}
	seg.mu.Lock()
	if !seg.maxTsKnown {
		seg.ix.maxTs, seg.ix.maxTsOff, seg.maxTsKnown = ts, off, true
	}
	seg.mu.Unlock()
	return ts, off, nil
}

// readLastTimeEntry reads the header and last entry of seg's time index.
func (l *Log) readLastTimeEntry(seg *segment) (int64, int64, error) {
	f, err := l.fs.Open(seg.path(timeIndexSuffix))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size := st.Size()
	if size < indexHeaderSize || (size-indexHeaderSize)%timeEntrySize != 0 {
		return 0, 0, fmt.Errorf("time index size %d", size)
	}
	var hb [indexHeaderSize]byte
	if err := readFull(f, hb[:], 0); err != nil {
		return 0, 0, err
	}
	if _, err := checkIndexHeader(hb[:], timeIndexMagic, seg.base, timeEntrySize); err != nil {
		return 0, 0, err
	}
	if size == indexHeaderSize {
		return -1, -1, nil
	}
	var eb [timeEntrySize]byte
	if err := readFull(f, eb[:], size-timeEntrySize); err != nil {
		return 0, 0, err
	}
	ts := int64(binary.BigEndian.Uint64(eb[:]))
	if ts < 0 {
		return 0, 0, fmt.Errorf("negative timestamp in time index")
	}
	return ts, seg.base + int64(binary.BigEndian.Uint32(eb[8:])), nil
}

// indexBudget bounds the bytes of loaded closed-segment indexes per log
// (the most recently used one always stays). With the active segment's
// index (at most 20 bytes per 4 KiB of a 1 GiB segment: 5 MiB) a log holds
// at most ~21 MiB of index in memory whatever its size.
const indexBudget = 16 << 20

// unloadIndexes drops the indexes of the least recently used closed
// segments beyond indexBudget.
func (l *Log) unloadIndexes() {
	segs := l.segments()
	type loadedSeg struct {
		s     *segment
		bytes int
	}
	var loaded []loadedSeg
	total := 0
	for _, s := range segs {
		s.mu.RLock()
		if s.loaded && s.closed {
			n := len(s.ix.oidx.b) + len(s.ix.tidx.b)
			loaded = append(loaded, loadedSeg{s, n})
			total += n
		}
		s.mu.RUnlock()
	}
	if total <= l.indexBudget || len(loaded) <= 1 {
		return
	}
	sort.Slice(loaded, func(i, j int) bool { return loaded[i].s.lastUse.Load() > loaded[j].s.lastUse.Load() })
	kept := 0
	for i, x := range loaded {
		if i == 0 || kept+x.bytes <= l.indexBudget {
			kept += x.bytes
			continue
		}
		x.s.mu.Lock()
		if x.s.closed {
			x.s.loaded = false
			x.s.ix.oidx, x.s.ix.tidx = offsetIndex{}, timeIndex{}
		}
		x.s.mu.Unlock()
	}
}

// indexBytes is the memory held by loaded indexes (all segments).
func (l *Log) indexBytes() int {
	n := 0
	for _, s := range l.segments() {
		s.mu.RLock()
		n += len(s.ix.oidx.b) + len(s.ix.tidx.b)
		s.mu.RUnlock()
	}
	return n
}
