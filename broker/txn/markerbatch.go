package txn

import "github.com/weirhq/weir/broker/internal/recbatch"

// MarkerBatch encodes the control batch Kafka writes to a partition to end
// a transaction: a transactional control RecordBatch v2 of producer
// (pid, epoch), base sequence -1, holding one record whose key is the
// control record key (version 0, type 1 COMMIT or 0 ABORT) and whose value
// is the end-transaction marker (version 0, coordinator epoch). The base
// offset is 0 (the log assigns it). It is what Partitions.WriteMarker
// appends; a read_committed consumer skips it and uses it to drop the
// aborted records of pid.
func MarkerBatch(pid int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) []byte {
	return recbatch.Marker(pid, epoch, commit, coordinatorEpoch, nowMs)
}
