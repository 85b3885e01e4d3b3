package stream

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Table is a keyed table (Kafka Streams' KTable): for every key, its latest
// value. It comes from a topic (FromTable), from a keyed aggregate (Count,
// Reduce, Aggregate) or from a stream (Stream.ToTable). Streams look it up
// with Join and LeftJoin; App.Get and QueryStore read it by its store name;
// ToStream turns its updates back into a stream.
//
// A table lives in a local store per task (the task for partition p holds
// the keys of partition p). A table read from a topic has that topic as its
// changelog (Kafka Streams' source-topic changelog optimisation): no
// changelog topic is created, and a task restores the table from the topic,
// from its local checkpoint (or the start) up to the group's committed
// offset of that partition, then consumes the topic from there as a source.
// The topic should be compacted (cleanup.policy=compact): that is the
// table's bound, so such a table has no TTL and its keys are never expired.
// An aggregate's table has its own changelog and its store's bound.
//
// Updates of an aggregate's table are collapsed between commits (Kafka
// Streams' record cache, bounded by an eighth of StoreCache per task): the
// changelog, ToStream and Changes carry the latest value of each key updated
// since the previous commit, not every update; every input offset committed
// is covered by the updates it caused. StoreConfig.EveryUpdate forwards
// each. streamtest (the Driver) forwards every update, as it commits after
// every record. K may be a windowed key: a windowed aggregate returns a Table like
// any other.
type Table[K, V any] struct {
	b *Builder
	// n is the node whose children receive the table's updates, as
	// Record[K, Change[V]] (the table source, or the aggregate); nil for an
	// invalid table (see Stream.valid).
	n     *node
	store string
	key   Codec[K]
	value Codec[V]
	// sources of the table's sub-topology that its updates derive from.
	sources []int
	meta    *tableMeta
}

// tableMeta is what a table's declaration learns after the table was
// declared: read when tasks instantiate the table (the topology is complete
// by then).
type tableMeta struct {
	// wantOld: a downstream operator reads Change.Old (Changes), so the
	// table decodes (and a topic's table looks up) the previous value.
	wantOld bool
}

func (m *tableMeta) oldWanted() bool { return m != nil && m.wantOld }

func (t Table[K, V]) valid() bool { return t.b != nil && t.n != nil }

// Store returns the name of the table's store (for App.Get and QueryStore).
func (t Table[K, V]) Store() string { return t.store }

// ToStream returns the stream of the table's updates (Kafka Streams'
// KTable.toStream): every record of a table's topic, or an aggregate's
// collapsed updates (see Table). A deletion — a topic's tombstone, a key
// expired by its store's TTL, a key deleted by ToTable — is forwarded as a
// record with Tombstone set and the zero value: a sink writes it as a
// record with a null value (a tombstone), so a compacted output topic
// deletes the key too.
func (t Table[K, V]) ToStream() Stream[K, V] {
	if !t.valid() {
		return invalid[K, V](t.b)
	}
	return Stream[K, V]{b: t.b, n: t.n, sources: t.sources}
}

// Changes returns the stream of t's updates with the value each replaced
// (what Kafka Streams forwards between its table operators): for every
// update ToStream forwards, a Change holding the key's new value (none for
// a deletion) and the value the previous update forwarded for the key (none
// for an insert). Subtracting Old and adding New keeps a derived sum exact
// however the updates were collapsed. The records carry no Tombstone: a
// deletion is a Change without New.
func Changes[K, V any](t Table[K, V]) Stream[K, Change[V]] {
	if !t.valid() {
		return invalid[K, Change[V]](t.b)
	}
	t.meta.wantOld = true
	return attach(t.ToStream(), "changes", false, func(_ *task, next func(Record[K, Change[V]]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			c := Change[V]{HasOld: r.old != nil, HasNew: !r.Tombstone}
			if r.old != nil {
				c.Old = *r.old
			}
			if c.HasNew {
				c.New = r.Value
			}
			return next(Record[K, Change[V]]{Key: r.Key, Value: c, Timestamp: r.Timestamp, Headers: r.Headers,
				Origin: r.Origin, keyEnc: r.keyEnc})
		}
	})
}

// FromTable declares a table read from topic and materialised in the store
// named store (unique among the topology's stores). Like From, a topic may be
// a source once per topology, and a record whose key or value does not
// decode goes to the dead-letter topic. Records with a nil key are skipped
// (a table key cannot be nil). The record's Kafka timestamp is the update's
// time.
func FromTable[K, V any](b *Builder, topic string, key Codec[K], value Codec[V], store string) Table[K, V] {
	if key == nil || value == nil {
		b.errorf("table %q: nil codec", topic)
	}
	if err := validTopic(topic); err != nil {
		b.addErr(fmt.Errorf("table: %w", err))
	}
	if err := validTopic(store); err != nil {
		b.addErr(fmt.Errorf("table %q store: %w", topic, err))
	}
	for _, s := range b.sources {
		if !s.internal && s.topic == topic {
			b.errorf("source %q declared twice (a topic is read once: as a stream or as a table)", topic)
		}
	}
	for _, st := range b.stores {
		if st.name == store {
			b.errorf("store %q declared twice", store)
		}
	}
	for _, g := range b.globals {
		if g.store == store || g.topic == topic {
			b.errorf("table %q (store %q): topic or store already a global table's", topic, store)
		}
	}
	src := &sourceNode{idx: len(b.sources), topic: topic, table: store}
	b.stores = append(b.stores, &storeSpec{name: store, source: src.idx, op: "table", table: true,
		decodes: func(k, v []byte) bool {
			if _, err := key.Decode(k); err != nil {
				return false
			}
			if v == nil {
				return true
			}
			_, err := value.Decode(v)
			return err == nil
		}})
	meta := &tableMeta{}
	carriesKey, carriesValue := carries(key), carries(value)
	src.node = b.addNode("table", func(t *task, children []any) any {
		st := t.store(store)
		next := fanout[K, V](children)
		wantOld := meta.oldWanted()
		return func(kr *kgo.Record) error {
			if kr.Key == nil {
				return nil
			}
			k, err := key.Decode(kr.Key)
			if err != nil {
				return &DecodeError{Part: "key", Err: err}
			}
			t.observe(kr.Timestamp)
			var v V
			if kr.Value != nil {
				if v, err = value.Decode(kr.Value); err != nil {
					return &DecodeError{Part: "value", Err: err}
				}
			}
			var old *V
			hadOld := false
			if len(children) > 0 {
				ob, found, err := st.get(kr.Key)
				if err != nil {
					return err
				}
				if found && wantOld {
					ov, err := value.Decode(ob)
					if err != nil {
						return fmt.Errorf("table %s: decode stored value: %w", store, err)
					}
					old = &ov
				}
				hadOld = found
			}
			if kr.Value == nil {
				if err := st.deleteLocal(kr.Key); err != nil {
					return err
				}
			} else if err := st.putLocal(kr.Key, kr.Value, kr.Timestamp); err != nil {
				return err
			}
			if len(children) == 0 || (kr.Value == nil && !hadOld) {
				return nil // nothing downstream, or the deletion of a key it never saw
			}
			r := Record[K, V]{Key: k, Value: v, Tombstone: kr.Value == nil, Timestamp: kr.Timestamp,
				Headers: headersOf(kr), Origin: Origin{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset},
				keyEnc: carry(key, carriesKey, kr.Key), old: old}
			if kr.Value != nil {
				r.valueEnc = carry(value, carriesValue, kr.Value)
			}
			return next(r)
		}
	})
	b.sources = append(b.sources, src)
	return Table[K, V]{b: b, n: src.node, store: store, key: key, value: value, sources: []int{src.idx}, meta: meta}
}

// accepts reports whether restoring a table applies r: what processing the
// topic would have applied (a nil key is skipped, a record that does not
// decode goes to the dead-letter topic).
func (st *storeSpec) accepts(r *kgo.Record) bool {
	return r.Key != nil && (st.decodes == nil || st.decodes(r.Key, r.Value))
}

// putLocal writes a key's value to the store without a changelog record (a
// table, whose changelog is its source topic).
func (s *taskStore) putLocal(key, value []byte, ts time.Time) error {
	if _, err := s.t.txn.Put(s.spec.name, key, value, ts.UnixMilli()); err != nil {
		return fmt.Errorf("store %s: %w", s.spec.name, err)
	}
	return nil
}

func (s *taskStore) deleteLocal(key []byte) error {
	if err := s.t.txn.Delete(s.spec.name, key); err != nil {
		return fmt.Errorf("store %s: %w", s.spec.name, err)
	}
	return nil
}

// JoinOpt configures Join and LeftJoin for a stream of values V.
type JoinOpt[V any] interface{ applyJoin(*joinCfg[V]) }

type joinCfg[V any] struct {
	value Codec[V]
}

type joinOptFunc[V any] func(*joinCfg[V])

func (f joinOptFunc[V]) applyJoin(c *joinCfg[V]) { f(c) }

// RepartitionValues gives the codec of the stream's values, used when the
// join must repartition the stream (its key changed since its source: KeyBy
// upstream) and V has no inferred codec (InferCodec). The key codec is the
// table's.
func RepartitionValues[V any](value Codec[V]) JoinOpt[V] {
	return joinOptFunc[V](func(c *joinCfg[V]) { c.value = value })
}

// Join enriches each record of s with the table's current value for its key
// (inner join): fn's result is emitted with the record's key, timestamp,
// headers and origin; a record whose key is not in the table is dropped.
//
// The lookup happens in the task owning the key's partition, so s and the
// table must be co-partitioned: same key, same partitioning (murmur2 of the
// encoded key), same partition count. If s's key may have changed since its
// source (KeyBy upstream), s is first written to
// "<app>-<table store>-join-<n>-repartition" (n counts such joins against
// the table, from 0) with the table's partition count, as for Count; pass
// RepartitionValues then if V has no inferred codec. Otherwise s's source topics are joined where they
// are, and Run checks at start that they have the table topic's partition
// count (ErrPartitionMismatch).
//
// Order: within the records a task fetched in one round, records are
// processed by Kafka timestamp across its partitions, table updates before
// stream records with the same timestamp; so a stream record sees every
// table update with an earlier or equal timestamp fetched with it or before.
func Join[K, V, VT, VR any](s Stream[K, V], t Table[K, VT], fn func(r Record[K, V], tv VT) (VR, error),
	opts ...JoinOpt[V],
) Stream[K, VR] {
	return join(s, t, "join", func(r Record[K, V], tv VT, found bool) (VR, bool, error) {
		if !found {
			var zero VR
			return zero, false, nil
		}
		v, err := fn(r, tv)
		return v, true, err
	}, opts)
}

// LeftJoin is Join that keeps every stream record: fn gets found=false (and
// the zero VT) when the table has no value for the key.
func LeftJoin[K, V, VT, VR any](s Stream[K, V], t Table[K, VT], fn func(r Record[K, V], tv VT, found bool) (VR, error),
	opts ...JoinOpt[V],
) Stream[K, VR] {
	return join(s, t, "left-join", func(r Record[K, V], tv VT, found bool) (VR, bool, error) {
		v, err := fn(r, tv, found)
		return v, true, err
	}, opts)
}

func join[K, V, VT, VR any](s Stream[K, V], t Table[K, VT], op string,
	fn func(r Record[K, V], tv VT, found bool) (VR, bool, error), opts []JoinOpt[V],
) Stream[K, VR] {
	var cfg joinCfg[V]
	for _, o := range opts {
		o.applyJoin(&cfg)
	}
	if !s.valid() || !t.valid() {
		// The invalid one's declaration recorded why.
		return invalid[K, VR](s.b)
	}
	b := s.b
	if t.b != b {
		b.errorf("%s: stream and table from different builders", op)
		return invalid[K, VR](b)
	}
	if s.keyChanged {
		if cfg.value == nil {
			c, err := InferCodec[V]()
			if err != nil {
				b.errorf("%s with table %q: the stream's key changed (KeyBy): it is repartitioned first, "+
					"and its values need a codec: %v; pass stream.RepartitionValues(codec)", op, t.store, err)
				return invalid[K, VR](b)
			}
			cfg.value = c
		}
		if b.joinRepartitions == nil {
			b.joinRepartitions = map[string]int{}
		}
		name := fmt.Sprintf("%s-join-%d", t.store, b.joinRepartitions[t.store])
		b.joinRepartitions[t.store]++
		s = repartition(Grouped[K, V]{s: s, key: t.key, value: cfg.value}, name)
	}
	store, key, value := t.store, t.key, t.value
	carriesKey := carries(key)
	out := attach(s, op, false, func(tk *task, next func(Record[K, VR]) error) func(Record[K, V]) error {
		st := tk.store(store)
		return func(r Record[K, V]) error {
			if r.Tombstone {
				return nil // a deletion upstream: nothing to enrich (as Kafka Streams' null values)
			}
			kb, err := encodeCarried(key, carriesKey, r.keyEnc, r.Key)
			if err != nil {
				return fmt.Errorf("%s %s: encode key: %w", op, store, err)
			}
			raw, found, err := st.get(kb)
			if err != nil {
				return err
			}
			var tv VT
			if found {
				if tv, err = value.Decode(raw); err != nil {
					return fmt.Errorf("%s %s: decode table value: %w", op, store, err)
				}
			}
			v, emit, err := fn(r, tv, found)
			if err != nil || !emit {
				return err
			}
			return next(Record[K, VR]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
				keyEnc: carry(key, carriesKey, kb)})
		}
	})
	// The link puts the table's source in the stream's sub-topology; the
	// output's sources stay the stream's: a keyed operator downstream
	// needs no repartition (the table is co-partitioned with them).
	if out.valid() {
		b.links = append(b.links, [2]int{out.n.id, t.n.id})
	}
	return out
}
