package txn

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batch attribute bits of a transaction marker (RecordBatch v2).
const (
	attrTransactional int16 = 0x10
	attrControl       int16 = 0x20
)

// MarkerBatch encodes the control batch Kafka writes to a partition to end
// a transaction: a transactional control RecordBatch v2 of producer
// (pid, epoch), base sequence -1, holding one record whose key is the
// control record key (version 0, type 1 COMMIT or 0 ABORT) and whose value
// is the end-transaction marker (version 0, coordinator epoch). The base
// offset is 0 (the log assigns it). It is what Partitions.WriteMarker
// appends; a read_committed consumer skips it and uses it to drop the
// aborted records of pid.
func MarkerBatch(pid int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) []byte {
	key := kmsg.NewControlRecordKey()
	key.Version = 0
	key.Type = kmsg.ControlRecordKeyTypeAbort
	if commit {
		key.Type = kmsg.ControlRecordKeyTypeCommit
	}
	val := kmsg.NewEndTxnMarker()
	val.Version = 0
	val.CoordinatorEpoch = coordinatorEpoch
	rec := kmsg.Record{Key: key.AppendTo(nil), Value: val.AppendTo(nil)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrTransactional | attrControl,
		LastOffsetDelta:      0,
		FirstTimestamp:       nowMs,
		MaxTimestamp:         nowMs,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              rec.AppendTo(nil),
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}
