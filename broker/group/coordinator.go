// Package group is weir's consumer group coordinator: the classic protocol
// (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, eager and cooperative clients,
// static membership), the KIP-848 protocol (ConsumerGroupHeartbeat with a
// server-side sticky assignor) and committed offsets, which are stored as
// records in the single partition of the compacted internal topic
// "__consumer_offsets".
//
// # Concurrency
//
// All group state is owned by one goroutine, the loop
// (broker/internal/ownerloop, shared with the transaction coordinator;
// loop.go wires it to the groups' timers). Handle turns a request into a
// closure run on the loop; requests that must wait
// (JoinGroup, SyncGroup) park a reply channel in the member and the loop
// answers it later. Time comes only from Options.Now: timers (session,
// rebalance, initial delay, offset retention) are deadlines checked by the
// loop before every event and when the earliest deadline passes, so a test
// with a fake clock advances time and calls tick (no sleeps).
//
// Writes to the offsets log are done by one writer goroutine (internal/ilog)
// in the order the loop queued them; a record's effect on memory is applied
// on the loop after its append returned, in the same order. So the
// in-memory state is always a prefix-replay of the log, and a restart that
// replays the log rebuilds what clients were acknowledged.
//
// # Files
//
//	coordinator.go       Options, NewCoordinator, Handle (dispatch through the
//	                     API table each handler file registers in), Close
//	loop.go              the groups' timers on the owner loop
//	group.go             the group (classic or KIP-848) and its offsets
//	classic.go           JoinGroup, SyncGroup, Heartbeat, LeaveGroup; static members
//	consumer.go          ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848)
//	assign.go            the server-side sticky "uniform" assignor
//	consumer_persist.go  KIP-848 membership records and their restore
//	commit.go            the path OffsetCommit and TxnOffsetCommit share
//	offsets.go           OffsetCommit, OffsetFetch, OffsetDelete, offset expiry
//	txnoffsets.go        TxnOffsetCommit and transaction markers (txn.OffsetCommitter)
//	admin.go             FindCoordinator, DescribeGroups, ListGroups, DeleteGroups
//	records.go           the __consumer_offsets record format, replay
//	store.go             the offsets log behind the single writer (internal/ilog)
//	lag.go, metrics.go   lag (records and time), Prometheus metrics
//
// docs/format/consumer-offsets.md draws the record layouts; BENCHMARK.md
// has the rebalance and commit measurements.
package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/ilog"
	"github.com/weirhq/weir/broker/internal/kapi"
	"github.com/weirhq/weir/broker/internal/ownerloop"
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

// TimestampReader is optionally implemented by a Topics: the timestamp of
// the record at offset (the first record at or after it), used for lag in
// time. ok is false when there is no such record (caught up, or the
// partition is unknown).
type TimestampReader interface {
	TimestampAt(topic string, partition int32, offset int64) (ts time.Time, ok bool)
}

// TopicLister is optionally implemented by a Topics: the names of all
// topics, for KIP-848 regular-expression subscriptions.
type TopicLister interface {
	TopicNames() []string
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

	// TopicDescribable reports whether principal, connected from host
	// (an IP address), may DESCRIBE topic. A KIP-848 regular-expression
	// subscription resolves to the matching topics its member's principal
	// may describe, as Kafka's coordinator filters it with the
	// authorizer, so no member is assigned a topic it could not even list;
	// it is asked again on every heartbeat, so an ACL change moves the
	// subscription. Nil: every topic. Called with the coordinator's state
	// held: it must not call back into the coordinator.
	TopicDescribable func(principal, host, topic string) bool

	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer

	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms, default 3s; <0 means none
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms, default 6s
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms, default 30m
	OffsetsRetention      time.Duration // offsets.retention.minutes, default 7d

	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms
	// (KIP-848 groups), default 1s (Kafka: 5s; a single node can afford
	// it, and it bounds how long a stable member takes to learn that it
	// must give up or may take partitions); ConsumerSessionTimeout is
	// group.consumer.session.timeout.ms, default 45s.
	ConsumerHeartbeatInterval time.Duration
	ConsumerSessionTimeout    time.Duration
	// ConsumerReconcileInterval is the heartbeat interval given to a
	// KIP-848 member while it converges to its target assignment
	// (revoking or waiting for released partitions), default 200ms.
	ConsumerReconcileInterval time.Duration

	// RetentionCheckInterval is offsets.retention.check.interval.ms,
	// default 10m.
	RetentionCheckInterval time.Duration
}

func (o *Options) ensureDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.InitialRebalanceDelay, 3*time.Second)
	if o.InitialRebalanceDelay < 0 {
		o.InitialRebalanceDelay = 0
	}
	def(&o.MinSessionTimeout, 6*time.Second)
	def(&o.MaxSessionTimeout, 30*time.Minute)
	def(&o.OffsetsRetention, 7*24*time.Hour)
	def(&o.ConsumerHeartbeatInterval, time.Second)
	def(&o.ConsumerSessionTimeout, 45*time.Second)
	def(&o.ConsumerReconcileInterval, 200*time.Millisecond)
	def(&o.RetentionCheckInterval, 10*time.Minute)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ErrClosed is returned by Handle after Close.
var ErrClosed = errors.New("group: coordinator closed")

// Coordinator is the group coordinator. Its methods are safe for
// concurrent use.
type Coordinator struct {
	opts   Options
	logger *slog.Logger
	store  store

	loop *ownerloop.Loop // owns the groups (loop.go)
	w    *ilog.Writer
	met  *metrics

	// Loop-owned state.
	groups             map[string]*group
	txns               map[int64]*txnOffsets // offsets staged by open transactions, by producer ID
	nextTick           time.Time             // earliest deadline at the last full check (loop.go)
	lastScan           time.Time             // when that check ran
	dirty              bool                  // an event ran since
	nextID             uint64
	nextRetentionCheck time.Time
}

// NewCoordinator replays the offsets partition and returns a running
// coordinator.
func NewCoordinator(opts Options) (*Coordinator, error) {
	if opts.Offsets == nil {
		return nil, errors.New("group: Options.Offsets is required")
	}
	if opts.Topics == nil {
		return nil, errors.New("group: Options.Topics is required")
	}
	opts.ensureDefaults()
	c := &Coordinator{
		opts:   opts,
		logger: opts.Logger,
		groups: make(map[string]*group),
		txns:   make(map[int64]*txnOffsets),
	}
	st, err := newLogStore(opts.Offsets)
	if err != nil {
		return nil, err
	}
	c.store = st
	met, err := newMetrics(c, opts.Registerer)
	if err != nil {
		return nil, err
	}
	c.met = met
	// Replay may queue records; the writer starts after it. Results are
	// handed to the loop, or dropped once Close began.
	c.w = ilog.New(ilog.Options{Append: c.store.append, Deliver: c.post})
	start := opts.Now()
	n, err := c.replay()
	if err != nil {
		met.unregister()
		return nil, fmt.Errorf("group: replay %s: %w", offsetsTopicName, err)
	}
	c.logger.Info("offsets replayed", "records", n, "groups", len(c.groups), "took", opts.Now().Sub(start))
	c.nextRetentionCheck = opts.Now().Add(opts.RetentionCheckInterval)
	c.startLoop()
	go c.w.Run()
	return c, nil
}

const offsetsTopicName = "__consumer_offsets"

// apis are the requests Handle serves, each registered (regAPI) next to
// its handler, at the versions the handler implements: admin.go,
// classic.go, consumer.go, offsets.go.
var apis kapi.Table[*Coordinator]

// regAPI registers h as the handler of key for versions min..max. Init
// functions only.
func regAPI[R kmsg.Request](key kmsg.Key, min, max int16, h func(*Coordinator, context.Context, R) (kmsg.Response, error)) {
	kapi.Register(&apis, key, min, max, h)
}

// APIVersions are the request keys and version ranges Handle serves,
// sorted by key, for the broker's ApiVersions response.
func APIVersions() []kmsg.ApiVersionsResponseApiKey { return apis.Versions() }

// Handle answers one group-related request. It may block (JoinGroup waits
// for the rebalance); it returns when ctx is done or the coordinator closes.
// A request of a key Handle does not serve, or of a version outside its
// registered range, is an error (the broker closes the connection).
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	h, err := apis.Lookup(req)
	if err != nil {
		return nil, fmt.Errorf("group: %w", err)
	}
	resp, err := h(c, ctx, req)
	if err != nil {
		return nil, err
	}
	resp.SetVersion(req.GetVersion())
	return resp, nil
}

// Close stops the coordinator: the loop and the writer exit, parked
// requests return ErrClosed. Queued but unacknowledged writes are
// abandoned (their requests fail). It does not close Options.Offsets.
func (c *Coordinator) Close() error {
	if !c.loop.Stop() {
		return nil
	}
	// Append what is still queued (group metadata, member records,
	// commits whose requests already returned ErrClosed: appending an
	// unacknowledged commit is harmless, the client retries it).
	if n, err := c.w.StopAndDrain(); err != nil {
		c.logger.Warn("offsets log: writes queued at close not appended", "writes", n, "err", err)
	}
	c.met.unregister()
	return nil
}

// errCode is the Kafka error code of a kerr error (0 for nil).
func errCode(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
}
