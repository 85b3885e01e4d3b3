package stream

import (
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
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
	// globals are the global tables (globaltable.go).
	globals []*globalSpec
}

// NewBuilder returns an empty topology builder.
func NewBuilder() *Builder { return &Builder{} }

// errorf records a declaration error. A nil builder (the zero Stream's) has
// nowhere to record it: NewApp never sees such a stream.
func (b *Builder) errorf(format string, args ...any) { b.addErr(fmt.Errorf(format, args...)) }

func (b *Builder) addErr(err error) {
	if b != nil && err != nil {
		b.errs = append(b.errs, err)
	}
}

// node is one operator of the graph. build instantiates the operator for one
// task given its children's instances (in the order of children) and returns
// the operator's input: a func(Record[K, V]) error for the node's input
// types, or a func(*kgo.Record) error for a source.
type node struct {
	id       int
	op       string
	name     string // Named, or "<op>-<id>"
	retry    *Retry // the operator's error policy (nil: the App's)
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
	// noExpiry: the store keeps its keys (ttl 0), for this stated reason.
	noExpiry string
	// decodes (tables only) reports whether a record of the table's topic
	// decodes with the table's codecs.
	decodes func(key, value []byte) bool
	codecs  *storeCodecs // key and value codecs, for queries (nil: bytes only)
	// window describes a windowed operator's store (window.go; "" for
	// other stores): its windows, grace, late policy and emission; win is
	// its declaration.
	window string
	win    *windowDecl
}

// sinkSpec is an output topic.
type sinkSpec struct {
	topic    string // external topic, or the suffix of an internal one
	internal bool
	op       string
	sources  []int
}

func (b *Builder) addNode(op string, build func(t *task, children []any) any) *node {
	n := &node{id: len(b.nodes), op: op, name: op + "-" + strconv.Itoa(len(b.nodes)), build: build}
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

// valid reports whether s is a point of the topology. An invalid stream is
// what an operator returns when its declaration failed (the error is
// recorded in the builder and returned by NewApp): every operator applied to
// an invalid stream records nothing more and returns an invalid stream (or
// table), so a declaration error travels to NewApp whatever is chained after
// it, and never panics.
func (s Stream[K, V]) valid() bool { return s.b != nil && s.n != nil }

// invalid returns the invalid stream of s's builder (see valid).
func invalid[K, V any](b *Builder) Stream[K, V] { return Stream[K, V]{b: b} }

// link adds a node fed by s's node and returns it; nil if s is invalid. Every
// operator adds its nodes through link (or Builder.addNode for a source), so
// none dereferences an invalid stream's node.
func (s Stream[K, V]) link(op string, build func(t *task, children []any) any) *node {
	if !s.valid() {
		return nil
	}
	n := s.b.addNode(op, build)
	s.n.children = append(s.n.children, n)
	return n
}

// attach adds a child operator to s producing Stream[K2, V2]. mk
// instantiates the operator for a task given the function feeding its
// children.
//
// An error the operator returns or a panic in it (its own, or one from
// downstream that no operator there claimed) is wrapped with the operator
// (opError): it names the operator in the dead-letter headers and selects
// its error policy.
func attach[K, V, K2, V2 any](s Stream[K, V], op string, keyChange bool,
	mk func(t *task, next func(Record[K2, V2]) error) func(Record[K, V]) error, opts ...OpOpt,
) Stream[K2, V2] {
	var n *node
	n = s.link(op, func(t *task, children []any) any {
		f := mk(t, fanout[K2, V2](children))
		return func(r Record[K, V]) (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = failedIn(n, &PanicError{Value: p, Stack: debug.Stack()})
				}
			}()
			if err := f(r); err != nil {
				return failedIn(n, err)
			}
			return nil
		}
	})
	if n == nil {
		return invalid[K2, V2](s.b)
	}
	for _, o := range opts {
		o.applyOp(n)
	}
	s.b.validateOp(n)
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
		b.addErr(fmt.Errorf("source: %w", err))
	}
	for _, s := range b.sources {
		if !s.internal && s.topic == topic {
			b.errorf("source %q declared twice (use the same Stream for both uses)", topic)
		}
	}
	for _, g := range b.globals {
		if g.topic == topic {
			b.errorf("source %q: already a global table's topic (a topic is read once)", topic)
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
			// An internal topic carries a table's deletions as null values.
			tomb := internal && kr.Value == nil
			var v V
			if !tomb {
				if v, err = value.Decode(kr.Value); err != nil {
					return &DecodeError{Part: "value", Err: err}
				}
			}
			r := Record[K, V]{Key: k, Value: v, Tombstone: tomb, Timestamp: kr.Timestamp, Headers: headersOf(kr),
				Origin: Origin{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset},
				keyEnc: carry(key, carriesKey, kr.Key)}
			if internal {
				r.Origin, r.Headers = originOf(kr, r.Headers)
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

// headersOf returns kr's headers as the library's (nil if none).
func headersOf(kr *kgo.Record) []Header {
	if len(kr.Headers) == 0 {
		return nil
	}
	hs := make([]Header, len(kr.Headers))
	for i, h := range kr.Headers {
		hs[i] = Header{Key: h.Key, Value: h.Value}
	}
	return hs
}

// MapValues transforms each record's value (Kafka Streams' mapValues). The
// key is unchanged, so no repartition is needed downstream; to change the
// key, use KeyBy (selectKey). A tombstone (Record.Tombstone) passes on as a
// tombstone without calling fn: the key's deletion stays one.
func MapValues[K, V, V2 any](s Stream[K, V], fn func(Record[K, V]) (V2, error), opts ...OpOpt) Stream[K, V2] {
	return attach(s, "map-values", false, func(t *task, next func(Record[K, V2]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			if r.Tombstone {
				return next(tombstoneOf[K, V, V2](r))
			}
			v, err := fn(r)
			if err != nil {
				return err
			}
			return next(Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
				keyEnc: r.keyEnc})
		}
	}, opts...)
}

// tombstoneOf is r's deletion as a record of value type V2.
func tombstoneOf[K, V, V2 any](r Record[K, V]) Record[K, V2] {
	return Record[K, V2]{Key: r.Key, Tombstone: true, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
		keyEnc: r.keyEnc}
}

// Map is MapValues, its former name (kept for existing code).
func Map[K, V, V2 any](s Stream[K, V], fn func(Record[K, V]) (V2, error), opts ...OpOpt) Stream[K, V2] {
	return MapValues(s, fn, opts...)
}

// FlatMap is FlatMapValues, its former name (kept for existing code).
func FlatMap[K, V, V2 any](s Stream[K, V], fn func(Record[K, V]) ([]V2, error), opts ...OpOpt) Stream[K, V2] {
	return FlatMapValues(s, fn, opts...)
}

// FlatMapValues turns each record into zero or more records with the same
// key, timestamp, headers and origin (Kafka Streams' flatMapValues). A
// tombstone passes on as one, without calling fn.
func FlatMapValues[K, V, V2 any](s Stream[K, V], fn func(Record[K, V]) ([]V2, error), opts ...OpOpt) Stream[K, V2] {
	return attach(s, "flatmap-values", false, func(t *task, next func(Record[K, V2]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			if r.Tombstone {
				return next(tombstoneOf[K, V, V2](r))
			}
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
	}, opts...)
}

// KeyBy sets a new key on each record (Kafka Streams' selectKey). A stateful
// operator downstream repartitions by the new key first. fn also sees the
// tombstones of a table's ToStream (Record.Tombstone, the zero value), and
// the record stays a tombstone under its new key.
func KeyBy[K, V, K2 any](s Stream[K, V], fn func(Record[K, V]) (K2, error), opts ...OpOpt) Stream[K2, V] {
	return attach(s, "keyby", true, func(t *task, next func(Record[K2, V]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			k, err := fn(r)
			if err != nil {
				return err
			}
			return next(Record[K2, V]{Key: k, Value: r.Value, Tombstone: r.Tombstone, Timestamp: r.Timestamp,
				Headers: r.Headers, Origin: r.Origin, valueEnc: r.valueEnc})
		}
	}, opts...)
}

// Filter keeps the records for which fn returns true.
func (s Stream[K, V]) Filter(fn func(Record[K, V]) (bool, error), opts ...OpOpt) Stream[K, V] {
	return attach(s, "filter", false, func(t *task, next func(Record[K, V]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			ok, err := fn(r)
			if err != nil || !ok {
				return err
			}
			return next(r)
		}
	}, opts...)
}

// FilterNot drops the records for which fn returns true.
func (s Stream[K, V]) FilterNot(fn func(Record[K, V]) (bool, error), opts ...OpOpt) Stream[K, V] {
	return attach(s, "filter-not", false, func(t *task, next func(Record[K, V]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			drop, err := fn(r)
			if err != nil || drop {
				return err
			}
			return next(r)
		}
	}, opts...)
}

// Peek calls fn for each record and passes the record on. fn runs again when
// a record is retried or replayed after a crash: keep side effects idempotent.
func (s Stream[K, V]) Peek(fn func(Record[K, V]), opts ...OpOpt) Stream[K, V] {
	return attach(s, "peek", false, func(t *task, next func(Record[K, V]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			fn(r)
			return next(r)
		}
	}, opts...)
}

// Merge returns a stream of the records of s and others. Records of one input
// partition keep their order; there is no order across inputs. A stateful
// operator after a Merge of several sources repartitions first, so that its
// store belongs to one task.
func (s Stream[K, V]) Merge(others ...Stream[K, V]) Stream[K, V] {
	all := append([]Stream[K, V]{s}, others...)
	for _, o := range all {
		if !o.valid() {
			return invalid[K, V](s.b)
		}
		if o.b != s.b {
			s.b.errorf("merge: streams from different builders")
			return invalid[K, V](s.b)
		}
	}
	n := s.b.addNode("merge", func(t *task, children []any) any { return fanout[K, V](children) })
	out := Stream[K, V]{b: s.b, n: n, sources: slices.Clone(s.sources), keyChanged: s.keyChanged}
	for _, o := range all {
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
	n := s.link("branch", func(t *task, children []any) any {
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
	out := make([]Stream[K, V], len(preds)+1)
	if n == nil {
		for i := range out {
			out[i] = invalid[K, V](s.b)
		}
		return out
	}
	for i := range out {
		// Each branch output is an identity node the user attaches to.
		bn := s.b.addNode("branch-out", func(t *task, children []any) any { return fanout[K, V](children) })
		n.children = append(n.children, bn)
		out[i] = Stream[K, V]{b: s.b, n: bn, sources: s.sources, keyChanged: s.keyChanged}
	}
	return out
}

// Route is one named branch of Split: the records for which When returns
// true (and no earlier route's did).
type Route[K, V any] struct {
	Name string
	When func(Record[K, V]) (bool, error)
}

// DefaultBranch names the branch of Split holding the records no route
// matched.
const DefaultBranch = "default"

// Split routes each record to the first route whose predicate returns true
// (Kafka Streams' split/branch) and returns the branches by name; the records
// no route matched go to the branch DefaultBranch, so nothing is dropped
// silently. Route names must be distinct and not DefaultBranch; they name
// the branch operators in Describe ("split-<name>").
func (s Stream[K, V]) Split(routes ...Route[K, V]) map[string]Stream[K, V] {
	preds := make([]func(Record[K, V]) (bool, error), len(routes))
	seen := map[string]bool{DefaultBranch: true}
	ok := true
	for i, r := range routes {
		if seen[r.Name] || r.Name == "" || r.When == nil {
			s.b.errorf("split: route %d %q: want a distinct name other than %q and a predicate", i, r.Name, DefaultBranch)
			ok = false
		}
		seen[r.Name] = true
		preds[i] = r.When
	}
	out := map[string]Stream[K, V]{}
	if !ok {
		s = invalid[K, V](s.b)
	}
	br := s.Branch(preds...)
	for i, r := range routes {
		out[r.Name] = br[i]
		if br[i].valid() {
			br[i].n.name = "split-" + r.Name
		}
	}
	out[DefaultBranch] = br[len(routes)]
	if br[len(routes)].valid() {
		br[len(routes)].n.name = "split-" + DefaultBranch
	}
	return out
}

// To writes every record to topic, partitioned by the murmur2 hash of the
// encoded key (Java-compatible; a nil key is spread over partitions). The
// topic must exist when the App starts.
func (s Stream[K, V]) To(topic string, key Codec[K], value Codec[V]) {
	if err := validTopic(topic); err != nil {
		s.b.addErr(fmt.Errorf("sink: %w", err))
	}
	if key == nil || value == nil {
		s.b.errorf("sink %q: nil codec", topic)
	}
	if sinkTo(s, "to", false, topic, func(*task) string { return topic }, key, value) {
		s.b.sinks = append(s.b.sinks, &sinkSpec{topic: topic, op: "to", sources: s.sources})
	}
}

// sinkTo adds a sink node writing s to topic; false if s is invalid.
// A record written to an internal (repartition) topic carries its Origin in
// a header, so the task reading it back knows the original input record.
func sinkTo[K, V any](s Stream[K, V], op string, internal bool, label string, topic func(*task) string,
	key Codec[K], value Codec[V],
) bool {
	carriesKey, carriesValue := carries(key), carries(value)
	keyApp, valueApp := appenderOf(key), appenderOf(value)
	var n *node
	n = s.link(op, func(t *task, _ []any) any {
		tp := topic(t)
		return func(r Record[K, V]) error {
			kb, err := sinkEncode(t, key, carriesKey, keyApp, r.keyEnc, r.Key)
			if err != nil {
				return failedIn(n, fmt.Errorf("encode key for %s: %w", tp, err))
			}
			var vb []byte // a tombstone's: null
			if !r.Tombstone {
				if vb, err = sinkEncode(t, value, carriesValue, valueApp, r.valueEnc, r.Value); err != nil {
					return failedIn(n, fmt.Errorf("encode value for %s: %w", tp, err))
				}
			}
			t.emit(tp, -1, kb, vb, r.Timestamp, r.Headers)
			if internal {
				t.markOrigin(r.Origin)
			}
			return nil
		}
	})
	if n != nil {
		n.name += "(" + label + ")"
	}
	return n != nil
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
