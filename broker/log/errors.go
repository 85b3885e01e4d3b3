package log

import (
	"errors"
	"fmt"
)

// Errors returned by the log. Check them with errors.Is; the broker maps each
// to one Kafka error code.
var (
	// ErrCorruptBatch: an appended RecordBatch is invalid (length, magic,
	// CRC, record count, timestamps). Nothing was appended.
	// Kafka: CORRUPT_MESSAGE.
	ErrCorruptBatch = errors.New("log: corrupt record batch")
	// ErrMessageTooLarge: a batch is larger than max.message.bytes.
	// Kafka: MESSAGE_TOO_LARGE.
	ErrMessageTooLarge = errors.New("log: record batch larger than max.message.bytes")
	// ErrOffsetOutOfRange: a read or DeleteRecords outside
	// [LogStartOffset, HighWatermark]. Kafka: OFFSET_OUT_OF_RANGE.
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrStorage wraps every I/O failure (ENOSPC, EIO, ...). The log stays
	// readable and consistent; a failed append was not appended (or, for a
	// failed fsync, was rolled back). Kafka: KAFKA_STORAGE_ERROR.
	ErrStorage = errors.New("log: storage error")
	// ErrClosed: the log (or manager) was closed.
	ErrClosed = errors.New("log: closed")
	// ErrInvalidRecord: a well-formed record the partition refuses (a
	// keyless record on a compacted topic). Returned as a *RecordError.
	// Nothing was appended. Kafka: INVALID_RECORD from Produce v8 (with
	// RecordErrors), CORRUPT_MESSAGE before.
	ErrInvalidRecord = errors.New("log: invalid record")
	// ErrInvalidTimestamp: a record's timestamp is outside the bounds of
	// Config.TimestampBeforeMaxMs/AfterMaxMs. Returned as a
	// *TimestampError. Nothing was appended. Kafka: INVALID_TIMESTAMP.
	ErrInvalidTimestamp = errors.New("log: record timestamp out of range")
)

// TimestampError names the first record of an append whose timestamp is
// out of range, and the range [Min, Max] it had to be in. It matches
// ErrInvalidTimestamp.
type TimestampError struct {
	// Index is the record's position among the appended records, counted
	// from 0 across the batches, as RecordError.Index.
	Index     int32
	Timestamp int64
	Min, Max  int64
}

func (e *TimestampError) Error() string {
	return fmt.Sprintf("log: timestamp %d of record %d is out of range: it must be within [%d, %d]", e.Timestamp, e.Index, e.Min, e.Max)
}

func (e *TimestampError) Unwrap() error { return ErrInvalidTimestamp }

// RecordError names the record an append refused. It matches
// ErrInvalidRecord and, for callers that know only the older code,
// ErrCorruptBatch.
type RecordError struct {
	// Index is the record's position among the appended records, counted
	// from 0 across the batches (Kafka's RecordErrors.BatchIndex: a Kafka
	// producer sends one batch per partition).
	Index   int32
	Message string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("log: record %d refused: %s", e.Index, e.Message)
}

func (e *RecordError) Unwrap() []error { return []error{ErrInvalidRecord, ErrCorruptBatch} }

// CorruptionError reports bytes on disk that are not what the log wrote: a
// torn or corrupt batch found during recovery or a read, or a damaged index
// or metadata file. Recovery repairs what it can (truncating a torn tail,
// rebuilding an index) and logs each repair with this error.
type CorruptionError struct {
	Segment string // file name, e.g. "00000000000000000000.log"
	Offset  int64  // byte position in the file
	Reason  string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("log: corruption in %s at byte %d: %s", e.Segment, e.Offset, e.Reason)
}

// storageErr wraps an I/O error so that errors.Is(err, ErrStorage) holds and
// the underlying error (e.g. syscall.ENOSPC) is still reachable.
func storageErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrStorage) {
		return err
	}
	return &storageError{op: op, err: err}
}

// storageError matches ErrStorage and the I/O error it wraps.
type storageError struct {
	op  string
	err error
}

func (e *storageError) Error() string   { return "log: storage error: " + e.op + ": " + e.err.Error() }
func (e *storageError) Unwrap() []error { return []error{ErrStorage, e.err} }

// batchErr is an ErrCorruptBatch with a reason.
func batchErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptBatch, fmt.Sprintf(format, args...))
}
