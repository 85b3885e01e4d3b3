package stream

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Table is a keyed table materialised from a topic: for every key, the value
// of the latest record; a record with a nil value (a tombstone) deletes the
// key. Streams look it up with Join and LeftJoin.
//
// The table lives in a local store per task (the task for partition p holds
// the keys of partition p of the topic). Its changelog is the source topic
// itself (Kafka Streams' source-topic changelog optimisation): no changelog
// topic is created, and a task restores the table from the topic, from its
// local checkpoint (or the start) up to the group's committed offset of that
// partition, then consumes the topic from there as a source. The topic should
// be compacted (cleanup.policy=compact): that is the table's bound, so a
// table has no TTL and its keys are never expired.
type Table[K, V any] struct {
	b     *Builder
	src   *sourceNode
	store string
	key   Codec[K]
	value Codec[V]
}

// FromTable declares a table read from topic and materialised in the store
// named store (unique among the topology's stores). Like From, a topic may be
// a source once per topology, and a record whose key or value does not
// decode goes to "<topic>.dlq". Records with a nil key are skipped (a table
// key cannot be nil). The record's Kafka timestamp is the update's time.
func FromTable[K, V any](b *Builder, topic string, key Codec[K], value Codec[V], store string) Table[K, V] {
	if key == nil || value == nil {
		b.errorf("table %q: nil codec", topic)
	}
	if err := validTopic(topic); err != nil {
		b.errs = append(b.errs, fmt.Errorf("table: %w", err))
	}
	if err := validTopic(store); err != nil {
		b.errs = append(b.errs, fmt.Errorf("table %q store: %w", topic, err))
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
	src.node = b.addNode("table", func(t *task, _ []any) any {
		st := t.store(store)
		return func(kr *kgo.Record) error {
			if kr.Key == nil {
				return nil
			}
			if _, err := key.Decode(kr.Key); err != nil {
				return &DecodeError{Part: "key", Err: err}
			}
			t.observe(kr.Timestamp)
			if kr.Value == nil {
				return st.deleteLocal(kr.Key)
			}
			if _, err := value.Decode(kr.Value); err != nil {
				return &DecodeError{Part: "value", Err: err}
			}
			return st.putLocal(kr.Key, kr.Value, kr.Timestamp)
		}
	})
	b.sources = append(b.sources, src)
	return Table[K, V]{b: b, src: src, store: store, key: key, value: value}
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
// upstream). The key codec is the table's.
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
// RepartitionValues then. Otherwise s's source topics are joined where they
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
	if !s.valid() || t.b == nil {
		if s.b != nil {
			s.b.errorf("%s: invalid stream or table", op)
		}
		return Stream[K, VR]{b: s.b}
	}
	b := s.b
	if t.b != b {
		b.errorf("%s: stream and table from different builders", op)
		return Stream[K, VR]{b: b}
	}
	if s.keyChanged {
		if cfg.value == nil {
			b.errorf("%s with table %q: the stream's key changed (KeyBy): it is repartitioned first, "+
				"pass stream.RepartitionValues(codec) for its values", op, t.store)
			return Stream[K, VR]{b: b}
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
	b.links = append(b.links, [2]int{out.n.id, t.src.node.id})
	return out
}
