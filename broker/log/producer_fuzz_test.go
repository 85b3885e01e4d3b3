package log

import (
	"bytes"
	"testing"
)

func seedSnapshot() []byte {
	e := newProducerEntry()
	e.epoch, e.txnFirst, e.lastOff, e.lastTs = 3, 10, 12, 99
	e.addBatch(seqBatch{firstSeq: 0, lastSeq: 4, firstOff: 5, lastOff: 9})
	e.addBatch(seqBatch{firstSeq: 5, lastSeq: 5, firstOff: 10, lastOff: 10})
	return encodeSnapshot(&psSnapshot{offset: 20, indexedTo: 15, producers: map[int64]*producerEntry{4: &e},
		aborted: []AbortedTxn{{1, 2, 16}, {2, 3, 17}}})
}

// FuzzDecodeSnapshot: any bytes decode to a snapshot or an error, never a
// panic; what decodes re-encodes to the same bytes.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(seedSnapshot())
	f.Add(encodeSnapshot(&psSnapshot{producers: map[int64]*producerEntry{}}))
	f.Add([]byte("WPSN\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		if again := encodeSnapshot(s); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzDecodeTxnIndex: as FuzzDecodeSnapshot for .txnindex files.
func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(encodeTxnIndex(100, []AbortedTxn{{1, 90, 100}, {2, 95, 101}}), int64(100))
	f.Add(encodeTxnIndex(0, nil), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		as, err := decodeTxnIndex(b, base)
		if err != nil {
			return
		}
		if again := encodeTxnIndex(base, as); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzControlBatch: arbitrary bytes as a control batch never panic the
// validator; a batch that validates has a known marker type.
func FuzzControlBatch(f *testing.F) {
	f.Add(markerBatch(1, 0, true, 5))
	f.Add(markerBatch(1, 2, false, -1))
	f.Fuzz(func(t *testing.T, in []byte) {
		b := bytes.Clone(in) // inputs must not be modified
		if len(b) >= batchHeaderSize {
			b[offAttributes+1] |= attrControl
		}
		v, err := validateBatch(b, nil)
		if err != nil {
			return
		}
		if v.controlType != controlAbort && v.controlType != controlCommit {
			t.Fatalf("control type %d validated", v.controlType)
		}
	})
}
