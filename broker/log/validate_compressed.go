package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
)

// Validation of compressed batches. Kafka walks every record of a produced
// compressed batch (counts, offset deltas, framing, timestamps) and so does
// the log; what makes it cheap:
//
//   - a raw snappy block (franz-go's and librdkafka's snappy) is decoded in
//     one call into a pooled buffer and checked in place, exactly as an
//     uncompressed batch (checkRecords): no per-record copy;
//   - the other codecs (gzip, lz4, zstd, the Java client's xerial snappy)
//     are streamed through a pooled decompressor and bufio.Reader, and each
//     record's key, value and headers are skipped (bufio Discard) rather
//     than copied out, as Kafka's skip-key-value iterator does. Memory stays
//     at the bufio buffer whatever the compression ratio.

// maxPooledSnappy bounds the decoded snappy buffers kept for reuse: a rare
// huge batch does not pin its buffer.
const maxPooledSnappy = 4 << 20

// checkCompressedRecords validates the records of a compressed batch as
// checkRecords does for uncompressed ones, and returns their timestamps'
// range.
func (c *codecs) checkCompressedRecords(b []byte, h batchHeader) (tsRange, error) {
	payload := b[batchHeaderSize:]
	if h.Compression() == codecSnappy && !(len(payload) >= 16 && bytes.Equal(payload[:8], xerialMagic)) {
		recs, release, err := c.snappyDecode(payload)
		if err != nil {
			return tsRange{}, batchErr("decompress: %v", err)
		}
		defer release()
		return checkRecords(recs, h)
	}
	br, release, err := c.records(h.Compression(), payload)
	if err != nil {
		return tsRange{}, batchErr("decompress: %v", err)
	}
	defer release()
	return checkRecordStream(br, h)
}

// snappyDecode decodes one raw snappy block into a pooled buffer, after
// checking its declared length against snappy's largest expansion. The
// bytes are valid until release.
func (c *codecs) snappyDecode(p []byte) ([]byte, func(), error) {
	n, err := s2.DecodedLen(p)
	if err != nil {
		return nil, nil, err
	}
	if n > 32*len(p)+64 {
		return nil, nil, fmt.Errorf("snappy block claims %d bytes from %d", n, len(p))
	}
	bp, _ := c.snap.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	release := func() {
		if cap(*bp) <= maxPooledSnappy {
			c.snap.Put(bp)
		}
	}
	out, err := s2.Decode((*bp)[:n], p)
	if err != nil {
		release()
		return nil, nil, err
	}
	return out, release, nil
}

// checkRecordStream checks h.NumRecords records read from r (a batch's
// decompressed records) as checkRecords does, skipping key, value and
// header bytes; the stream must end after the last record.
func checkRecordStream(r *bufio.Reader, h batchHeader) (tsRange, error) {
	tr := newTsRange()
	for n := int32(0); n < h.NumRecords; n++ {
		length, _, err := readVarint(r)
		if err != nil || length < 1 || length > 1<<31 {
			return tsRange{}, batchErr("record %d: bad length", n)
		}
		rs := recordStream{r: r, left: length}
		tsDelta, offDelta, reason := rs.check()
		if reason != "" {
			return tsRange{}, batchErr("record %d: %s", n, reason)
		}
		if offDelta != int64(n) {
			return tsRange{}, batchErr("record %d has offset delta %d", n, offDelta)
		}
		ts := h.FirstTimestamp + tsDelta
		if (tsDelta > 0 && ts < h.FirstTimestamp) || (tsDelta < 0 && ts > h.FirstTimestamp) || ts < -1 {
			return tsRange{}, batchErr("record %d: timestamp out of range", n)
		}
		tr.add(ts)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		if err != nil {
			return tsRange{}, batchErr("decompress: %v", err)
		}
		return tsRange{}, batchErr("bytes after the last record")
	}
	return tr, nil
}

// recordStream reads the fields of one record body of left bytes from r.
type recordStream struct {
	r    *bufio.Reader
	left int64
}

// check reads the record's fields (checkRecord's checks) and returns its
// deltas, or a reason.
func (s *recordStream) check() (tsDelta, offDelta int64, reason string) {
	if _, err := s.r.ReadByte(); err != nil {
		return 0, 0, "truncated"
	}
	s.left-- // attributes; length >= 1
	if tsDelta, reason = s.varint("timestamp delta"); reason != "" {
		return 0, 0, reason
	}
	if offDelta, reason = s.varint("offset delta"); reason != "" {
		return 0, 0, reason
	}
	if reason = s.skipBytes("key", true); reason != "" {
		return 0, 0, reason
	}
	if reason = s.skipBytes("value", true); reason != "" {
		return 0, 0, reason
	}
	nh, reason := s.varint("header count")
	if reason != "" {
		return 0, 0, reason
	}
	if nh < 0 || nh > s.left {
		return 0, 0, "bad header count"
	}
	for range nh {
		if reason = s.skipBytes("header key", false); reason != "" {
			return 0, 0, reason
		}
		if reason = s.skipBytes("header value", true); reason != "" {
			return 0, 0, reason
		}
	}
	if s.left != 0 {
		return 0, 0, "record length does not match its fields"
	}
	return tsDelta, offDelta, ""
}

func (s *recordStream) varint(what string) (int64, string) {
	v, m, err := readVarint(s.r)
	if err != nil || int64(m) > s.left {
		return 0, "bad varint in " + what
	}
	s.left -= int64(m)
	return v, ""
}

// skipBytes skips a length-prefixed field (-1: null, if nullable).
func (s *recordStream) skipBytes(what string, nullable bool) string {
	l, m, err := readVarint(s.r)
	if err != nil || int64(m) > s.left {
		return "bad varint in " + what + " length"
	}
	s.left -= int64(m)
	if l == -1 && nullable {
		return ""
	}
	if l < 0 || l > s.left {
		return "bad " + what + " length"
	}
	if _, err := s.r.Discard(int(l)); err != nil {
		return "truncated " + what
	}
	s.left -= l
	return ""
}

var errVarint = errors.New("bad varint")

// readVarint reads a zig-zag varint (up to 64 bits) and the bytes it took.
func readVarint(r io.ByteReader) (int64, int, error) {
	var u uint64
	for i := 0; i < 10; i++ {
		c, err := r.ReadByte()
		if err != nil {
			return 0, i, err
		}
		if i == 9 && c > 1 {
			return 0, i + 1, errVarint
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1, nil
		}
	}
	return 0, 10, errVarint
}
