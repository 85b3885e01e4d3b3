package txn

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/recbatch"
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

// kv is one record to write; a nil value is a tombstone.
type kv = recbatch.Record

// buildBatch encodes records as one uncompressed RecordBatch v2 (no
// producer id: the state log is written by the coordinator alone).
func buildBatch(recs []kv, nowMs int64) []byte { return recbatch.Encode(recs, nowMs, -1, -1, 0) }

// forEachRecord calls fn for every record of the concatenated batches in
// data, with the offset of the record. A trailing partial batch is left
// unconsumed (the caller reads on from next). Control batches are skipped
// (none are expected); a compressed batch is ErrCorruptState.
func forEachRecord(data []byte, fn func(offset int64, key, value []byte) error) (next int64, consumed int, err error) {
	next, consumed, err = recbatch.Walk(data, func(b *recbatch.Batch) error {
		if b.Control() {
			return nil
		}
		return b.Records(fn)
	})
	if errors.Is(err, recbatch.ErrCorrupt) {
		err = fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	return next, consumed, err
}
