package txn

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StateTopic is the compacted internal topic holding transaction state
// (one partition in weir).
const StateTopic = "__transaction_state"

// OffsetsTopic is the group coordinator's internal topic. AddOffsetsToTxn
// adds (OffsetsTopic, 0) to a transaction, as Kafka adds the group's offsets
// partition; its marker is delivered to Options.Offsets instead of
// Partitions.
const OffsetsTopic = "__consumer_offsets"

// TransactionVersion is the highest transaction.version feature level this
// coordinator implements (2 = KIP-890 part 2: epoch bump on every EndTxn,
// implicit partition add on Produce v12+, TxnOffsetCommit v5+ without
// AddOffsetsToTxn). The broker advertises it in ApiVersions as supported
// 0..2 and finalized 2; clients decide their mode from it.
const TransactionVersion = 2

// CoordinatorEpoch is the coordinator epoch written in every marker. weir
// is one node and its coordinator never moves, so no marker from an older
// coordinator can be in flight; the epoch is constant.
const CoordinatorEpoch int32 = 0

// StateLog is the coordinator's view of the single partition of StateTopic
// (the same shape the group coordinator uses for its offsets log). It must
// be safe for use from one goroutine at a time; the coordinator appends from
// one writer goroutine and reads only while replaying in NewCoordinator.
type StateLog interface {
	// Append writes one or more concatenated RecordBatch v2 batches and
	// returns the offset given to the first record; durable returns only
	// after the data is fsynced.
	Append(batches []byte, durable bool) (baseOffset int64, err error)
	// Read returns whole batches starting at the batch containing offset,
	// never beyond upTo. release returns the buffer.
	Read(offset int64, maxBytes int, upTo int64) (data []byte, release func(), err error)
	HighWatermark() int64
	LogStartOffset() int64
}

// Partitions is what the coordinator needs from the broker's partitions.
// It must be safe for concurrent use.
type Partitions interface {
	Exists(topic string, partition int32) bool
	// WriteMarker appends a control batch (COMMIT or ABORT, with the
	// coordinator epoch) for (pid, epoch) to the partition, durably, and
	// updates the partition's producer state. It must be idempotent: after
	// a coordinator restart markers are re-sent for transactions whose
	// markers may already be written. An error wrapping
	// kerr.UnknownTopicOrPartition means the partition is gone and is
	// dropped; any other error is retried with backoff.
	WriteMarker(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error
}

// OffsetCommitter is the group coordinator's side of transactional offset
// commits. It must be safe for concurrent use.
type OffsetCommitter interface {
	// TxnOffsetCommit stages the request's offsets for (ProducerID,
	// ProducerEpoch), durably, and answers group, member and generation
	// errors itself. It is called only after the transaction was checked.
	TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error)
	// WriteMarker completes every offset staged by pid in any group:
	// commit makes them the committed offsets, abort discards them.
	// Durable and idempotent, like Partitions.WriteMarker.
	WriteMarker(ctx context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Options configures a Coordinator. Zero values mean Kafka's defaults.
type Options struct {
	// NodeID, Host and Port are what FindCoordinator answers.
	NodeID int32
	Host   string
	Port   int32

	// State is the single partition of StateTopic. NewCoordinator replays
	// it; every state change a response depends on is appended durable
	// before the response.
	State      StateLog
	Partitions Partitions
	// Offsets may be nil: AddOffsetsToTxn and TxnOffsetCommit then answer
	// COORDINATOR_NOT_AVAILABLE.
	Offsets OffsetCommitter

	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer

	// TransactionMaxTimeout is transaction.max.timeout.ms (default 15m).
	TransactionMaxTimeout time.Duration
	// TransactionalIDExpiration is transactional.id.expiration.ms
	// (default 7d): an idle transactional id not in a transaction is
	// removed (tombstoned) after it.
	TransactionalIDExpiration time.Duration
	// AbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms
	// (default 10s): how often timeouts are checked with the real timer.
	AbortTimedOutInterval time.Duration
	// MarkerRetryBackoff is the delay before a failed marker write is
	// retried (default 100ms).
	MarkerRetryBackoff time.Duration
	// EndTxnCompletionWait bounds how long EndTxn waits, after the
	// PrepareCommit/PrepareAbort record is durable (the outcome is decided
	// then), for the markers and the Complete record before answering
	// (default 2s; negative: answer at once, as Kafka does). Answering once
	// the transaction completed means the producer's next transaction does
	// not meet CONCURRENT_TRANSACTIONS, which clients retry only after a
	// backoff or a metadata refresh (seconds for franz-go's Produce).
	EndTxnCompletionWait time.Duration
	// ProducerIDBlockSize is how many producer ids are reserved by one
	// durable record in StateTopic (default 1000).
	ProducerIDBlockSize int64
}

func (o *Options) ensureDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.TransactionMaxTimeout, 15*time.Minute)
	def(&o.TransactionalIDExpiration, 7*24*time.Hour)
	def(&o.AbortTimedOutInterval, 10*time.Second)
	def(&o.MarkerRetryBackoff, 100*time.Millisecond)
	if o.EndTxnCompletionWait == 0 {
		o.EndTxnCompletionWait = 2 * time.Second
	}
	if o.ProducerIDBlockSize <= 0 {
		o.ProducerIDBlockSize = 1000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ErrClosed is returned by Handle and Verify after Close.
var ErrClosed = errors.New("txn: coordinator closed")
