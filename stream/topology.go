package stream

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Builder collects a topology: sources, operators, stores and sinks. It is
// used by one goroutine while the topology is declared and is read-only once
// passed to NewApp. Declaration errors (a missing TTL, a duplicate store
// name, ...) are collected and returned by NewApp.
//
// Execution model: the topology is cut at every repartition topic into
// sub-topologies (connected parts of the graph; a Merge or a stream-table
// Join connects its inputs); each sub-topology has one or more source topics.
// A task is one partition p of one sub-topology: it consumes partition p of
// every source topic of its sub-topology and runs on one goroutine at a time,
// so a task given the same input and state produces the same output. A
// stateful operator only ever sees the records of one task (see GroupByKey),
// so its store is one per task and its changelog partition is the task's
// partition.
type Builder struct {
	nodes   []*node
	sources []*sourceNode
	stores  []*storeSpec
	sinks   []*sinkSpec
	errs    []error
	// links joins two nodes' sub-topologies without a record edge (a
	// stream-table join and the table's source).
	links [][2]int
	// joinRepartitions counts the repartitioning joins per table store
	// (they name the repartition topics).
	joinRepartitions map[string]int
}

// NewBuilder returns an empty topology builder.
func NewBuilder() *Builder { return &Builder{} }

func (b *Builder) errorf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

// node is one operator of the graph. build instantiates the operator for one
// task given its children's instances (in the order of children) and returns
// the operator's input: a func(Record[K, V]) error for the node's input
// types, or a func(*kgo.Record) error for a source.
type node struct {
	id       int
	op       string
	children []*node
	build    func(t *task, children []any) any
}

// sourceNode reads one topic: an external input or an internal repartition
// topic (named by suffix and resolved against the app id).
type sourceNode struct {
	idx      int
	topic    string // external topic, or the suffix of an internal one
	internal bool
	node     *node
	// upstream sources feeding an internal topic (its partition count is
	// the largest of theirs, or the table's in a co-partitioned
	// sub-topology).
	upstream []int
	// table names the store a table source materialises ("" for a stream
	// source); the topic is that store's changelog.
	table string
}

// storeSpec is a keyed store declared by a stateful operator.
type storeSpec struct {
	name   string
	ttl    time.Duration
	source int // the only source whose tasks update this store
	op     string
	// table: the store materialises a table; its changelog is the
	// table's source topic (no changelog topic of its own, no TTL).
	table bool
	// decodes (tables only) reports whether a record of the table's topic
	// decodes with the table's codecs.
	decodes func(key, value []byte) bool
	codecs  *storeCodecs // key and value codecs, for queries (nil: bytes only)
}

// sinkSpec is an output topic.
type sinkSpec struct {
	topic    string // external topic, or the suffix of an internal one
	internal bool
	op       string
	sources  []int
}

func (b *Builder) addNode(op string, build func(t *task, children []any) any) *node {
	n := &node{id: len(b.nodes), op: op, build: build}
	b.nodes = append(b.nodes, n)
	return n
}

// Stream is a typed handle on a point of the topology. Operators return new
// handles; a handle may be used several times (fan-out: every downstream
// operator sees every record).
type Stream[K, V any] struct {
	b *Builder
	n *node
	// sources this stream derives from (sorted source indexes).
	sources []int
	// keyChanged is set after an operator that may change the key: a
	// stateful operator downstream must repartition first.
	keyChanged bool
}

func (s Stream[K, V]) valid() bool { return s.b != nil && s.n != nil }

// attach adds a child operator to s producing Stream[K2, V2]. mk
// instantiates the operator for a task given the function feeding its
// children.
func attach[K, V, K2, V2 any](s Stream[K, V], op string, keyChange bool,
	mk func(t *task, next func(Record[K2, V2]) error) func(Record[K, V]) error,
) Stream[K2, V2] {
	n := s.b.addNode(op, func(t *task, children []any) any {
		return mk(t, fanout[K2, V2](children))
	})
	s.n.children = append(s.n.children, n)
	return Stream[K2, V2]{b: s.b, n: n, sources: s.sources, keyChanged: s.keyChanged || keyChange}
}

// fanout calls every child in order; the first error stops the record (the
// task then retries the whole record: nothing of a failed attempt is kept).
func fanout[K, V any](children []any) func(Record[K, V]) error {
	fns := make([]func(Record[K, V]) error, len(children))
	for i, c := range children {
		fns[i] = c.(func(Record[K, V]) error)
	}
	switch len(fns) {
	case 0:
		return func(Record[K, V]) error { return nil }
	case 1:
		return fns[0]
	}
	return func(r Record[K, V]) error {
		for _, f := range fns {
			if err := f(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// SourceOpt configures a source of record type Record[K, V].
type SourceOpt[K, V any] interface{ applySource(*sourceCfg[K, V]) }

type sourceCfg[K, V any] struct {
	timestamp func(Record[K, V]) time.Time
}

type sourceOptFunc[K, V any] func(*sourceCfg[K, V])

func (f sourceOptFunc[K, V]) applySource(c *sourceCfg[K, V]) { f(c) }

// Timestamps sets the source's event-time extractor. It is given the decoded
// record (whose Timestamp is the Kafka record timestamp) and returns its event
// time. Default: the Kafka record timestamp. It must be a pure function of
// the record, never of the processing clock.
func Timestamps[K, V any](fn func(Record[K, V]) time.Time) SourceOpt[K, V] {
	return sourceOptFunc[K, V](func(c *sourceCfg[K, V]) { c.timestamp = fn })
}

// From declares a source reading topic with the given codecs. A topic may be
// a source once per topology. A record whose key or value does not decode
// goes to "<topic>.dlq" at once.
func From[K, V any](b *Builder, topic string, key Codec[K], value Codec[V], opts ...SourceOpt[K, V]) Stream[K, V] {
	var cfg sourceCfg[K, V]
	for _, o := range opts {
		o.applySource(&cfg)
	}
	if key == nil || value == nil {
		b.errorf("source %q: nil codec", topic)
	}
	if err := validTopic(topic); err != nil {
		b.errs = append(b.errs, fmt.Errorf("source: %w", err))
	}
	for _, s := range b.sources {
		if !s.internal && s.topic == topic {
			b.errorf("source %q declared twice (use the same Stream for both uses)", topic)
		}
	}
	return addSource(b, topic, false, nil, key, value, cfg.timestamp)
}

func addSource[K, V any](b *Builder, topic string, internal bool, upstream []int,
	key Codec[K], value Codec[V], ts func(Record[K, V]) time.Time,
) Stream[K, V] {
	src := &sourceNode{idx: len(b.sources), topic: topic, internal: internal, upstream: upstream}
	carriesKey := carries(key)
	src.node = b.addNode("source", func(t *task, children []any) any {
		next := fanout[K, V](children)
		return func(kr *kgo.Record) error {
			k, err := key.Decode(kr.Key)
			if err != nil {
				return &DecodeError{Part: "key", Err: err}
			}
			v, err := value.Decode(kr.Value)
			if err != nil {
				return &DecodeError{Part: "value", Err: err}
			}
			r := Record[K, V]{Key: k, Value: v, Timestamp: kr.Timestamp,
				Origin: Origin{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset},
				keyEnc: carry(key, carriesKey, kr.Key)}
			if len(kr.Headers) > 0 {
				r.Headers = make([]Header, len(kr.Headers))
				for i, h := range kr.Headers {
					r.Headers[i] = Header{Key: h.Key, Value: h.Value}
				}
			}
			if ts != nil {
				r.Timestamp = ts(r)
			}
			t.observe(r.Timestamp)
			return next(r)
		}
	})
	b.sources = append(b.sources, src)
	return Stream[K, V]{b: b, n: src.node, sources: []int{src.idx}}
}

// Map transforms each record's value. The key is unchanged, so no
// repartition is needed downstream.
func Map[K, V, V2 any](s Stream[K, V], fn func(Record[K, V]) (V2, error)) Stream[K, V2] {
	return attach(s, "map", false, func(t *task, next func(Record[K, V2]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			v, err := fn(r)
			if err != nil {
				return err
			}
			return next(Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
				keyEnc: r.keyEnc})
		}
	})
}

// FlatMap turns each record into zero or more records with the same key,
// timestamp, headers and origin.
func FlatMap[K, V, V2 any](s Stream[K, V], fn func(Record[K, V]) ([]V2, error)) Stream[K, V2] {
	return attach(s, "flatmap", false, func(t *task, next func(Record[K, V2]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			vs, err := fn(r)
			if err != nil {
				return err
			}
			for _, v := range vs {
				if err := next(Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers,
					Origin: r.Origin, keyEnc: r.keyEnc}); err != nil {
					return err
				}
			}
			return nil
		}
	})
}

// KeyBy sets a new key on each record (Kafka Streams' selectKey). A stateful
// operator downstream repartitions by the new key first.
func KeyBy[K, V, K2 any](s Stream[K, V], fn func(Record[K, V]) (K2, error)) Stream[K2, V] {
	return attach(s, "keyby", true, func(t *task, next func(Record[K2, V]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			k, err := fn(r)
			if err != nil {
				return err
			}
			return next(Record[K2, V]{Key: k, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
				valueEnc: r.valueEnc})
		}
	})
}

// Filter keeps the records for which fn returns true.
func (s Stream[K, V]) Filter(fn func(Record[K, V]) (bool, error)) Stream[K, V] {
	return attach(s, "filter", false, func(t *task, next func(Record[K, V]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			ok, err := fn(r)
			if err != nil || !ok {
				return err
			}
			return next(r)
		}
	})
}

// Peek calls fn for each record and passes the record on. fn runs again when
// a record is retried or replayed after a crash: keep side effects idempotent.
func (s Stream[K, V]) Peek(fn func(Record[K, V])) Stream[K, V] {
	return attach(s, "peek", false, func(t *task, next func(Record[K, V]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			fn(r)
			return next(r)
		}
	})
}

// Merge returns a stream of the records of s and others. Records of one input
// partition keep their order; there is no order across inputs. A stateful
// operator after a Merge of several sources repartitions first, so that its
// store belongs to one task.
func (s Stream[K, V]) Merge(others ...Stream[K, V]) Stream[K, V] {
	n := s.b.addNode("merge", func(t *task, children []any) any { return fanout[K, V](children) })
	out := Stream[K, V]{b: s.b, n: n, sources: slices.Clone(s.sources), keyChanged: s.keyChanged}
	for _, o := range append([]Stream[K, V]{s}, others...) {
		if o.b != s.b {
			s.b.errorf("merge: streams from different builders")
			continue
		}
		o.n.children = append(o.n.children, n)
		out.sources = append(out.sources, o.sources...)
		out.keyChanged = out.keyChanged || o.keyChanged
	}
	slices.Sort(out.sources)
	out.sources = slices.Compact(out.sources)
	return out
}

// Branch routes each record to the first branch whose predicate returns true.
// It returns len(preds)+1 streams: one per predicate, and last the records no
// predicate matched (so nothing is dropped silently).
func (s Stream[K, V]) Branch(preds ...func(Record[K, V]) (bool, error)) []Stream[K, V] {
	n := s.b.addNode("branch", func(t *task, children []any) any {
		outs := make([]func(Record[K, V]) error, len(children))
		for i, c := range children {
			outs[i] = c.(func(Record[K, V]) error)
		}
		return func(r Record[K, V]) error {
			for i, p := range preds {
				ok, err := p(r)
				if err != nil {
					return err
				}
				if ok {
					return outs[i](r)
				}
			}
			return outs[len(preds)](r)
		}
	})
	s.n.children = append(s.n.children, n)
	out := make([]Stream[K, V], len(preds)+1)
	for i := range out {
		// Each branch output is an identity node the user attaches to.
		bn := s.b.addNode("branch-out", func(t *task, children []any) any { return fanout[K, V](children) })
		n.children = append(n.children, bn)
		out[i] = Stream[K, V]{b: s.b, n: bn, sources: s.sources, keyChanged: s.keyChanged}
	}
	return out
}

// To writes every record to topic, partitioned by the murmur2 hash of the
// encoded key (Java-compatible; a nil key is spread over partitions). The
// topic must exist when the App starts.
func (s Stream[K, V]) To(topic string, key Codec[K], value Codec[V]) {
	if err := validTopic(topic); err != nil {
		s.b.errs = append(s.b.errs, fmt.Errorf("sink: %w", err))
	}
	if key == nil || value == nil {
		s.b.errorf("sink %q: nil codec", topic)
	}
	s.b.sinks = append(s.b.sinks, &sinkSpec{topic: topic, op: "to", sources: s.sources})
	sinkTo(s, "to", func(*task) string { return topic }, key, value)
}

func sinkTo[K, V any](s Stream[K, V], op string, topic func(*task) string, key Codec[K], value Codec[V]) {
	carriesKey, carriesValue := carries(key), carries(value)
	n := s.b.addNode(op, func(t *task, _ []any) any {
		tp := topic(t)
		return func(r Record[K, V]) error {
			kb, err := encodeCarried(key, carriesKey, r.keyEnc, r.Key)
			if err != nil {
				return fmt.Errorf("encode key for %s: %w", tp, err)
			}
			vb, err := encodeCarried(value, carriesValue, r.valueEnc, r.Value)
			if err != nil {
				return fmt.Errorf("encode value for %s: %w", tp, err)
			}
			t.emit(tp, -1, kb, vb, r.Timestamp, r.Headers)
			return nil
		}
	})
	s.n.children = append(s.n.children, n)
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// errInvalidName is returned for a topic, store or app name Kafka would reject.
var errInvalidName = errors.New("invalid name")

func validTopic(name string) error {
	if len(name) == 0 || len(name) > 249 || !nameRE.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("%w %q: want 1-249 characters of [a-zA-Z0-9._-]", errInvalidName, name)
	}
	return nil
}
