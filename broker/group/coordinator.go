// Package group is weir's consumer group coordinator: the classic protocol
// (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, eager and cooperative clients,
// static membership), the KIP-848 protocol (ConsumerGroupHeartbeat with a
// server-side sticky assignor) and committed offsets, which are stored as
// records in the single partition of the compacted internal topic
// "__consumer_offsets".
package group

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topics is what the coordinator needs to know about the broker's topics.
// It is implemented by the broker and must be safe for concurrent use.
type Topics interface {
	Partitions(topic string) (n int32, ok bool)
	TopicID(topic string) (id [16]byte, ok bool)
	TopicName(id [16]byte) (string, bool)
	HighWatermark(topic string, partition int32) (int64, bool)
	LogStartOffset(topic string, partition int32) (int64, bool)
}

// OffsetsLog is the part of the offsets partition's log the coordinator
// uses. *wlog.Log (broker/log) satisfies it; tests may wrap it to inject
// failures.
type OffsetsLog interface {
	HighWatermark() int64
	LogStartOffset() int64
}

// Options configures a Coordinator. Zero durations mean Kafka's defaults.
type Options struct {
	NodeID int32
	Host   string
	Port   int32

	// Offsets is the single partition of "__consumer_offsets". It is
	// replayed by NewCoordinator; an acknowledged OffsetCommit is appended
	// durable (fsynced) before the response.
	Offsets OffsetsLog
	Topics  Topics

	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer

	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms, default 3s
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms, default 6s
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms, default 30m
	OffsetsRetention      time.Duration // offsets.retention.minutes, default 7d
}

// Coordinator is the group coordinator. Its methods are safe for
// concurrent use.
type Coordinator struct {
	opts Options
}

// NewCoordinator replays the offsets partition and returns a running
// coordinator.
func NewCoordinator(opts Options) (*Coordinator, error) {
	if opts.Offsets == nil {
		return nil, errors.New("group: Options.Offsets is required")
	}
	return &Coordinator{opts: opts}, nil
}

// Handle answers one group-related request. It may block (JoinGroup waits
// for the rebalance); it returns when ctx is done.
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return nil, errors.New("group: not implemented yet")
}

// APIKeys are the request keys Handle serves.
func (c *Coordinator) APIKeys() []int16 {
	return nil
}

// Close stops the coordinator; pending requests return.
func (c *Coordinator) Close() error { return nil }
