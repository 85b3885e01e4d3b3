package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// Read returns whole batches starting with the batch containing offset (which
// may begin before offset, as in Kafka), up to maxBytes, but at least one
// whole batch even if it is larger, and never a batch starting at or beyond
// upTo (pass HighWatermark(), or the LSO for read_committed). Data is empty
// when offset >= upTo. A read outside [LogStartOffset, LogEndOffset] fails
// with ErrOffsetOutOfRange; as in Kafka, an offset between the high
// watermark and the log end (appended, not yet synced) reads nothing. Data
// is copied into a pooled buffer; call
// Release when done with it.
//
// Reads do not recheck CRCs (appends and recovery do; consumers verify them
// too); a malformed batch header found while reading is a *CorruptionError.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) (ReadResult, error) {
	res := ReadResult{Release: func() {}}
	if l.closed.Load() {
		return res, ErrClosed
	}
	hw, ls := l.hw.Load(), l.logStart.Load()
	res.HighWatermark, res.LogStartOffset = hw, ls
	if offset < ls || offset > max(hw, l.leo.Load()) {
		return res, fmt.Errorf("%w: offset %d, log start %d, log end %d", ErrOffsetOutOfRange, offset, ls, l.leo.Load())
	}
	upTo = min(upTo, hw)
	if offset >= upTo {
		return res, nil
	}
	attempts := 0
snapshot:
	segs := l.segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	for ; i < len(segs) && segs[i].base < upTo; i++ {
		seg := segs[i]
		if !seg.acquire() {
			// The segment left the list since the snapshot: deleted by
			// retention (the offset is then below the log start) or replaced
			// by a cleaner swap, whose new segments hold the offset's data
			// (or the next offsets): take a fresh snapshot and read those.
			if ls := l.logStart.Load(); offset < ls {
				return res, fmt.Errorf("%w: offset %d deleted by retention, log start %d", ErrOffsetOutOfRange, offset, ls)
			}
			if attempts++; attempts < maxReadSnapshots {
				goto snapshot
			}
			return res, fmt.Errorf("log: read of offset %d: the segment list changed %d times during the read", offset, attempts)
		}
		buf, n, err := l.readSegment(seg, offset, maxBytes, upTo)
		seg.release(l)
		if err != nil {
			var ce *CorruptionError
			if errors.As(err, &ce) {
				l.logger.Error("corrupt batch on read", "segment", ce.Segment, "pos", ce.Offset, "err", err)
			}
			return res, err
		}
		if buf != nil {
			if n == 0 {
				l.putBuf(buf)
				return res, nil
			}
			res.Data = (*buf)[:n]
			res.Release = func() { l.putBuf(buf) }
			return res, nil
		}
	}
	return res, nil
}

// maxReadSnapshots bounds how often one Read takes a new snapshot of the
// segment list after a segment of its snapshot was swapped out under it.
const maxReadSnapshots = 64

// segments returns a snapshot of the segment list.
func (l *Log) segments() []*segment {
	l.segsMu.RLock()
	defer l.segsMu.RUnlock()
	return l.segs
}

// locate returns the position of the first batch of seg whose last offset is
// >= offset, or -1 if there is none.
func (l *Log) locate(seg *segment, offset int64, buf []byte) (int64, error) {
	if err := l.ensureIndex(seg); err != nil {
		return 0, err
	}
	seg.mu.RLock()
	pos := int64(0)
	if offset > seg.base {
		pos = seg.ix.oidx.lookup(seg.rel(min(offset, seg.base+math.MaxUint32)))
	}
	seg.mu.RUnlock()
	end := seg.size.Load()
	for pos < end {
		w, err := readSome(seg.f, buf[:min(int64(len(buf)), end-pos)], pos)
		if err != nil {
			return 0, storageErr("read "+seg.name(), err)
		}
		k := int64(0)
		for k+batchHeaderSize <= w {
			h := parseHeader(buf[k:])
			if r := h.checkFraming(end - (pos + k)); r != "" {
				return 0, &CorruptionError{Segment: seg.name(), Offset: pos + k, Reason: r}
			}
			if h.LastOffset() >= offset {
				return pos + k, nil
			}
			k += h.Size()
		}
		if k == 0 {
			return 0, &CorruptionError{Segment: seg.name(), Offset: pos, Reason: "truncated batch header"}
		}
		pos += k
	}
	return -1, nil
}

// readSegment reads from seg as Read describes. It returns a nil buffer if
// seg holds no batch containing or after offset.
func (l *Log) readSegment(seg *segment, offset int64, maxBytes int, upTo int64) (*[]byte, int, error) {
	want := int64(max(maxBytes, batchHeaderSize))
	bp := l.getBuf(locateWindow)
	start, err := l.locate(seg, offset, (*bp)[:locateWindow])
	if err != nil || start < 0 {
		l.putBuf(bp)
		return nil, 0, err
	}
	end := seg.size.Load()
	// Size the buffer to what can be returned, not to maxBytes (a fetch
	// may allow 50 MiB of a partition holding a few KiB).
	want = min(want, end-start)
	if int64(cap(*bp)) < want {
		l.putBuf(bp)
		bp = l.getBuf(int(want))
	}
	buf := *bp
	n, err := readSome(seg.f, buf[:want], start)
	if err != nil {
		l.putBuf(bp)
		return nil, 0, storageErr("read "+seg.name(), err)
	}
	take := int64(0)
	for take+batchHeaderSize <= n {
		h := parseHeader(buf[take:])
		if r := h.checkFraming(end - (start + take)); r != "" {
			l.putBuf(bp)
			return nil, 0, &CorruptionError{Segment: seg.name(), Offset: start + take, Reason: r}
		}
		if h.BaseOffset >= upTo || take+h.Size() > n {
			break
		}
		take += h.Size()
	}
	if take == 0 {
		// The first batch does not fit in maxBytes: return it whole.
		if n < batchHeaderSize {
			l.putBuf(bp)
			return nil, 0, storageErr("read "+seg.name(), io.ErrUnexpectedEOF)
		}
		h := parseHeader(buf)
		if h.BaseOffset >= upTo {
			return bp, 0, nil
		}
		size := h.Size()
		if int64(cap(buf)) < size {
			l.putBuf(bp)
			nb := make([]byte, size)
			bp = &nb
		}
		buf = (*bp)[:size]
		*bp = buf
		if err := readFull(seg.f, buf, start); err != nil {
			l.putBuf(bp)
			return nil, 0, storageErr("read "+seg.name(), err)
		}
		take = size
	}
	return bp, int(take), nil
}

// readSome reads up to len(p) bytes at off and returns how many it got. A
// short read at the end of the file is not an error: the bytes past the
// high watermark may be truncated by a rollback while a reader looks at
// them; only whole batches below the high watermark (synced, never
// truncated) are served.
func readSome(f vfsFile, p []byte, off int64) (int64, error) {
	n, err := f.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return int64(n), nil
}

// locateWindow is the read size used to walk batch headers from an index
// entry to the batch wanted (about one index interval).
const locateWindow = 8192

// Read buffers are pooled in power-of-two size classes from minPooledBuf
// to maxPooledBuf; larger ones are allocated and dropped.
const (
	minPooledShift = 13 // 8 KiB
	maxPooledShift = 23 // 8 MiB
	numBufClasses  = maxPooledShift - minPooledShift + 1
)

// bufClass returns the size class holding n bytes, or -1 if n is too large.
func bufClass(n int) int {
	c := 0
	for size := 1 << minPooledShift; size < n; size <<= 1 {
		c++
	}
	if c >= numBufClasses {
		return -1
	}
	return c
}

func (l *Log) getBuf(n int) *[]byte {
	c := bufClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if p, ok := l.bufPools[c].Get().(*[]byte); ok {
		*p = (*p)[:cap(*p)]
		return p
	}
	b := make([]byte, 1<<(minPooledShift+c))
	return &b
}

func (l *Log) putBuf(p *[]byte) {
	n := cap(*p)
	if c := bufClass(n); c >= 0 && n == 1<<(minPooledShift+c) {
		l.bufPools[c].Put(p)
	}
}

// OffsetForTimestamp returns the earliest offset whose record timestamp is
// >= ts, and that timestamp (Kafka ListOffsets semantics), considering only
// [LogStartOffset, HighWatermark). It returns (-1, -1, nil) if there is none.
// Compressed batches are decompressed to find the record; only a batch whose
// records cannot be walked (damaged) stands as a whole (its first offset
// and max timestamp).
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, err error) {
	if l.closed.Load() {
		return -1, -1, ErrClosed
	}
	attempts := 0
snapshot:
	hw, ls := l.hw.Load(), l.logStart.Load()
	segs := l.segments()
	for i, seg := range segs {
		if i+1 < len(segs) && segs[i+1].base <= ls {
			continue
		}
		if seg.base >= hw {
			break
		}
		if !seg.acquire() {
			// Swapped out by the cleaner or deleted by retention since the
			// snapshot: skipping it could answer a later offset than the
			// earliest; scan a fresh snapshot instead.
			if attempts++; attempts < maxReadSnapshots {
				goto snapshot
			}
			return -1, -1, fmt.Errorf("log: offset for timestamp %d: the segment list changed %d times during the scan", ts, attempts)
		}
		off, t, found, err := l.findTimestamp(seg, ts, ls, hw)
		seg.release(l)
		if err != nil {
			return -1, -1, err
		}
		if found {
			return off, t, nil
		}
	}
	return -1, -1, nil
}

// findTimestamp looks for the first record with timestamp >= ts in seg.
func (l *Log) findTimestamp(seg *segment, ts, ls, hw int64) (int64, int64, bool, error) {
	mts, _, err := l.segMaxTs(seg)
	if err != nil {
		return 0, 0, false, err
	}
	if mts < ts {
		return 0, 0, false, nil
	}
	if err := l.ensureIndex(seg); err != nil {
		return 0, 0, false, err
	}
	seg.mu.RLock()
	pos := int64(0)
	if rel, ok := seg.ix.tidx.before(ts); ok {
		pos = seg.ix.oidx.lookup(rel)
	}
	seg.mu.RUnlock()
	end := seg.size.Load()
	r := newChunkReader(seg.f, 64<<10, end)
	for pos < end {
		hb, err := r.get(pos, batchHeaderSize)
		if err != nil {
			return 0, 0, false, storageErr("read "+seg.name(), err)
		}
		h := parseHeader(hb)
		if reason := h.checkFraming(end - pos); reason != "" {
			return 0, 0, false, &CorruptionError{Segment: seg.name(), Offset: pos, Reason: reason}
		}
		if h.BaseOffset >= hw {
			return -1, -1, true, nil // nothing visible at or after ts
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= ls {
			b, err := r.get(pos, int(h.Size()))
			if err != nil {
				return 0, 0, false, storageErr("read "+seg.name(), err)
			}
			var fo, ft int64
			found := false
			walked := recordTimestamps(b, &l.codecs, func(o, t int64) bool {
				if o >= ls && t >= ts {
					fo, ft, found = o, t, true
					return false
				}
				return true
			})
			if !walked {
				return max(h.BaseOffset, ls), h.MaxTimestamp, true, nil
			}
			if found {
				return fo, ft, true, nil
			}
		}
		pos += h.Size()
	}
	return 0, 0, false, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp below the high watermark (ListOffsets -3), or (-1, -1)
// if there is none. Compressed batches are decompressed to find the record
// (a batch whose records cannot be walked answers with its last offset).
func (l *Log) MaxTimestamp() (offset, timestamp int64) {
	if l.closed.Load() {
		return -1, -1
	}
	attempts := 0
snapshot:
	l.syncMu.Lock()
	vis := l.synced
	if l.policy == SyncInterval {
		vis = l.written
	}
	l.syncMu.Unlock()
	ls := l.logStart.Load()
	segs := l.segments()
	bestTs, bestOff := int64(-1), int64(-1)
	var bestSeg *segment
	for i, seg := range segs {
		if i+1 < len(segs) && segs[i+1].base <= ls {
			continue
		}
		var ts, off int64
		if i == len(segs)-1 {
			if vis.seg != seg {
				continue
			}
			ts, off = vis.maxTs, vis.maxTsOff
		} else {
			var err error
			if ts, off, err = l.segMaxTs(seg); err != nil {
				l.logger.Warn("max timestamp of segment", "segment", seg.name(), "err", err)
				continue
			}
		}
		if ts > bestTs {
			bestTs, bestOff, bestSeg = ts, off, seg
		}
	}
	if bestSeg == nil {
		return -1, -1
	}
	if !bestSeg.acquire() {
		// Swapped out by the cleaner or deleted by retention since the
		// snapshot: look again rather than answer "no records".
		if attempts++; attempts < maxReadSnapshots {
			goto snapshot
		}
		return -1, -1
	}
	defer bestSeg.release(l)
	bp, n, err := l.readSegment(bestSeg, bestOff, 1, math.MaxInt64)
	if err != nil || bp == nil || n == 0 {
		return bestOff, bestTs
	}
	defer l.putBuf(bp)
	b := (*bp)[:n]
	h := parseHeader(b)
	recOff := h.LastOffset()
	recordTimestamps(b, &l.codecs, func(o, t int64) bool {
		if t == bestTs {
			recOff = o
			return false
		}
		return true
	})
	return recOff, bestTs
}
