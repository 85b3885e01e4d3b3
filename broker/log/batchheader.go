package log

import (
	"encoding/binary"

	"github.com/weirhq/weir/internal/crc32c"
)

// The RecordBatch v2 header view: the one place that knows where the
// fields of a batch's fixed header sit. Everything else — the log's
// validation, append, read, recovery and cleaner, the broker's Produce and
// Fetch, the coordinators' internal-topic batches (broker/internal/recbatch)
// — decodes a header with ReadBatchHeader (parseHeader inside this
// package), names its fields and attribute bits, and writes one with Put
// and SealBatch. It lives beside the log's batch code because the log owns
// the format (it stores batches exactly as served), decodes headers on the
// append hot path, and must not import anything of the protocol, which
// recbatch does (kmsg): every other user sits above the log already.
//
// Layout (Kafka's, big-endian). These offsets and bits are Kafka's wire and
// log format and must never change.
//
//	 0  baseOffset           int64   rewritten by the log on append
//	 8  batchLength          int32   bytes after this field
//	12  partitionLeaderEpoch int32   rewritten by the log on append (0)
//	16  magic                int8    must be 2
//	17  crc                  uint32  CRC-32C of bytes [21, end)
//	21  attributes           int16   see the Attr bits
//	23  lastOffsetDelta      int32
//	27  firstTimestamp       int64   the delete horizon if AttrDeleteHorizon
//	35  maxTimestamp         int64   rewritten for LogAppendTime / wrong max
//	43  producerId           int64
//	51  producerEpoch        int16
//	53  baseSequence         int32
//	57  recordCount          int32
//	61  records...
const (
	// BatchHeaderSize is the size of the fixed header: the bytes before
	// the first record.
	BatchHeaderSize = 61
	// BatchLengthOverhead is the size of baseOffset and batchLength, which
	// batchLength does not count: a batch is batchLength+12 bytes.
	BatchLengthOverhead = 12

	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// Short names inside the package.
	batchHeaderSize = BatchHeaderSize
	logOverhead     = BatchLengthOverhead
)

// Attribute bits of a batch.
const (
	// AttrCompression is the codec: 0 none, 1 gzip, 2 snappy, 3 lz4,
	// 4 zstd (5-7 undefined).
	AttrCompression = 0x07
	// AttrLogAppendTime is the timestamp type: set, the broker stamped
	// the batch (every record's timestamp is maxTimestamp); clear, the
	// producer's CreateTime.
	AttrLogAppendTime = 0x08
	// AttrTransactional marks a batch written in a transaction.
	AttrTransactional = 0x10
	// AttrControl marks a control batch (a transaction marker).
	AttrControl = 0x20
	// AttrDeleteHorizon (KIP-534): firstTimestamp holds the batch's delete
	// horizon (ms) instead of the first record's timestamp.
	AttrDeleteHorizon = 0x40

	// Short names inside the package.
	attrCompression   = AttrCompression
	attrLogAppendTime = AttrLogAppendTime
	attrTransactional = AttrTransactional
	attrControl       = AttrControl
	attrDeleteHorizon = AttrDeleteHorizon
)

// BatchHeader is the fixed part of a RecordBatch v2, decoded. Its fields
// cover all BatchHeaderSize bytes, so decoding and Put round-trip exactly.
type BatchHeader struct {
	BaseOffset      int64
	Length          int32 // batchLength field: total size - 12
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

// batchHeader is the package's name for BatchHeader.
type batchHeader = BatchHeader

// ReadBatchHeader decodes the header at the start of b. ok is false if b
// is shorter than BatchHeaderSize. It checks nothing else: the length,
// magic and CRC are the caller's to check (the log validates every batch
// it appends).
func ReadBatchHeader(b []byte) (h BatchHeader, ok bool) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, false
	}
	return parseHeader(b), true
}

// BatchSize is the size of the batch at the start of b according to its
// length field (possibly beyond b, or smaller than a header: not checked).
// ok is false if b is too short to hold the field.
func BatchSize(b []byte) (size int64, ok bool) {
	if len(b) < BatchLengthOverhead {
		return 0, false
	}
	return int64(int32(binary.BigEndian.Uint32(b[offLength:]))) + BatchLengthOverhead, true
}

// parseHeader decodes the first batchHeaderSize bytes of b (len(b) must be at
// least batchHeaderSize). It checks nothing.
func parseHeader(b []byte) batchHeader {
	_ = b[batchHeaderSize-1]
	be := binary.BigEndian
	return batchHeader{
		BaseOffset:      int64(be.Uint64(b[0:])),
		Length:          int32(be.Uint32(b[offLength:])),
		LeaderEpoch:     int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             be.Uint32(b[offCRC:]),
		Attributes:      int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(be.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:  int64(be.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:    int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:      int32(be.Uint32(b[offNumRecords:])),
	}
}

// Put writes every field of h into b[:BatchHeaderSize] (len(b) must be at
// least BatchHeaderSize). The CRC is written as it is in h: after changing
// fields it covers, SealBatch the whole batch.
func (h *BatchHeader) Put(b []byte) {
	_ = b[batchHeaderSize-1]
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.BaseOffset))
	be.PutUint32(b[offLength:], uint32(h.Length))
	be.PutUint32(b[offLeaderEpoch:], uint32(h.LeaderEpoch))
	b[offMagic] = byte(h.Magic)
	be.PutUint32(b[offCRC:], h.CRC)
	be.PutUint16(b[offAttributes:], uint16(h.Attributes))
	be.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[offFirstTimestamp:], uint64(h.FirstTimestamp))
	be.PutUint64(b[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[offNumRecords:], uint32(h.NumRecords))
}

// SealBatch sets the length field and the CRC of the whole batch b (at
// least BatchHeaderSize bytes) once its other bytes are final.
func SealBatch(b []byte) {
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-BatchLengthOverhead))
	putCRC(b)
}

// Size is the whole batch's size in bytes (batchLength + 12).
func (h BatchHeader) Size() int64 { return int64(h.Length) + logOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch's last record.
func (h BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec (AttrCompression bits).
func (h BatchHeader) Compression() int { return int(h.Attributes & attrCompression) }

// Compressed reports a codec other than none.
func (h BatchHeader) Compressed() bool { return h.Attributes&attrCompression != 0 }

// LogAppendTime reports the LogAppendTime timestamp type.
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports a batch written in a transaction.
func (h BatchHeader) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports a control batch (a transaction marker).
func (h BatchHeader) Control() bool { return h.Attributes&attrControl != 0 }

// BatchCRC computes the CRC-32C of a whole batch b over the bytes the CRC
// field covers (attributes to the end).
func BatchCRC(b []byte) uint32 { return crc32c.Checksum(b[offAttributes:]) }

// putCRC sets the CRC field of the whole batch b.
func putCRC(b []byte) { binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b)) }

// setBaseOffset writes the base offset and leader epoch of a batch in place.
// Neither field is covered by the CRC.
func setBaseOffset(b []byte, base int64, leaderEpoch int32) {
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
}

// setMaxTimestamp rewrites maxTimestamp and the timestamp-type attribute bit
// and recomputes the CRC, as Kafka does when it validates a produced batch.
func setMaxTimestamp(b []byte, ts int64, logAppendTime bool) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	if logAppendTime {
		attrs |= attrLogAppendTime
	} else {
		attrs &^= attrLogAppendTime
	}
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	putCRC(b)
}
