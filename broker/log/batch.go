package log

import (
	"encoding/binary"
	"errors"
	"math"
)

// maxCompressionCodec is zstd (4); 5..7 are undefined.
const maxCompressionCodec = 4

// checkFraming checks what can be checked from a batch header alone: the
// length field is plausible (and, if avail >= 0, fits in avail bytes), magic
// is 2 and the offset delta is not negative. It returns a reason or "".
// The base offset is not checked: a producer's is ignored, and stored ones
// are checked against the expected offset by the caller.
func (h *batchHeader) checkFraming(avail int64) string {
	switch {
	case h.Length < batchHeaderSize-logOverhead:
		return "batch length too small"
	case avail >= 0 && h.Size() > avail:
		return "batch length beyond end of data"
	case h.Magic != 2:
		return "magic is not 2"
	case h.LastOffsetDelta < 0:
		return "negative lastOffsetDelta"
	}
	return ""
}

// validated is the outcome of validating one batch.
type validated struct {
	hdr batchHeader
	// recordsMaxTimestamp is the largest record timestamp (-1 if every
	// record has none); recordsMinTimestamp the smallest one other than -1
	// (math.MaxInt64 if none): what message.timestamp.*.max.ms check.
	recordsMaxTimestamp int64
	recordsMinTimestamp int64
	// controlType and coordEpoch: the marker of a control batch (-1 else).
	controlType int16
	coordEpoch  int32
}

// validateBatch fully checks one RecordBatch v2 occupying exactly b:
// framing, magic, CRC-32C, attributes, producer fields, record count against
// lastOffsetDelta and (for uncompressed batches) against the records
// actually present, each record's framing and offset delta, and timestamps
// (none below -1). The error wraps ErrCorruptBatch.
//
// Compressed batches are decompressed (streamed, see compress.go) for the
// same record checks; c pools the decompressors (nil: fresh ones).
func validateBatch(b []byte, c *codecs) (validated, error) {
	if len(b) < batchHeaderSize {
		return validated{}, batchErr("batch shorter than header (%d bytes)", len(b))
	}
	h := parseHeader(b)
	if r := h.checkFraming(int64(len(b))); r != "" {
		return validated{}, batchErr("%s", r)
	}
	if h.Size() != int64(len(b)) {
		return validated{}, batchErr("batch length %d does not match %d bytes", h.Length, len(b))
	}
	if c := BatchCRC(b); c != h.CRC {
		return validated{}, batchErr("crc mismatch: stored %08x, computed %08x", h.CRC, c)
	}
	if h.Compression() > maxCompressionCodec {
		return validated{}, batchErr("unknown compression codec %d", h.Compression())
	}
	if h.NumRecords <= 0 {
		return validated{}, batchErr("batch has %d records", h.NumRecords)
	}
	if int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return validated{}, batchErr("record count %d inconsistent with lastOffsetDelta %d", h.NumRecords, h.LastOffsetDelta)
	}
	// A producer id with base sequence -1 is a coordinator's batch (a
	// marker, or the group coordinator's transactional offsets): no
	// sequence. The broker refuses it from clients.
	if h.ProducerID >= 0 && h.BaseSequence < -1 {
		return validated{}, batchErr("producer id %d with negative base sequence", h.ProducerID)
	}
	if h.Attributes&attrTransactional != 0 && h.ProducerID < 0 {
		return validated{}, batchErr("transactional batch without producer id")
	}
	if h.FirstTimestamp < -1 || h.MaxTimestamp < -1 {
		return validated{}, batchErr("timestamp below -1")
	}
	v := validated{hdr: h, recordsMaxTimestamp: h.MaxTimestamp, recordsMinTimestamp: math.MaxInt64, controlType: -1, coordEpoch: -1}
	if h.Attributes&attrControl != 0 {
		typ, ce, reason := parseControl(b)
		if reason != "" {
			return validated{}, batchErr("%s", reason)
		}
		if h.BaseSequence != -1 {
			return validated{}, batchErr("control batch with base sequence %d", h.BaseSequence)
		}
		v.controlType, v.coordEpoch = typ, ce
	}
	if h.Compression() != codecNone {
		if c == nil {
			c = &codecs{}
		}
		ts, err := c.checkCompressedRecords(b, h)
		if err != nil {
			return validated{}, err
		}
		v.recordsMinTimestamp, v.recordsMaxTimestamp = ts.min, ts.max
		return v, nil
	}
	ts, err := checkRecords(b[batchHeaderSize:], h)
	if err != nil {
		return validated{}, err
	}
	v.recordsMinTimestamp, v.recordsMaxTimestamp = ts.min, ts.max
	return v, nil
}

// tsRange is the range of a batch's record timestamps: max is -1 and min
// math.MaxInt64 when no record has one (all -1); min ignores -1.
type tsRange struct{ min, max int64 }

func newTsRange() tsRange { return tsRange{min: math.MaxInt64, max: -1} }

func (r *tsRange) add(ts int64) {
	r.max = max(r.max, ts)
	if ts != -1 {
		r.min = min(r.min, ts)
	}
}

// checkRecords walks the uncompressed records of a batch and returns the
// range of their timestamps.
func checkRecords(b []byte, h batchHeader) (tsRange, error) {
	tr := newTsRange()
	i := 0
	for n := int32(0); n < h.NumRecords; n++ {
		length, m := varint(b[i:])
		if m <= 0 || length < 1 || length > int64(len(b)-i-m) {
			return tsRange{}, batchErr("record %d: bad length", n)
		}
		i += m
		rec := b[i : i+int(length)]
		i += int(length)
		tsDelta, offDelta, err := checkRecord(rec)
		if err != nil {
			return tsRange{}, batchErr("record %d: %s", n, err.reason)
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
	if i != len(b) {
		return tsRange{}, batchErr("%d bytes after the last record", len(b)-i)
	}
	return tr, nil
}

type recordErr struct{ reason string }

// checkRecord checks the framing of one record body (after its length) and
// returns its timestamp and offset deltas.
func checkRecord(rec []byte) (tsDelta, offDelta int64, _ *recordErr) {
	if len(rec) < 1 {
		return 0, 0, &recordErr{"empty"}
	}
	i := 1 // attributes
	next := func(what string) (int64, *recordErr) {
		v, m := varint(rec[i:])
		if m <= 0 {
			return 0, &recordErr{"bad varint in " + what}
		}
		i += m
		return v, nil
	}
	bytesField := func(what string, nullable bool) *recordErr {
		// The length's varint is read here rather than by next, so that a
		// valid record builds no error text.
		l, m := varint(rec[i:])
		if m <= 0 {
			return &recordErr{"bad varint in " + what + " length"}
		}
		i += m
		if l == -1 && nullable {
			return nil
		}
		if l < 0 || l > int64(len(rec)-i) {
			return &recordErr{"bad " + what + " length"}
		}
		i += int(l)
		return nil
	}
	var err *recordErr
	if tsDelta, err = next("timestamp delta"); err != nil {
		return 0, 0, err
	}
	if offDelta, err = next("offset delta"); err != nil {
		return 0, 0, err
	}
	if err = bytesField("key", true); err != nil {
		return 0, 0, err
	}
	if err = bytesField("value", true); err != nil {
		return 0, 0, err
	}
	nh, err := next("header count")
	if err != nil {
		return 0, 0, err
	}
	if nh < 0 || nh > int64(len(rec)) {
		return 0, 0, &recordErr{"bad header count"}
	}
	for j := int64(0); j < nh; j++ {
		if err = bytesField("header key", false); err != nil {
			return 0, 0, err
		}
		if err = bytesField("header value", true); err != nil {
			return 0, 0, err
		}
	}
	if i != len(rec) {
		return 0, 0, &recordErr{"record length does not match its fields"}
	}
	return tsDelta, offDelta, nil
}

// varint decodes a zig-zag varint (up to 64 bits). It returns the value and
// the bytes consumed, or m <= 0 if b does not hold a valid varint.
func varint(b []byte) (int64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		// One byte: most fields of a record (attributes, small deltas, a
		// null key, the header count).
		return int64(b[0]>>1) ^ -int64(b[0]&1), 1
	}
	u, m := binary.Uvarint(b)
	if m <= 0 {
		return 0, m
	}
	return int64(u>>1) ^ -int64(u&1), m
}

// recordTimestamps calls fn with the offset and timestamp of every record of
// a batch, in order, until fn returns false (compressed batches are
// decompressed with c, nil for fresh decompressors). It returns false if the
// records cannot be walked (malformed): the caller then treats the batch as
// a whole.
func recordTimestamps(b []byte, c *codecs, fn func(offset, ts int64) bool) bool {
	if len(b) < batchHeaderSize {
		return false
	}
	h := parseHeader(b)
	if h.Size() != int64(len(b)) {
		return false
	}
	logAppend := h.Attributes&attrLogAppendTime != 0
	if h.Compression() != codecNone {
		if c == nil {
			c = &codecs{}
		}
		br, release, err := c.records(h.Compression(), b[batchHeaderSize:])
		if err != nil {
			return false
		}
		defer release()
		stop := errors.New("stop")
		err = walkRecordStream(br, h.NumRecords, func(i int32, rec []byte) error {
			tsDelta, offDelta, rerr := checkRecord(rec)
			if rerr != nil {
				return errors.New(rerr.reason)
			}
			ts := h.FirstTimestamp + tsDelta
			if logAppend {
				ts = h.MaxTimestamp
			}
			if !fn(h.BaseOffset+offDelta, ts) {
				return stop
			}
			return nil
		})
		return err == nil || err == stop
	}
	recs := b[batchHeaderSize:]
	i := 0
	for n := int32(0); n < h.NumRecords && i < len(recs); n++ {
		length, m := varint(recs[i:])
		if m <= 0 || length < 1 || length > int64(len(recs)-i-m) {
			return false
		}
		i += m
		tsDelta, offDelta, err := checkRecord(recs[i : i+int(length)])
		if err != nil {
			return false
		}
		i += int(length)
		ts := h.FirstTimestamp + tsDelta
		if logAppend {
			ts = h.MaxTimestamp
		}
		if offDelta > math.MaxInt32 || !fn(h.BaseOffset+offDelta, ts) {
			return true
		}
	}
	return true
}
