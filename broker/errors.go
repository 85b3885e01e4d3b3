package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
)

// logErrorCode maps an error of the storage engine to the Kafka error code
// a client understands. gone reports whether the partition's topic no longer
// exists (a closed log then means a deleted topic, not a shutdown).
func logErrorCode(err error, gone bool) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, wlog.ErrCorruptBatch):
		return kerr.CorruptMessage.Code
	case errors.Is(err, wlog.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, wlog.ErrInvalidTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, wlog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, wlog.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, wlog.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, wlog.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, wlog.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, wlog.ErrClosed):
		if gone {
			return kerr.UnknownTopicOrPartition.Code
		}
		// Shutting down: a retriable code that makes clients refresh
		// metadata and try again (possibly after a restart).
		return kerr.NotLeaderForPartition.Code
	}
	var ce *wlog.CorruptionError
	if errors.As(err, &ce) {
		return kerr.KafkaStorageError.Code
	}
	return errorCode(err)
}

// produceAppendError fills a Produce partition response for a failed
// append (the Produce handler's error path). A record the log refused
// (*wlog.RecordError: a keyless record on a compacted topic) is answered as
// Kafka does since KIP-467: INVALID_RECORD with RecordErrors (the record's
// index and message) and ErrorMessage from v8, CORRUPT_MESSAGE before v8
// (which has no per-record errors). A record timestamp out of range
// (*wlog.TimestampError) is INVALID_TIMESTAMP on every version, with
// RecordErrors from v8. Other errors get logErrorCode and, from v8, the
// error's text as ErrorMessage.
func produceAppendError(version int16, topic string, partition int32, err error, gone bool, sp *kmsg.ProduceResponseTopicPartition) {
	var (
		te *wlog.TimestampError
		re *wlog.RecordError
	)
	switch {
	case errors.As(err, &te):
		sp.ErrorCode = kerr.InvalidTimestamp.Code
		if version >= 8 {
			recordErrors(sp, te.Index, fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
				te.Timestamp, te.Index, te.Min, te.Max))
		}
	case errors.As(err, &re):
		if version < 8 {
			sp.ErrorCode = kerr.CorruptMessage.Code
			return
		}
		sp.ErrorCode = kerr.InvalidRecord.Code
		recordErrors(sp, re.Index, fmt.Sprintf("%s in topic partition %s-%d.", re.Message, topic, partition))
	default:
		sp.ErrorCode = logErrorCode(err, gone)
		if version >= 8 {
			sp.ErrorMessage = kmsg.StringPtr(err.Error())
		}
	}
}

// recordErrors sets the v8+ RecordErrors of a partition refused for one
// record, and the ErrorMessage Kafka's RecordValidationException gives.
func recordErrors(sp *kmsg.ProduceResponseTopicPartition, index int32, msg string) {
	rec := kmsg.NewProduceResponseTopicPartitionErrorRecord()
	rec.RelativeOffset = index
	rec.ErrorMessage = kmsg.StringPtr(msg)
	sp.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{rec}
	sp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("One or more records have been rejected due to 1 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=%d, message='%s')]", index, msg))
}
