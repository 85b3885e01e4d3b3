package log

import (
	"bytes"
	"testing"
)

// FuzzCleanFiles: the clean-swap and cleaner-checkpoint decoders never
// panic, and what they accept re-encodes to the same bytes.
func FuzzCleanFiles(f *testing.F) {
	f.Add(encodeCleanSwap(10, []int64{10, 20, 30}))
	f.Add(encodeCleanSwap(-1, []int64{0}))
	f.Add(encodeCleanCkpt([]cleanPass{{End: 5, TimeMs: 1}, {End: 9, TimeMs: 2}}))
	f.Add(encodeCleanCkpt(nil))
	f.Add([]byte("WCSW\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if nb, old, err := decodeCleanSwap(b); err == nil {
			if !bytes.Equal(encodeCleanSwap(nb, old), b) {
				t.Fatalf("clean-swap does not round-trip")
			}
		}
		if ps, err := decodeCleanCkpt(b); err == nil {
			if !bytes.Equal(encodeCleanCkpt(ps), b) {
				t.Fatalf("cleaner checkpoint does not round-trip")
			}
		}
	})
}

// FuzzCleanRecords: the record parser and the batch filter of the cleaner
// never panic on any batch (stored batches are CRC-checked, but a bug must
// not turn damage into a crash), and a batch the filter re-encodes is a
// valid stored batch.
func FuzzCleanRecords(f *testing.F) {
	f.Add(kvBatch(testBatch{}, kv{"a", val("1")}, kv{"b", nil}, kv{"a", val("2")}))
	f.Add(kvBatch(testBatch{codec: codecGzip}, kv{"a", val("1")}, kv{"a", val("2")}))
	f.Add(kvBatch(testBatch{producerID: 3, txn: true}, kv{"x", val("1")}))
	f.Add(markerBatch(3, 0, true, 1))
	f.Add(markerBatch(3, 0, false, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseRecordBody(b)
		if len(b) < batchHeaderSize {
			return
		}
		h := parseHeader(b)
		if h.checkFraming(int64(len(b))) != "" || h.Size() != int64(len(b)) || h.NumRecords < 0 || h.NumRecords > 1<<12 {
			return
		}
		l := &Log{ps: newProducerState()}
		tt := newTxnTracker(l.ps, 0)
		if h.Attributes&attrControl != 0 {
			out, _ := filterMarker(b, &h, tt, 5000, 1000)
			if out == nil || bytes.Equal(out, b) {
				return
			}
			oh := parseHeader(out)
			if BatchCRC(out) != oh.CRC || oh.Size() != h.Size() || oh.Attributes&attrDeleteHorizon == 0 || oh.FirstTimestamp != 6000 {
				t.Fatalf("stamped marker inconsistent: %+v from %+v", oh, h)
			}
			return
		}
		om := newOffsetMap(0)
		_ = om.put([]byte("a"), h.BaseOffset+1)
		out, _, err := l.filterBatch(b, h, om, h.BaseOffset+1, map[int64]int64{}, tt, new([]byte))
		if err != nil || out == nil || bytes.Equal(out, b) {
			return
		}
		oh := parseHeader(out)
		if BatchCRC(out) != oh.CRC || oh.Size() != int64(len(out)) || oh.LastOffsetDelta != h.LastOffsetDelta || oh.BaseOffset != h.BaseOffset {
			t.Fatalf("re-encoded batch inconsistent: %+v from %+v", oh, h)
		}
		n := int32(0)
		if err := forEachRecord(out, oh, &l.codecs, func(body []byte) error {
			if _, ok := parseRecordBody(body); !ok {
				t.Fatalf("re-encoded record unparsable")
			}
			n++
			return nil
		}); err != nil || n != oh.NumRecords {
			t.Fatalf("re-encoded records: %d of %d, %v", n, oh.NumRecords, err)
		}
	})
}
