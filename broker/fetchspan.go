package broker

import (
	"fmt"
	"io"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
)

// Fetch over TLS reads the records late (issue 20, docs/bench/tls.md).
//
// Over PLAINTEXT the fetch handler preads each partition's record set
// into a pooled buffer and the write loop hands the buffers to the kernel
// with one writev; the kernel's copy reads them once. Over TLS, crypto/tls
// copies every plaintext byte into its record buffer before sealing it in
// place, and that copy read the buffers cold: a response holds up to
// 12 MiB (1 MiB a partition), read by the handler well before the write
// loop gets to it. So on a TLS connection the handler reads no record
// bytes: it asks the log for spans (wlog.ReadSpan: segment, position,
// length; whole batches, the same ones Read would return) and the write
// loop reads each span in spanPiece pieces into one reused buffer, each
// just before crypto/tls copies and seals it, from the CPU cache.
//
// A span holds its segment (the log's reader references): retention,
// compaction or the topic's deletion while the response waits to be
// written does not change the bytes it serves; the segment's file is
// closed and removed once the response is written (or dropped). A read
// error while writing (the disk failing) closes the connection: the client
// sees a broken connection, never wrong bytes, and fetches again.
//
// PLAINTEXT connections keep reading in the handler: their writev needs
// the bytes in memory anyway, and reads them once.

// spanKey names a partition of a Fetch response (unique in a response).
type spanKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// addSpan records that the response's partition k has its records in sp
// (its RecordBatches are empty until written). Handler only, like
// onWritten.
func (s *slot) addSpan(k spanKey, sp *wlog.Span) {
	if s.spans == nil {
		s.spans = map[spanKey]*wlog.Span{}
	}
	s.spans[k] = sp
}

// spanOf is the span holding the records of partition p of topic t of a
// Fetch response, or nil.
func (s *slot) spanOf(t *kmsg.FetchResponseTopic, p *kmsg.FetchResponseTopicPartition) *wlog.Span {
	if s.spans == nil {
		return nil
	}
	return s.spans[spanKey{t.Topic, t.TopicID, p.Partition}]
}

// partRead is one partition's read: bytes, or a span of the log.
type partRead struct {
	data         []byte
	span         *wlog.Span
	size         int64
	hw, logStart int64
	release      func()
}

// end is one past the last offset read (a span: its NextOffset bound),
// or -1 if nothing was read. It bounds the aborted-transaction lookup of a
// read_committed fetch.
func (r partRead) end() int64 {
	if r.span != nil {
		return r.span.NextOffset()
	}
	return readEnd(r.data)
}

// readPart reads a partition as Log.Read does, or as Log.ReadSpan when
// spans is set. release is never nil.
func readPart(l *wlog.Log, offset int64, maxBytes int, upTo int64, spans bool) (partRead, error) {
	if !spans {
		rr, err := l.Read(offset, maxBytes, upTo)
		r := partRead{data: rr.Data, size: int64(len(rr.Data)), hw: rr.HighWatermark, logStart: rr.LogStartOffset, release: rr.Release}
		if r.release == nil {
			r.release = func() {}
		}
		return r, err
	}
	sr, err := l.ReadSpan(offset, maxBytes, upTo)
	r := partRead{span: sr.Span, hw: sr.HighWatermark, logStart: sr.LogStartOffset, release: func() {}}
	if sr.Span != nil {
		r.size, r.release = sr.Span.Len(), sr.Span.Release
	}
	return r, err
}

// spanPiece is how much of a span the write loop reads at a time: small
// enough to stay in the L2 cache until crypto/tls has copied it, large
// enough that the reads cost little. In BenchmarkFetchWriteCPU 256 KiB to
// 1 MiB pieces were alike, 128 KiB slightly and 64 KiB clearly dearer
// (more reads), 16 KiB no better than reading ahead.
const spanPiece = 256 << 10

var spanPiecePool = sync.Pool{New: func() any {
	b := make([]byte, spanPiece)
	return &b
}}

// writeSpan writes the bytes of sp to w, a piece at a time. Write loop
// only.
func writeSpan(w io.Writer, sp *wlog.Span) (int64, error) {
	bp := spanPiecePool.Get().(*[]byte)
	defer spanPiecePool.Put(bp)
	var n int64
	for off := int64(0); off < sp.Len(); {
		p := (*bp)[:min(int64(len(*bp)), sp.Len()-off)]
		if _, err := sp.ReadAt(p, off); err != nil {
			return n, fmt.Errorf("fetch: read records to write: %w", err)
		}
		m, err := w.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
		off += int64(len(p))
	}
	return n, nil
}

// materializeSpans reads every span of a response into its RecordBatches,
// for a write that needs the bytes in memory (the plain encoding, when a
// vectored write is not possible). The buffers are garbage once written.
func materializeSpans(s *slot, resp *kmsg.FetchResponse) error {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			sp := s.spanOf(t, p)
			if sp == nil {
				continue
			}
			b := make([]byte, sp.Len())
			if _, err := sp.ReadAt(b, 0); err != nil {
				return fmt.Errorf("fetch: read records to write: %w", err)
			}
			p.RecordBatches = b
		}
	}
	s.spans = nil
	return nil
}
