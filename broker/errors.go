package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

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
