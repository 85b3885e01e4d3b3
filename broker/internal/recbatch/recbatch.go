// Package recbatch encodes and walks the uncompressed RecordBatch v2 batches
// the coordinators write to their internal topics (__consumer_offsets,
// __transaction_state) and the transaction markers (control batches) they
// append to any partition. It is a format package: no I/O, no state.
//
// Layout of one batch (Kafka's RecordBatch v2, big endian; kmsg.RecordBatch):
//
//	+--------------+----------+-------------+-------+--------+------------+
//	| baseOffset 8 | length 4 | leaderEp. 4 | magic | crc 4  | attributes |
//	+--------------+----------+-------------+-------+--------+------------+
//	| lastOffsetDelta 4 | firstTs 8 | maxTs 8 | producerId 8 | epoch 2    |
//	| baseSequence 4 | numRecords 4 | records (varint-framed, numRecords) |
//	+----------------------------------------------------------------------+
//
// length counts the bytes after itself (total - 12); the CRC-32C
// (Castagnoli) covers attributes to the end (bytes 21..). Encoded batches
// have base offset 0 (the log assigns offsets), partition leader epoch -1,
// magic 2, base sequence -1 (a coordinator's batch: no sequence check) and
// every record's timestamp and offset deltas from the batch's first.
// Attribute bits: 0x07 compression codec (never written here),
// 0x10 transactional, 0x20 control. These values are Kafka's wire/disk
// format and must not change.
package recbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/internal/crc32c"
)

// Batch attribute bits (RecordBatch v2).
const (
	AttrCompression   int16 = 0x07
	AttrTransactional int16 = 0x10
	AttrControl       int16 = 0x20
)

// headerLen is the size of a batch without records; the smallest valid
// length field is headerLen-12.
const headerLen = 61

// ErrCorrupt is wrapped by every framing error Walk returns.
var ErrCorrupt = errors.New("recbatch: corrupt record batch")

// Record is one key/value pair to encode; a nil Value is a tombstone.
type Record struct{ Key, Value []byte }

// Encode builds one uncompressed RecordBatch v2 holding recs (at least
// one), all timestamped tsMs, written by producer (pid, epoch) with the
// given attributes (AttrTransactional, AttrControl; -1, -1, 0 for a
// coordinator's plain batch).
func Encode(recs []Record, tsMs int64, pid int64, epoch int16, attrs int16) []byte {
	var body []byte
	for i, r := range recs {
		kr := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		// Length counts the bytes after itself: encoded with Length 0 the
		// length varint takes exactly one byte.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		body = kr.AppendTo(body)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       tsMs,
		MaxTimestamp:         tsMs,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              body,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:21], crc32c.Checksum(out[21:]))
	return out
}

// Marker encodes the control batch Kafka writes to end a transaction: a
// transactional control batch of producer (pid, epoch), base sequence -1,
// holding one record whose key is the control record key (version 0, type
// 1 COMMIT or 0 ABORT) and whose value is the end-transaction marker
// (version 0, coordinator epoch).
func Marker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, tsMs int64) []byte {
	key := kmsg.NewControlRecordKey()
	key.Version = 0
	key.Type = kmsg.ControlRecordKeyTypeAbort
	if commit {
		key.Type = kmsg.ControlRecordKeyTypeCommit
	}
	val := kmsg.NewEndTxnMarker()
	val.Version = 0
	val.CoordinatorEpoch = coordinatorEpoch
	return Encode([]Record{{key.AppendTo(nil), val.AppendTo(nil)}}, tsMs, pid, epoch, AttrTransactional|AttrControl)
}

// Batch is one batch Walk found: its header fields and its raw records.
type Batch struct {
	FirstOffset     int64
	LastOffsetDelta int32
	ProducerID      int64
	ProducerEpoch   int16
	Attributes      int16
	NumRecords      int32
	records         []byte
}

// NextOffset is the offset after the batch's last record.
func (b *Batch) NextOffset() int64 { return b.FirstOffset + int64(b.LastOffsetDelta) + 1 }

// Transactional reports attribute bit 0x10.
func (b *Batch) Transactional() bool { return b.Attributes&AttrTransactional != 0 }

// Control reports attribute bit 0x20 (a transaction marker).
func (b *Batch) Control() bool { return b.Attributes&AttrControl != 0 }

// Compressed reports a compression codec; Records cannot walk such a batch.
func (b *Batch) Compressed() bool { return b.Attributes&AttrCompression != 0 }

// Records calls fn for each record of an uncompressed batch with its
// absolute offset, in order. Key and value alias the walked data. It stops
// at fn's first error and returns it unchanged; a record that does not
// decode is an error wrapping ErrCorrupt.
func (b *Batch) Records(fn func(offset int64, key, value []byte) error) error {
	if b.Compressed() {
		return fmt.Errorf("%w: compressed batch at offset %d (codec %d)", ErrCorrupt, b.FirstOffset, b.Attributes&AttrCompression)
	}
	recs := b.records
	for i := int32(0); i < b.NumRecords; i++ {
		l, n := binary.Varint(recs)
		if n <= 0 || l < 0 || int64(len(recs)-n) < l {
			return fmt.Errorf("%w: record %d of batch at offset %d: framing", ErrCorrupt, i, b.FirstOffset)
		}
		var r kmsg.Record
		if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
			return fmt.Errorf("%w: record %d of batch at offset %d: %v", ErrCorrupt, i, b.FirstOffset, err)
		}
		recs = recs[n+int(l):]
		if err := fn(b.FirstOffset+int64(r.OffsetDelta), r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}

// Walk calls fn for each whole batch of the concatenated batches in data,
// in order, after checking its framing, magic and CRC. It returns the
// offset after the last whole batch (-1 if none) and the bytes consumed; a
// trailing partial batch is left unconsumed (consumed < len(data)) without
// error. Framing errors wrap ErrCorrupt; fn's error is returned unchanged.
// Walk never panics on any input.
func Walk(data []byte, fn func(b *Batch) error) (next int64, consumed int, err error) {
	next = -1
	for len(data)-consumed >= 12 {
		buf := data[consumed:]
		length := int64(int32(binary.BigEndian.Uint32(buf[8:12])))
		if length < headerLen-12 || length > math.MaxInt32-12 {
			return next, consumed, fmt.Errorf("%w: batch length %d", ErrCorrupt, length)
		}
		size := int(12 + length)
		if len(buf) < size {
			break
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(buf[:size]); err != nil {
			return next, consumed, fmt.Errorf("%w: batch: %v", ErrCorrupt, err)
		}
		if rb.Magic != 2 {
			return next, consumed, fmt.Errorf("%w: batch magic %d", ErrCorrupt, rb.Magic)
		}
		if crc32c.Checksum(buf[21:size]) != uint32(rb.CRC) {
			return next, consumed, fmt.Errorf("%w: batch at offset %d: crc mismatch", ErrCorrupt, rb.FirstOffset)
		}
		consumed += size
		b := Batch{
			FirstOffset:     rb.FirstOffset,
			LastOffsetDelta: rb.LastOffsetDelta,
			ProducerID:      rb.ProducerID,
			ProducerEpoch:   rb.ProducerEpoch,
			Attributes:      rb.Attributes,
			NumRecords:      rb.NumRecords,
			records:         rb.Records,
		}
		next = b.NextOffset()
		if err := fn(&b); err != nil {
			return next, consumed, err
		}
	}
	return next, consumed, nil
}
