package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record formats in StateTopic (see the package doc for the layout):
//
//   - key version 0 or 1: Kafka's TxnMetadataKey (transactional id); the
//     value is Kafka's TxnMetadataValue (written as version 1, flexible,
//     with the KIP-890 tagged fields), or null for a tombstone (the id
//     expired).
//   - key version 32767: weir's producer id block, key = version only,
//     value = int16 version 0 + int64 end (exclusive) of the reserved
//     block. Compaction keeps the last one.
//
// These values are part of the on-disk format and must not change.
const (
	pidBlockKeyVersion   int16 = 32767
	pidBlockValueVersion int16 = 0
	txnValueVersion      int16 = 1
)

// ErrCorruptState is returned (wrapped) when the state log holds a record
// that cannot be decoded; NewCoordinator fails rather than guess.
var ErrCorruptState = errors.New("txn: corrupt transaction state record")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stateRecord is one decoded record of the state log.
type stateRecord struct {
	pidBlockEnd int64 // > 0 for a producer id block record
	txnID       string
	tombstone   bool
	data        txnData
}

func txnKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = 0
	k.TransactionalID = id
	return k.AppendTo(nil)
}

func txnValue(d *txnData) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = txnValueVersion
	v.ProducerID = d.producerID
	v.ProducerEpoch = d.epoch
	v.TimeoutMillis = d.timeoutMs
	v.State = kmsg.TransactionState(d.state)
	for _, tp := range d.sortedParts() {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic = tp.Topic
		t.Partitions = []int32{tp.Partition}
		v.Topics = append(v.Topics, t)
	}
	v.LastUpdateTimestamp = d.updateMs
	v.StartTimestamp = d.startMs
	v.PreviousProducerID = d.prevProducerID
	v.NextProducerID = d.nextProducerID
	v.ClientTransactionVersion = d.tv
	return v.AppendTo(nil)
}

func pidBlockKey() []byte { return binary.BigEndian.AppendUint16(nil, uint16(pidBlockKeyVersion)) }

func pidBlockValue(end int64) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(pidBlockValueVersion))
	return binary.BigEndian.AppendUint64(b, uint64(end))
}

// decodeRecord decodes one state record. ok is false for a key version this
// code does not know (a later weir's record): the caller skips it.
func decodeRecord(key, value []byte) (rec stateRecord, ok bool, err error) {
	if len(key) < 2 {
		return rec, false, fmt.Errorf("%w: key of %d bytes", ErrCorruptState, len(key))
	}
	switch kv := int16(binary.BigEndian.Uint16(key)); kv {
	case pidBlockKeyVersion:
		if len(value) != 10 || int16(binary.BigEndian.Uint16(value)) != pidBlockValueVersion {
			return rec, false, fmt.Errorf("%w: producer id block value of %d bytes", ErrCorruptState, len(value))
		}
		end := int64(binary.BigEndian.Uint64(value[2:]))
		if end <= 0 {
			return rec, false, fmt.Errorf("%w: producer id block end %d", ErrCorruptState, end)
		}
		rec.pidBlockEnd = end
		return rec, true, nil
	case 0, 1:
		k := kmsg.NewTxnMetadataKey()
		if err := k.ReadFrom(key); err != nil {
			return rec, false, fmt.Errorf("%w: key: %v", ErrCorruptState, err)
		}
		rec.txnID = k.TransactionalID
		if value == nil {
			rec.tombstone = true
			return rec, true, nil
		}
		v := kmsg.NewTxnMetadataValue()
		if err := v.ReadFrom(value); err != nil {
			return rec, false, fmt.Errorf("%w: value of %q: %v", ErrCorruptState, rec.txnID, err)
		}
		if v.Version < 0 || v.Version > 1 {
			return rec, false, fmt.Errorf("%w: value version %d of %q", ErrCorruptState, v.Version, rec.txnID)
		}
		st := txnState(v.State)
		if !st.valid() {
			return rec, false, fmt.Errorf("%w: state %d of %q", ErrCorruptState, v.State, rec.txnID)
		}
		d := txnData{
			producerID:     v.ProducerID,
			prevProducerID: v.PreviousProducerID,
			nextProducerID: v.NextProducerID,
			epoch:          v.ProducerEpoch,
			lastEpoch:      noProducerEpoch,
			timeoutMs:      v.TimeoutMillis,
			state:          st,
			parts:          make(map[TopicPartition]struct{}),
			startMs:        v.StartTimestamp,
			updateMs:       v.LastUpdateTimestamp,
			tv:             v.ClientTransactionVersion,
		}
		if v.Version == 0 {
			d.prevProducerID, d.nextProducerID = noProducerID, noProducerID
		}
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				d.parts[TopicPartition{t.Topic, p}] = struct{}{}
			}
		}
		rec.data = d
		return rec, true, nil
	default:
		return rec, false, nil
	}
}

// kv is one record to write.
type kv struct{ key, value []byte }

// buildBatch encodes records as one uncompressed RecordBatch v2 (no
// producer id: the state log is written by the coordinator alone).
func buildBatch(recs []kv, nowMs int64) []byte {
	var body []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value}
		n := len(rec.AppendTo(nil)) - 1 // minus the 1-byte varint of Length 0
		rec.Length = int32(n)
		body = rec.AppendTo(body)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           0,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       nowMs,
		MaxTimestamp:         nowMs,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              body,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

// forEachRecord calls fn for every record of the concatenated batches in
// data, with the offset of the record. A trailing partial batch is
// returned as rest (the caller reads on from its offset). Control batches
// and batches of other producers are skipped (none are expected).
func forEachRecord(data []byte, fn func(offset int64, key, value []byte) error) (next int64, consumed int, err error) {
	next = -1
	for len(data)-consumed >= 12 {
		buf := data[consumed:]
		length := int64(int32(binary.BigEndian.Uint32(buf[8:])))
		if length < 49 || length > math.MaxInt32-12 {
			return next, consumed, fmt.Errorf("%w: batch length %d", ErrCorruptState, length)
		}
		size := int(12 + length)
		if len(buf) < size {
			break
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(buf[:size]); err != nil {
			return next, consumed, fmt.Errorf("%w: batch: %v", ErrCorruptState, err)
		}
		if b.Magic != 2 {
			return next, consumed, fmt.Errorf("%w: batch magic %d", ErrCorruptState, b.Magic)
		}
		if crc32.Checksum(buf[21:size], castagnoli) != uint32(b.CRC) {
			return next, consumed, fmt.Errorf("%w: batch at offset %d: crc mismatch", ErrCorruptState, b.FirstOffset)
		}
		consumed += size
		next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		if b.Attributes&0x20 != 0 { // control batch
			continue
		}
		if b.Attributes&0x07 != 0 {
			return next, consumed, fmt.Errorf("%w: compressed batch at offset %d (codec %d)", ErrCorruptState, b.FirstOffset, b.Attributes&7)
		}
		recs := b.Records
		for i := int32(0); i < b.NumRecords; i++ {
			l, n := binary.Varint(recs)
			if n <= 0 || l < 0 || int64(len(recs)-n) < l {
				return next, consumed, fmt.Errorf("%w: record %d of batch at offset %d", ErrCorruptState, i, b.FirstOffset)
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				return next, consumed, fmt.Errorf("%w: record %d of batch at offset %d: %v", ErrCorruptState, i, b.FirstOffset, err)
			}
			recs = recs[n+int(l):]
			if err := fn(b.FirstOffset+int64(r.OffsetDelta), r.Key, r.Value); err != nil {
				return next, consumed, err
			}
		}
	}
	return next, consumed, nil
}
