// Package share is weir's share group coordinator (KIP-932, Kafka 4.x
// "queues"): share group membership and assignment (ShareGroupHeartbeat,
// ShareGroupDescribe), the delivery of records to members through
// acquisition locks (ShareFetch, ShareAcknowledge, share sessions), and the
// share-group admin APIs (describe, alter and delete share group offsets).
//
// Layout, one file per concern:
//
//	coordinator.go  options, replay, the durable writer, timers, dispatch
//	partition.go    the share-partition state machine (in-flight records)
//	acquire.go      acquiring records from a partition's log
//	group.go        membership and assignment (ShareGroupHeartbeat/Describe)
//	fetch.go        share sessions, ShareFetch and ShareAcknowledge
//	admin.go        share group offsets admin, list, delete, group configs
//	state.go        the durable state records (__share_group_state)
//	config.go       group.share.* defaults and the share.* group configs
//	metrics.go      Prometheus metrics
//
// # Guarantees
//
//   - A record is delivered to at most one member at a time: it is acquired
//     by one member until that member acknowledges it, releases it, its
//     lock (share.record.lock.duration.ms) expires, or its share session
//     closes; only then may another member acquire it.
//   - A record is delivered at most the delivery count limit times
//     (share.delivery.count.limit, default 5), across broker restarts: the
//     incremented delivery counts of acquired records are durable (fsynced
//     to __share_group_state) before the records are handed out, and a
//     record whose count reached the limit is archived instead of being
//     made available again.
//   - An acknowledgement is durable before it is answered, so an accepted
//     or rejected record is never redelivered after a restart.
//   - Acquisition locks do not survive a restart: a record acquired when
//     the broker stopped is available again after it, with its count.
//   - Internal topics are never assigned to or delivered to share groups.
//
// # Concurrency
//
// All coordinator state is guarded by one mutex (Coordinator.mu).
// Durable writes are queued under the mutex, so they reach the log in the
// order the state changed, and waited for after it is released. A
// ShareFetch waiting for records releases the mutex while it waits.
package share

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/ilog"
	"github.com/weirhq/weir/broker/internal/kapi"
	"github.com/weirhq/weir/broker/internal/recbatch"
	wlog "github.com/weirhq/weir/broker/log"
)

// StateTopic is the internal topic holding share-partition state.
const StateTopic = "__share_group_state"

// PartitionLog is what the coordinator reads of a topic-partition;
// *wlog.Log satisfies it.
type PartitionLog interface {
	HighWatermark() int64
	LogStartOffset() int64
	Read(offset int64, maxBytes int, upTo int64) (wlog.ReadResult, error)
	// Changed is closed when the partition's high watermark or log start
	// moves.
	Changed() <-chan struct{}
	// LastStableOffset and AbortedTransactions serve
	// share.isolation.level=read_committed.
	LastStableOffset() int64
	AbortedTransactions(from, to int64) []wlog.AbortedTxn
}

// Topics is the broker's topic registry as the coordinator sees it.
type Topics interface {
	// Partitions is the partition count of a topic.
	Partitions(topic string) (int32, bool)
	TopicID(topic string) ([16]byte, bool)
	TopicName(id [16]byte) (string, bool)
	// Internal reports an internal topic: never assigned or delivered.
	Internal(topic string) bool
	// Log is one partition's log.
	Log(topic string, partition int32) (PartitionLog, bool)
}

// StateLog is the state topic's single partition; *wlog.Log satisfies it.
type StateLog interface {
	Append(batches []byte, durable bool) (wlog.AppendResult, error)
	Read(offset int64, maxBytes int, upTo int64) (wlog.ReadResult, error)
	HighWatermark() int64
	LogStartOffset() int64
}

// Options configure a Coordinator. Zero durations and limits mean
// Kafka's defaults (config.go).
type Options struct {
	State  StateLog // required
	Topics Topics   // required

	HeartbeatInterval  time.Duration // group.share.heartbeat.interval.ms
	SessionTimeout     time.Duration // group.share.session.timeout.ms
	RecordLockDuration time.Duration // group.share.record.lock.duration.ms
	DeliveryCountLimit int16         // group.share.delivery.count.limit
	MaxRecordLocks     int           // group.share.partition.max.record.locks
	MaxSize            int           // group.share.max.size
	MaxShareSessions   int           // group.share.max.share.sessions (default 2000)

	// TickInterval is how often lock and member expiry is checked
	// (default 100ms); negative: never (tests call Tick).
	TickInterval time.Duration

	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (o *Options) ensureDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&o.SessionTimeout, DefaultSessionTimeout)
	def(&o.RecordLockDuration, DefaultRecordLockDuration)
	if o.DeliveryCountLimit <= 0 {
		o.DeliveryCountLimit = DefaultDeliveryCountLimit
	}
	if o.MaxRecordLocks <= 0 {
		o.MaxRecordLocks = DefaultMaxRecordLocks
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.MaxShareSessions <= 0 {
		o.MaxShareSessions = 2000
	}
	if o.TickInterval == 0 {
		o.TickInterval = 100 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ErrClosed is returned by Handle after Close.
var ErrClosed = errors.New("share: coordinator closed")

// Coordinator is the share group coordinator. Its methods are safe for
// concurrent use.
type Coordinator struct {
	opts   Options
	logger *slog.Logger
	w      *ilog.Writer
	met    *metrics

	mu       sync.Mutex // guards everything below
	closed   bool
	groups   map[string]*group
	parts    map[partKey]*sharePartition
	confs    map[string]map[string]string // group configs, by group
	sessions map[sessKey]*session
	avail    chan struct{} // closed (and replaced) when records become available again

	stop chan struct{}
	done chan struct{}
}

// NewCoordinator replays the state topic and returns a running coordinator.
func NewCoordinator(opts Options) (*Coordinator, error) {
	if opts.State == nil || opts.Topics == nil {
		return nil, errors.New("share: Options.State and Options.Topics are required")
	}
	opts.ensureDefaults()
	c := &Coordinator{
		opts:     opts,
		logger:   opts.Logger,
		groups:   make(map[string]*group),
		parts:    make(map[partKey]*sharePartition),
		confs:    make(map[string]map[string]string),
		sessions: make(map[sessKey]*session),
		avail:    make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	n, err := c.replay()
	if err != nil {
		return nil, fmt.Errorf("share: replay %s: %w", StateTopic, err)
	}
	met, err := newMetrics(c, opts.Registerer)
	if err != nil {
		return nil, err
	}
	c.met = met
	c.w = ilog.New(ilog.Options{
		Append: func(b []byte, durable bool) (int64, error) {
			r, err := opts.State.Append(b, durable)
			return r.BaseOffset, err
		},
		Deliver: func(fn func()) { fn() },
		OnError: func(writes int, err error) {
			c.logger.Error("share state write failed", "writes", writes, "err", err)
		},
	})
	go c.w.Run()
	c.logger.Info("share state replayed", "records", n, "partitions", len(c.parts), "groups", len(c.confs))
	go c.tickLoop()
	return c, nil
}

// replay applies every record of the state topic, in order.
func (c *Coordinator) replay() (int, error) {
	st := c.opts.State
	hw := st.HighWatermark()
	n := 0
	for off := st.LogStartOffset(); off < hw; {
		rr, err := st.Read(off, 1<<20, hw)
		if err != nil {
			return n, err
		}
		next, _, err := recbatch.Walk(rr.Data, func(b *recbatch.Batch) error {
			if b.Attributes&wlog.AttrControl != 0 {
				return nil
			}
			return b.Records(func(_ int64, key, value []byte) error {
				n++
				return c.applyRecord(key, value)
			})
		})
		if rr.Release != nil {
			rr.Release()
		}
		if err != nil {
			return n, err
		}
		if next <= off {
			return n, fmt.Errorf("no progress reading at offset %d", off)
		}
		off = next
	}
	return n, nil
}

// applyRecord applies one state record (replay).
func (c *Coordinator) applyRecord(key, value []byte) error {
	k, err := decodeKey(key)
	if err != nil {
		return err
	}
	switch k.kind {
	case keyPartition:
		if value == nil {
			delete(c.parts, k.part)
			return nil
		}
		p := &sharePartition{key: k.part}
		if err := decodePartition(value, p, int64(c.opts.MaxRecordLocks)*4+1<<20); err != nil {
			return err
		}
		if name, ok := c.opts.Topics.TopicName(k.part.topicID); ok {
			p.topic = name
		} else {
			return nil // the topic was deleted: its state goes with it
		}
		c.parts[k.part] = p
	case keyGroupConf:
		if value == nil {
			delete(c.confs, k.group)
			return nil
		}
		m, err := decodeGroupConf(value)
		if err != nil {
			return err
		}
		c.confs[k.group] = m
	}
	return nil
}

// pendingWrite is a queued durable write a request waits for.
type pendingWrite chan error

// wait blocks until the write is durable (or failed); nil is a no-op.
func (w pendingWrite) wait(ctx context.Context) error {
	if w == nil {
		return nil
	}
	select {
	case err := <-w:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// persist queues the records (key, value; nil value: tombstone) as one
// durable write. Lock must be held: writes reach the log in lock order.
func (c *Coordinator) persist(recs []recbatch.Record) pendingWrite {
	if len(recs) == 0 {
		return nil
	}
	done := make(pendingWrite, 1)
	c.w.Enqueue(ilog.Write{
		Batch:   recbatch.Encode(recs, c.opts.Now().UnixMilli(), -1, -1, 0),
		Records: len(recs),
		Durable: true,
		Done:    func(_ int64, err error) { done <- err },
	})
	c.met.stateWrites.Inc()
	return done
}

// snapshots are the state records of the partitions in dirty.
func snapshots(dirty map[*sharePartition]bool) []recbatch.Record {
	recs := make([]recbatch.Record, 0, len(dirty))
	for p := range dirty {
		recs = append(recs, recbatch.Record{Key: partitionKey(p.key), Value: encodePartition(p)})
	}
	return recs
}

// wake tells waiting fetches that records became available. Lock must be
// held.
func (c *Coordinator) wake() {
	close(c.avail)
	c.avail = make(chan struct{})
}

func (c *Coordinator) tickLoop() {
	defer close(c.done)
	if c.opts.TickInterval < 0 {
		<-c.stop
		return
	}
	t := time.NewTicker(c.opts.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.Tick()
		}
	}
}

// Tick expires acquisition locks and members whose deadlines passed by
// the coordinator's clock, and drops the share state of deleted topics. The coordinator calls it every TickInterval;
// tests with a fake clock call it after moving the clock.
func (c *Coordinator) Tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	now := c.opts.Now()
	for _, g := range c.groups {
		for _, m := range g.members {
			if !now.Before(m.deadline) {
				c.logger.Info("share group member expired", "group", g.id, "member", m.id)
				c.removeMember(g, m)
			}
		}
	}
	// An empty group with neither share state nor configs is forgotten,
	// so groups a client named once do not accumulate.
	stateful := map[string]bool{}
	for k := range c.parts {
		stateful[k.group] = true
	}
	for id, g := range c.groups {
		if _, conf := c.confs[id]; len(g.members) == 0 && !stateful[id] && !conf {
			delete(c.groups, id)
		}
	}
	dirty := map[*sharePartition]bool{}
	released := 0
	var gone []recbatch.Record
	for k := range c.parts {
		if _, ok := c.opts.Topics.TopicName(k.topicID); !ok {
			// The topic was deleted: its share state goes with it.
			delete(c.parts, k)
			gone = append(gone, recbatch.Record{Key: partitionKey(k)})
		}
	}
	c.persist(gone)
	for _, p := range c.parts {
		if n := p.expire(now, c.settings(p.key.group).limit); n > 0 {
			released += n
			c.met.lockExpired.Add(float64(n))
			dirty[p] = true // an archived record changes the durable state
		}
	}
	if released > 0 {
		c.wake()
		c.persist(snapshots(dirty))
	}
}

// apis are the requests Handle serves, registered next to their handlers.
var apis kapi.Table[*Coordinator]

func regAPI[R kmsg.Request](key kmsg.Key, min, max int16, h func(*Coordinator, context.Context, R) (kmsg.Response, error)) {
	kapi.Register(&apis, key, min, max, h)
}

// APIVersions are the request keys and version ranges Handle serves.
func APIVersions() []kmsg.ApiVersionsResponseApiKey { return apis.Versions() }

// Handle answers one request of an API listed by APIVersions.
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	h, err := apis.Lookup(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	return h(c, ctx, req)
}

// Close stops the timers and flushes the queued state writes.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.wake()
	c.mu.Unlock()
	close(c.stop)
	<-c.done
	c.w.StopAndDrain()
	c.met.unregister()
	return nil
}

// client identifies the connection a request came on (ShareGroupDescribe
// reports it per member).
type clientKey struct{}

type requestClient struct{ id, host string }

// WithClient returns a context telling the coordinator the request's
// client ID and host.
func WithClient(ctx context.Context, clientID, host string) context.Context {
	return context.WithValue(ctx, clientKey{}, requestClient{clientID, host})
}

type connKey struct{}

// WithConnection returns a context telling the coordinator that conn is
// the context of the request's connection, done when the connection
// closes: a share session ends with the connection that opened it.
func WithConnection(ctx, conn context.Context) context.Context {
	return context.WithValue(ctx, connKey{}, conn)
}

func clientOf(ctx context.Context) requestClient {
	rc, _ := ctx.Value(clientKey{}).(requestClient)
	return rc
}
