package log

import (
	"errors"
	"fmt"
	"io"
	"sort"
)

// A Span is a range of one segment file holding whole batches, found by
// ReadSpan without reading the batches: the caller reads the bytes later,
// when it needs them (the broker's TLS write path reads each piece just
// before encrypting it, so that the copy into the TLS record reads from the
// CPU cache).
//
// Lifetime: a Span holds a reference to its segment (segment.refs, the
// mechanism every reader of the log uses). While it is held, the segment's
// file stays open and its bytes in the span stay as they are, even if
// retention deletes the segment, the cleaner swaps it for a compacted one,
// or the log is closed or its directory removed: the file is closed and
// removed only when the last reference is dropped (segment.release). The
// bytes of a span are below the high watermark, which a rollback never
// truncates. Call Release once, when done; a held Span keeps a deleted
// segment's file on disk, so hold it only while a response is written.
//
// A Span is not safe for concurrent use by several goroutines; ReadAt may
// be called any number of times before Release.
type Span struct {
	l    *Log
	seg  *segment
	pos  int64 // position of the first batch in the segment file
	n    int64 // bytes, whole batches
	next int64 // see NextOffset
}

// Len is the number of bytes in the span.
func (s *Span) Len() int64 { return s.n }

// NextOffset bounds the span's offsets: every batch in it ends below
// NextOffset, and the batch after it (if any) starts at or after it. It is
// one past the span's last offset, or (when the index let the walk skip
// that batch's header) the base offset of the batch after the span, as
// Kafka bounds the aborted-transaction lookup of a fetch.
func (s *Span) NextOffset() int64 { return s.next }

// ReadAt reads len(p) bytes of the span starting at off (relative to the
// span). Reading past the span's end is io.EOF. An error from the file
// wraps ErrStorage.
func (s *Span) ReadAt(p []byte, off int64) (int, error) {
	if s.seg == nil {
		return 0, errors.New("log: read of a released span")
	}
	if off < 0 || off > s.n {
		return 0, fmt.Errorf("log: span read at %d of %d bytes", off, s.n)
	}
	want := min(int64(len(p)), s.n-off)
	if err := readFull(s.seg.f, p[:want], s.pos+off); err != nil {
		return 0, storageErr("read "+s.seg.name(), err)
	}
	if want < int64(len(p)) {
		return int(want), io.EOF
	}
	return int(want), nil
}

// Release drops the span's reference to its segment. Later calls do
// nothing.
func (s *Span) Release() {
	if s.seg != nil {
		s.seg.release(s.l)
		s.seg = nil
	}
}

// SpanResult is the outcome of ReadSpan.
type SpanResult struct {
	// Span is nil when there is nothing to read.
	Span           *Span
	HighWatermark  int64
	LogStartOffset int64
}

// ReadSpan is Read without reading the data: it returns where the batches
// Read would return lie, in one segment file, as a Span holding that
// segment (see Span for its lifetime). Same offsets, limits and errors as
// Read; batch boundaries come from the offset index and the batch headers
// (a few small reads per call, independent of maxBytes).
func (l *Log) ReadSpan(offset int64, maxBytes int, upTo int64) (SpanResult, error) {
	var res SpanResult
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
			// As in Read: deleted by retention or swapped by the cleaner.
			if ls := l.logStart.Load(); offset < ls {
				return res, fmt.Errorf("%w: offset %d deleted by retention, log start %d", ErrOffsetOutOfRange, offset, ls)
			}
			if attempts++; attempts < maxReadSnapshots {
				goto snapshot
			}
			return res, fmt.Errorf("log: read of offset %d: the segment list changed %d times during the read", offset, attempts)
		}
		sp, found, err := l.spanSegment(seg, offset, maxBytes, upTo)
		if err != nil || !found || sp.n == 0 {
			seg.release(l)
			if err != nil {
				var ce *CorruptionError
				if errors.As(err, &ce) {
					l.logger.Error("corrupt batch on read", "segment", ce.Segment, "pos", ce.Offset, "err", err)
				}
				return res, err
			}
			if found {
				return res, nil // the next batch starts at or after upTo
			}
			continue
		}
		res.Span = sp
		return res, nil // the reference is the span's now
	}
	return res, nil
}

// spanSegment finds in seg the batches Read would return (seg held by the
// caller). found is false if seg holds no batch containing or after
// offset.
func (l *Log) spanSegment(seg *segment, offset int64, maxBytes int, upTo int64) (*Span, bool, error) {
	bp := l.getBuf(locateWindow)
	defer l.putBuf(bp)
	win := (*bp)[:locateWindow]
	start, err := l.locate(seg, offset, win)
	if err != nil || start < 0 {
		return nil, false, err
	}
	end := seg.size.Load()
	limit := start + int64(max(maxBytes, batchHeaderSize))
	sp := &Span{l: l, seg: seg, pos: start}
	p := start
	for p < end {
		if p > start {
			// Skip ahead with the index: every batch before the last
			// indexed batch at or before limit that starts below upTo
			// is whole, within limit and below upTo.
			if q, base, ok := seg.indexedBefore(limit, upTo); ok && q > p {
				p, sp.next = q, base
			}
		}
		w, err := readSome(seg.f, win[:min(int64(len(win)), end-p)], p)
		if err != nil {
			return nil, true, storageErr("read "+seg.name(), err)
		}
		if w < batchHeaderSize {
			// Past the written end: a rollback truncated bytes above
			// the high watermark while we looked. Nothing below it is
			// ever truncated.
			break
		}
		k := int64(0)
		stop := false
		for k+batchHeaderSize <= w {
			h := parseHeader(win[k:])
			if r := h.checkFraming(end - (p + k)); r != "" {
				return nil, true, &CorruptionError{Segment: seg.name(), Offset: p + k, Reason: r}
			}
			if h.BaseOffset >= upTo {
				stop = true
				break
			}
			if p+k+h.Size() > limit && p+k > start {
				stop = true
				break
			}
			// The first batch is taken whole even beyond limit.
			k += h.Size()
			sp.next = h.NextOffset()
			if p+k > limit {
				stop = true
				break
			}
		}
		p += k
		if stop {
			break
		}
	}
	sp.n = p - start
	return sp, true, nil
}

// indexedBefore returns the position and base offset of the last indexed
// batch of s that starts at or before pos with a base offset below upTo
// (false if none). Positions and offsets both increase along the index.
func (s *segment) indexedBefore(pos, upTo int64) (int64, int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := &s.ix.oidx
	n := x.len()
	i := sort.Search(n, func(i int) bool {
		rel, p := x.entry(i)
		return int64(p) > pos || s.base+int64(rel) >= upTo
	})
	if i == 0 {
		return 0, 0, false
	}
	rel, p := x.entry(i - 1)
	return int64(p), s.base + int64(rel), true
}
