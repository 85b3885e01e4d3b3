// Package recbatch encodes and walks the uncompressed RecordBatch v2 batches
// the coordinators write to their internal topics (__consumer_offsets,
// __transaction_state) and the transaction markers (control batches) they
// append to any partition. It is a format package: no I/O, no state.
//
// The batch header is broker/log's view (wlog.BatchHeader, drawn in
// broker/log/batchheader.go): Encode fills one and Walk hands each batch's
// to its callback, so no byte offset of the header is known here. Encoded
// batches have base offset 0 (the log assigns offsets), partition leader
// epoch -1, magic 2, base sequence -1 (a coordinator's batch: no sequence
// check) and every record's timestamp and offset deltas from the batch's
// first; attributes are wlog.AttrTransactional and wlog.AttrControl, never
// a compression codec. Records are encoded and decoded with kmsg.Record.
package recbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
)

// ErrCorrupt is wrapped by every framing error Walk returns.
var ErrCorrupt = errors.New("recbatch: corrupt record batch")

// Record is one key/value pair to encode; a nil Value is a tombstone.
type Record struct{ Key, Value []byte }

// Encode builds one uncompressed RecordBatch v2 holding recs (at least
// one), all timestamped tsMs, written by producer (pid, epoch) with the
// given attributes (wlog.AttrTransactional, wlog.AttrControl; -1, -1, 0
// for a coordinator's plain batch).
func Encode(recs []Record, tsMs int64, pid int64, epoch int16, attrs int16) []byte {
	var body []byte
	for i, r := range recs {
		kr := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		// Length counts the bytes after itself: encoded with Length 0 the
		// length varint takes exactly one byte.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		body = kr.AppendTo(body)
	}
	h := wlog.BatchHeader{
		LeaderEpoch:     -1,
		Magic:           2,
		Attributes:      attrs,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  tsMs,
		MaxTimestamp:    tsMs,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    -1,
		NumRecords:      int32(len(recs)),
	}
	out := make([]byte, wlog.BatchHeaderSize, wlog.BatchHeaderSize+len(body))
	h.Put(out)
	out = append(out, body...)
	wlog.SealBatch(out)
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
	return Encode([]Record{{key.AppendTo(nil), val.AppendTo(nil)}}, tsMs, pid, epoch, wlog.AttrTransactional|wlog.AttrControl)
}

// Batch is one batch Walk found: its header and its raw records.
type Batch struct {
	wlog.BatchHeader
	records []byte
}

// Records calls fn for each record of an uncompressed batch with its
// absolute offset, in order. Key and value alias the walked data. It stops
// at fn's first error and returns it unchanged; a record that does not
// decode is an error wrapping ErrCorrupt.
func (b *Batch) Records(fn func(offset int64, key, value []byte) error) error {
	if b.Compressed() {
		return fmt.Errorf("%w: compressed batch at offset %d (codec %d)", ErrCorrupt, b.BaseOffset, b.Compression())
	}
	recs := b.records
	for i := int32(0); i < b.NumRecords; i++ {
		l, n := binary.Varint(recs)
		if n <= 0 || l < 0 || int64(len(recs)-n) < l {
			return fmt.Errorf("%w: record %d of batch at offset %d: framing", ErrCorrupt, i, b.BaseOffset)
		}
		var r kmsg.Record
		if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
			return fmt.Errorf("%w: record %d of batch at offset %d: %v", ErrCorrupt, i, b.BaseOffset, err)
		}
		recs = recs[n+int(l):]
		if err := fn(b.BaseOffset+int64(r.OffsetDelta), r.Key, r.Value); err != nil {
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
	for {
		buf := data[consumed:]
		size, ok := wlog.BatchSize(buf)
		if !ok {
			break
		}
		if size < wlog.BatchHeaderSize || size > math.MaxInt32 {
			return next, consumed, fmt.Errorf("%w: batch length %d", ErrCorrupt, size-wlog.BatchLengthOverhead)
		}
		if int64(len(buf)) < size {
			break
		}
		h, _ := wlog.ReadBatchHeader(buf)
		if h.Magic != 2 {
			return next, consumed, fmt.Errorf("%w: batch magic %d", ErrCorrupt, h.Magic)
		}
		if wlog.BatchCRC(buf[:size]) != h.CRC {
			return next, consumed, fmt.Errorf("%w: batch at offset %d: crc mismatch", ErrCorrupt, h.BaseOffset)
		}
		consumed += int(size)
		b := Batch{BatchHeader: h, records: buf[wlog.BatchHeaderSize:size]}
		next = b.NextOffset()
		if err := fn(&b); err != nil {
			return next, consumed, err
		}
	}
	return next, consumed, nil
}
