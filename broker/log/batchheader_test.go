package log

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// packedHeader is Kafka's RecordBatch v2 header as packed big-endian
// fields in order: encoding/binary reads and writes it with no offsets of
// ours, so it checks the view's offsets independently.
type packedHeader struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

func packed(t testing.TB, b []byte) BatchHeader {
	t.Helper()
	var p packedHeader
	if err := binary.Read(bytes.NewReader(b), binary.BigEndian, &p); err != nil {
		t.Fatal(err)
	}
	return BatchHeader(p)
}

func TestBatchHeaderLayout(t *testing.T) {
	if n := binary.Size(packedHeader{}); n != BatchHeaderSize {
		t.Fatalf("packed header is %d bytes, BatchHeaderSize %d", n, BatchHeaderSize)
	}
	want := BatchHeader{
		BaseOffset: 0x0102030405060708, Length: 0x11121314, LeaderEpoch: 0x21222324, Magic: 2,
		CRC: 0x31323334, Attributes: 0x4142, LastOffsetDelta: 0x51525354,
		FirstTimestamp: 0x6162636465666768, MaxTimestamp: 0x7172737475767778,
		ProducerID: -2, ProducerEpoch: 0x0a0b, BaseSequence: -3, NumRecords: 0x0c0d0e0f,
	}
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.BigEndian, packedHeader(want)); err != nil {
		t.Fatal(err)
	}
	b := append(buf.Bytes(), "records"...)
	got, ok := ReadBatchHeader(b)
	if !ok || got != want {
		t.Fatalf("ReadBatchHeader:\n got %+v\nwant %+v", got, want)
	}
	out := make([]byte, BatchHeaderSize)
	want.Put(out)
	if !bytes.Equal(out, b[:BatchHeaderSize]) {
		t.Fatalf("Put:\n got %x\nwant %x", out, b[:BatchHeaderSize])
	}
	if sz, ok := BatchSize(b); !ok || sz != int64(want.Length)+12 || sz != want.Size() {
		t.Fatalf("BatchSize %d %v, Size %d", sz, ok, want.Size())
	}
	if _, ok := ReadBatchHeader(b[:BatchHeaderSize-1]); ok {
		t.Fatal("short header decoded")
	}
	if _, ok := BatchSize(b[:11]); ok {
		t.Fatal("short length field decoded")
	}
	if want.LastOffset() != want.BaseOffset+int64(want.LastOffsetDelta) || want.NextOffset() != want.LastOffset()+1 {
		t.Fatal("offsets")
	}
}

func TestBatchHeaderAttributes(t *testing.T) {
	for _, tc := range []struct {
		attrs                               int16
		codec                               int
		compressed, logAppend, txn, control bool
	}{
		{0x00, 0, false, false, false, false},
		{0x04, 4, true, false, false, false},  // zstd
		{0x08, 0, false, true, false, false},  // LogAppendTime
		{0x10, 0, false, false, true, false},  // transactional
		{0x30, 0, false, false, true, true},   // a transaction marker
		{0x7f, 7, true, true, true, true},     // every bit, codec 7 (undefined)
		{0x40, 0, false, false, false, false}, // delete horizon only
	} {
		h := BatchHeader{Attributes: tc.attrs}
		if h.Compression() != tc.codec || h.Compressed() != tc.compressed || h.LogAppendTime() != tc.logAppend ||
			h.Transactional() != tc.txn || h.Control() != tc.control {
			t.Errorf("attributes %#x: codec %d compressed %v logAppend %v txn %v control %v", tc.attrs,
				h.Compression(), h.Compressed(), h.LogAppendTime(), h.Transactional(), h.Control())
		}
	}
}

// SealBatch makes a batch that validates; Put after a field change and a
// reseal changes exactly that field.
func TestSealBatch(t *testing.T) {
	b := testBatch{records: 3, valueSize: 10, firstTs: 1000, tsStep: 5}.build()
	h := parseHeader(b)
	h.Length, h.CRC = 0, 0
	h.Put(b)
	SealBatch(b)
	if _, err := validateBatch(b, nil); err != nil {
		t.Fatalf("sealed batch: %v", err)
	}
	h = parseHeader(b)
	h.ProducerEpoch = 9
	h.Put(b)
	SealBatch(b)
	if got := parseHeader(b); got.ProducerEpoch != 9 || got.CRC != BatchCRC(b) || got.Size() != int64(len(b)) {
		t.Fatalf("resealed header %+v", got)
	}
}

// FuzzBatchHeader: the decoder never panics, agrees with an independent
// decode of the packed layout, and Put writes back exactly the bytes it
// read.
func FuzzBatchHeader(f *testing.F) {
	f.Add(testBatch{records: 3, valueSize: 10, firstTs: 1000, tsStep: 5}.build())
	f.Add(testBatch{records: 2, producerID: 1, seq: 0, txn: true, codec: codecZstd}.build())
	f.Add(markerBatch(5, 1, true, 3))
	f.Add([]byte{})
	f.Add(make([]byte, BatchHeaderSize-1))
	f.Add(bytes.Repeat([]byte{0xff}, BatchHeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, ok := ReadBatchHeader(b)
		if ok != (len(b) >= BatchHeaderSize) {
			t.Fatalf("ok %v for %d bytes", ok, len(b))
		}
		sz, szOK := BatchSize(b)
		if szOK != (len(b) >= BatchLengthOverhead) {
			t.Fatalf("BatchSize ok %v for %d bytes", szOK, len(b))
		}
		if !ok {
			return
		}
		if p := packed(t, b); p != h {
			t.Fatalf("decoded %+v, packed layout %+v", h, p)
		}
		if sz != h.Size() {
			t.Fatalf("BatchSize %d, Size %d", sz, h.Size())
		}
		out := make([]byte, BatchHeaderSize)
		h.Put(out)
		if !bytes.Equal(out, b[:BatchHeaderSize]) {
			t.Fatalf("Put: %x, read from %x", out, b[:BatchHeaderSize])
		}
	})
}
