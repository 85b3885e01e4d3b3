// Package registry is weir's schema registry: the Confluent Schema Registry
// REST API (v1) over schemas kept in a compacted Kafka topic, so that every
// Confluent serializer and tool works against weir unchanged. `weir serve`
// and `weir dev` run one beside the broker; `weir registry --brokers` runs
// one against any Kafka-compatible cluster.
//
// # State
//
// The topic (_schemas, one partition, cleanup.policy=compact) is the only
// state: every registry replays it from the start when it starts and keeps
// consuming it (read_committed), applying records in offset order to an
// in-memory state (state.go) that answers every read. A write is answered
// only once its records are committed (acks=all) and applied by this
// registry's own consumer, so a client that reads after a write sees it,
// and a registry restarted from the topic has every answered write.
// The record layout is the Confluent registry's (records.go).
//
// # One writer
//
// Writes go through Kafka transactions under one transactional id shared by
// every registry on the cluster (Config.TransactionalID). A registry that
// must write and is not (or no longer) the writer takes over: it starts a
// new producer, whose InitProducerID fences every earlier holder of the id
// (the broker rejects their later produces and commits, and aborts their
// open transaction), commits a NOOP record, and replays the topic up to
// that record. From then on its state holds every committed write, and it
// checks (compatibility, ids, versions) and commits its own writes against
// it. If another registry takes over in between, this registry's commit is
// fenced: it takes over again and re-checks against the new state. So
// writes from several registries are serialized by the log, each checked
// against everything before it, and any registry accepts writes (no
// forwarding: the last to write holds the lease). Registries that only read
// never write. Within one registry, writes are serialized by a mutex.
//
// Ids are global: one per distinct schema (type, normalized text and
// references), the same in every subject, never reused (MAXID records keep
// the highest id across permanent deletes and compaction).
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of Config.
const (
	DefaultTopic           = "_schemas"
	DefaultTransactionalID = "weir-schema-registry"
	DefaultMaxRequestBytes = 4 << 20
	DefaultMaxSchemaBytes  = 1 << 20
	DefaultWriteTimeout    = 30 * time.Second
)

// Config configures a Registry.
type Config struct {
	// Brokers are the seed brokers of the cluster holding the topic.
	Brokers []string
	// ClientOpts are added to the registry's Kafka clients (TLS, SASL, ...).
	ClientOpts []kgo.Opt
	// Topic holds the schemas. Default DefaultTopic.
	Topic string
	// TransactionalID is shared by every registry of one topic. Default
	// DefaultTransactionalID.
	TransactionalID string
	// MaxRequestBytes bounds a request body (larger: 413). Default
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxSchemaBytes bounds a schema's text (larger: 422). Default
	// DefaultMaxSchemaBytes.
	MaxSchemaBytes int
	// WriteTimeout bounds one write to the topic. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Logger gets the registry's logs. Default: discarded.
	Logger *slog.Logger
	// Authorizer decides which requests of the REST API are allowed
	// (the operations are listed in authz.go's Action). Default: nil,
	// every request is allowed.
	Authorizer Authorizer
}

func (c *Config) ensureDefaults() {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.TransactionalID == "" {
		c.TransactionalID = DefaultTransactionalID
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxSchemaBytes <= 0 {
		c.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Registry is a running schema registry. Its methods are safe for
// concurrent use.
//
// Lock order: writeMu before mu.
type Registry struct {
	cfg Config
	log *slog.Logger

	mu      sync.RWMutex
	st      *state
	applied chan struct{} // closed and replaced whenever records are applied

	writeMu  sync.Mutex
	producer *kgo.Client // nil until this registry takes over as writer

	consumer *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start creates the topic if missing, replays it, takes over as writer and
// serves until Close. ctx bounds the start only.
func Start(ctx context.Context, cfg Config) (*Registry, error) {
	cfg.ensureDefaults()
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("registry: no brokers")
	}
	r := &Registry{cfg: cfg, log: cfg.Logger, st: newState(), applied: make(chan struct{}), done: make(chan struct{})}
	if err := r.ensureTopic(ctx); err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, cfg.ClientOpts...)
	cons, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("registry: consumer: %w", err)
	}
	r.consumer = cons
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.consume(runCtx)
	r.writeMu.Lock()
	err = r.takeOver(ctx)
	r.writeMu.Unlock()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("registry: replay %s: %w", cfg.Topic, err)
	}
	r.mu.RLock()
	r.log.Info("schema registry started", "topic", cfg.Topic, "subjects", len(r.st.subjects), "schemas", len(r.st.ids))
	r.mu.RUnlock()
	return r, nil
}

// Close stops the registry's clients. In-flight writes fail.
func (r *Registry) Close() error {
	r.cancel()
	r.consumer.Close()
	<-r.done
	r.writeMu.Lock()
	if r.producer != nil {
		r.producer.Close()
		r.producer = nil
	}
	r.writeMu.Unlock()
	return nil
}

func (r *Registry) ensureTopic(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...)}, r.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("registry: admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, r.cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("registry: create topic %s: %w", r.cfg.Topic, err)
	}
	return nil
}

// consume applies the topic's committed records to the state until ctx is
// done.
func (r *Registry) consume(ctx context.Context) {
	defer close(r.done)
	for {
		fs := r.consumer.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			r.log.Warn("schema registry: fetching the schemas topic", "topic", t, "partition", p, "err", err)
		})
		if fs.NumRecords() == 0 {
			continue
		}
		r.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Partition == 0 {
				r.st.apply(rec.Key, rec.Value, rec.Offset)
			}
		})
		close(r.applied)
		r.applied = make(chan struct{})
		r.mu.Unlock()
	}
}

// waitApplied waits until the record at offset is applied.
func (r *Registry) waitApplied(ctx context.Context, offset int64) error {
	for {
		r.mu.RLock()
		done, ch := r.st.applied >= offset, r.applied
		r.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			return errors.New("registry closed")
		}
	}
}

// takeOver makes this registry the writer: a new transactional producer
// (fencing every earlier one), a committed NOOP record, and the replay up
// to it. writeMu held.
func (r *Registry) takeOver(ctx context.Context) error {
	if r.producer != nil {
		r.producer.Close()
		r.producer = nil
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.TransactionalID(r.cfg.TransactionalID),
		kgo.DefaultProduceTopic(r.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}, r.cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	off, err := commitRecords(ctx, cl, r.cfg.Topic, []record{{key: encodeKey(keyNoop, nil, 0)}})
	if err != nil {
		cl.Close()
		return err
	}
	if err := r.waitApplied(ctx, off); err != nil {
		cl.Close()
		return err
	}
	r.producer = cl
	return nil
}

// commitRecords writes recs in one transaction and returns the offset of
// the last one once committed.
func commitRecords(ctx context.Context, cl *kgo.Client, topic string, recs []record) (int64, error) {
	if err := cl.BeginTransaction(); err != nil {
		return 0, err
	}
	krs := make([]*kgo.Record, len(recs))
	for i, rec := range recs {
		krs[i] = &kgo.Record{Topic: topic, Partition: 0, Key: rec.key, Value: rec.value}
	}
	res := cl.ProduceSync(ctx, krs...)
	if err := res.FirstErr(); err != nil {
		abortCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cl.EndTransaction(abortCtx, kgo.TryAbort)
		return 0, err
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return 0, err
	}
	return krs[len(krs)-1].Offset, nil
}

// maxWriteAttempts bounds how often one write is re-checked after losing
// the writer lease to another registry.
const maxWriteAttempts = 5

// write runs plan against the current state and commits the records it
// returns (none: nothing to write), then waits until they are applied.
// plan runs with the state's write lock held and may run more than once
// (after a takeover it is re-checked against the newer state); an *Error
// from plan is returned as is.
func (r *Registry) write(ctx context.Context, plan func(st *state) ([]record, error)) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
	defer cancel()
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	var lastErr error
	for range maxWriteAttempts {
		if r.producer == nil {
			if err := r.takeOver(ctx); err != nil {
				lastErr = err
				if ctx.Err() != nil {
					break
				}
				continue
			}
		}
		r.mu.Lock()
		recs, err := plan(r.st)
		r.mu.Unlock()
		if err != nil || len(recs) == 0 {
			return err
		}
		off, err := commitRecords(ctx, r.producer, r.cfg.Topic, recs)
		if err != nil {
			// Fenced, or an ambiguous commit: take over again (which settles
			// the open transaction either way) and re-check.
			r.log.Info("schema registry: write not committed, taking over the schemas topic again", "err", err)
			r.producer.Close()
			r.producer = nil
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if err := r.waitApplied(ctx, off); err != nil {
			return newError(500, CodeOperationTimeout, "write committed but not yet applied: %v", err)
		}
		return nil
	}
	if ctx.Err() != nil {
		return newError(500, CodeOperationTimeout, "Operation timed out writing to the schemas topic: %v", lastErr)
	}
	return errStore(lastErr)
}
