package stream

import (
	"fmt"
	"time"
)

// StoreConfig declares a keyed state store.
//
// Every store states its bound: a TTL, or NoExpiry with the reason the store
// needs none. A key not updated for TTL of event time — measured against the
// task's stream time, the largest event timestamp the task has seen — is
// removed from the store and a tombstone is written to the store's
// changelog. Expiry is therefore deterministic: a replay of the same input
// expires the same keys. A key is never removed before its TTL has passed,
// and at most one TTL index bucket later: TTL/64, at least 1 s (or the TTL
// itself if shorter); see state.BucketWidth.
type StoreConfig struct {
	// Name of the store, unique in the topology. It names the changelog
	// topic "<app>-<name>-changelog" and, when the operator repartitions,
	// the topic "<app>-<name>-repartition".
	Name string
	// TTL bound of every key, > 0; or 0 with NoExpiry set.
	TTL time.Duration
	// NoExpiry states that the store keeps every key until it is deleted,
	// and why that is bounded (for instance "one key per product category;
	// categories are a fixed list"). App.Describe reports such a store as a
	// risk with this reason. Exactly one of TTL and NoExpiry is set.
	NoExpiry string
	// EveryUpdate forwards every update of the store's table downstream
	// and to its changelog, in the record's processing (Kafka Streams'
	// withCachingDisabled), instead of the latest value per key between
	// commits. An operator deriving deltas from each update needs it
	// rarely: Changes pairs each collapsed update with the value it
	// replaced.
	EveryUpdate bool
}

// declareStore validates a store declaration, recording its errors; false if
// it is invalid.
func (b *Builder) declareStore(store StoreConfig) bool {
	ok := true
	if err := validTopic(store.Name); err != nil {
		b.addErr(fmt.Errorf("store: %w", err))
		ok = false
	}
	switch {
	case store.TTL < 0 || (store.TTL > 0 && store.NoExpiry != ""):
		b.errorf("store %q: TTL %v and NoExpiry %q: set exactly one: a positive TTL, or NoExpiry with its reason",
			store.Name, store.TTL, store.NoExpiry)
		ok = false
	case store.TTL == 0 && store.NoExpiry == "":
		b.errorf("store %q: no bound: every store declares a positive TTL, or NoExpiry with the reason it needs none",
			store.Name)
		ok = false
	}
	for _, st := range b.stores {
		if st.name == store.Name {
			b.errorf("store %q declared twice", store.Name)
			ok = false
		}
	}
	for _, g := range b.globals {
		if g.store == store.Name {
			b.errorf("store %q declared twice (a global table's)", store.Name)
			ok = false
		}
	}
	return ok
}

// Grouped is a stream prepared for a keyed stateful operator: it carries the
// codecs of its records, used for the operator's store and, when one is
// needed, its repartition topic.
type Grouped[K, V any] struct {
	s     Stream[K, V]
	key   Codec[K]
	value Codec[V]
	// codecErr: a codec could not be inferred. It is recorded only when the
	// operator needs that codec (the value codec only to repartition).
	keyErr, valueErr error
}

// GroupByKey prepares s for Count, Reduce or Aggregate by its current key.
// The codecs are inferred from K and V (InferCodec) or given with Codecs;
// the value codec is needed only when the operator repartitions.
//
// If the key may have changed since the source (KeyBy, GroupBy, Map
// upstream) or s merges several sources, the stateful operator first writes
// the records to "<app>-<store>-repartition" (created with the upstream's
// partition count, partitioned by murmur2 of the encoded key, as Java
// clients do) and reads them back, so each key is handled by exactly one
// task. Per-key order is kept: one producer writes each upstream
// partition's records in order. Otherwise the input topic is assumed to be
// partitioned by this key already (as Kafka Streams assumes), and no
// repartition happens.
func GroupByKey[K, V any](s Stream[K, V], opts ...CodecOpt[K, V]) Grouped[K, V] {
	g := Grouped[K, V]{s: s}
	for _, o := range opts {
		g.key, g.value = cmpOr(o.key, g.key), cmpOr(o.value, g.value)
	}
	if g.key == nil {
		g.key, g.keyErr = InferCodec[K]()
	}
	if g.value == nil {
		g.value, g.valueErr = InferCodec[V]()
	}
	return g
}

// cmpOr returns x if it is not nil, else y.
func cmpOr[T any](x, y Codec[T]) Codec[T] {
	if x != nil {
		return x
	}
	return y
}

// GroupBy re-keys s with fn and groups it by the new key (KeyBy then
// GroupByKey): the stateful operator that follows repartitions by the new
// key. Codecs as for GroupByKey.
func GroupBy[K, V, K2 any](s Stream[K, V], fn func(Record[K, V]) (K2, error), opts ...CodecOpt[K2, V]) Grouped[K2, V] {
	return GroupByKey(KeyBy(s, fn), opts...)
}

// Count counts the records per key into a table (the key's count, 64-bit).
// Like Reduce and Aggregate it ignores tombstones (Record.Tombstone).
func Count[K, V any](g Grouped[K, V], store StoreConfig) Table[K, int64] {
	return aggregate(g, store, "count", Int64(), false, func(_ Record[K, V], n int64, _ bool) (int64, error) { return n + 1, nil })
}

// Reduce combines the values per key with fn(previous, new) into a table;
// the first value of a key is stored as is. The table's values use the
// group's value codec.
func Reduce[K, V any](g Grouped[K, V], store StoreConfig, fn func(agg, v V) (V, error)) Table[K, V] {
	if g.valueErr != nil && g.s.b != nil {
		g.s.b.errorf("reduce %q: %v", store.Name, g.valueErr)
		return Table[K, V]{b: g.s.b}
	}
	return aggregate(g, store, "reduce", g.value, false,
		func(r Record[K, V], agg V, found bool) (V, error) {
			if !found {
				return r.Value, nil
			}
			return fn(agg, r.Value)
		})
}

// Aggregate folds the records per key into a table of aggregates of type A,
// starting from init() for a key with no state. A's codec is inferred
// (InferCodec) or given with Codecs (whose key codec is ignored: the key
// codec is the group's).
func Aggregate[K, V, A any](g Grouped[K, V], store StoreConfig, init func() A,
	fn func(r Record[K, V], agg A) (A, error), opts ...CodecOpt[K, A],
) Table[K, A] {
	var codec Codec[A]
	for _, o := range opts {
		codec = cmpOr(o.value, codec)
	}
	if codec == nil {
		var err error
		if codec, err = InferCodec[A](); err != nil {
			if g.s.b != nil {
				g.s.b.errorf("aggregate %q: %v", store.Name, err)
			}
			return Table[K, A]{b: g.s.b}
		}
	}
	return aggregate(g, store, "aggregate", codec, false,
		func(r Record[K, V], agg A, found bool) (A, error) {
			if !found && init != nil {
				agg = init()
			}
			return fn(r, agg)
		})
}

// ToTable materialises s in a table: the latest value per key, stored in
// store (Kafka Streams' KStream.toTable); a tombstone (Record.Tombstone)
// deletes its key. Codecs as for GroupByKey; a stream
// whose key changed is repartitioned first.
func (s Stream[K, V]) ToTable(store StoreConfig, opts ...CodecOpt[K, V]) Table[K, V] {
	g := GroupByKey(s, opts...)
	if g.valueErr != nil && s.b != nil {
		s.b.errorf("to table %q: %v", store.Name, g.valueErr)
		return Table[K, V]{b: s.b}
	}
	return aggregate(g, store, "to-table", g.value, true,
		func(r Record[K, V], _ V, _ bool) (V, error) { return r.Value, nil })
}

// aggregate declares a keyed store updated by fn for every record of g (agg
// is the zero A when found is false) and returns its table.
//
// A tombstone record (Record.Tombstone, from a table's ToStream) deletes its
// key if deletes (ToTable), else it is ignored.
func aggregate[K, V, A any](g Grouped[K, V], store StoreConfig, op string, codec Codec[A], deletes bool,
	fn func(r Record[K, V], agg A, found bool) (A, error),
) Table[K, A] {
	s := g.s
	b := s.b
	if !s.valid() {
		return Table[K, A]{b: b}
	}
	ok := b.declareStore(store)
	if g.keyErr != nil {
		b.errorf("%s %q: key: %v", op, store.Name, g.keyErr)
		ok = false
	}
	if s.keyChanged || len(s.sources) != 1 {
		if g.valueErr != nil {
			b.errorf("%s %q repartitions its input (its key changed, or it merges sources): value: %v",
				op, store.Name, g.valueErr)
			ok = false
		}
		if ok {
			s = repartition(g, store.Name)
		}
	}
	if !ok {
		return Table[K, A]{b: b}
	}
	spec := &storeSpec{name: store.Name, ttl: store.TTL, noExpiry: store.NoExpiry, source: s.sources[0], op: op,
		codecs: newStoreCodecs(g.key, codec)}
	b.stores = append(b.stores, spec)
	name, every := store.Name, store.EveryUpdate
	meta := &tableMeta{}
	carriesKey, carriesValue := carries(g.key), carries(codec)
	var n *node
	n = s.link(op, func(t *task, children []any) any {
		st := t.store(name)
		up := newTableUpdates[K, A](t, n.id, st, every, g.key, codec, meta.oldWanted, children)
		return func(r Record[K, V]) (err error) {
			defer func() { err = failedIn(n, err) }()
			if r.Tombstone && !deletes {
				return nil // a deletion upstream: a stream aggregation ignores it (as Kafka Streams' null values)
			}
			kb, err := encodeCarried(g.key, carriesKey, r.keyEnc, r.Key)
			if err != nil {
				return fmt.Errorf("store %s: encode key: %w", name, err)
			}
			old, found, err := st.get(kb)
			if err != nil {
				return err
			}
			if r.Tombstone {
				if !found {
					return nil
				}
				if err := t.txn.Delete(name, kb); err != nil {
					return fmt.Errorf("store %s: %w", name, err)
				}
				out := Record[K, A]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
					keyEnc: carry(g.key, carriesKey, kb)}
				return up.update(kb, nil, old, true, r.Timestamp, out)
			}
			var agg A
			if found {
				if agg, err = codec.Decode(old); err != nil {
					return fmt.Errorf("store %s: decode stored value: %w", name, err)
				}
			}
			if agg, err = fn(r, agg, found); err != nil {
				return err
			}
			vb, err := codec.Encode(agg)
			if err != nil {
				return fmt.Errorf("store %s: encode value: %w", name, err)
			}
			updated, err := t.txn.Put(name, kb, vb, r.Timestamp.UnixMilli())
			if err != nil {
				return fmt.Errorf("store %s: %w", name, err)
			}
			// The update carries the stored bytes: a sink with the same
			// codecs sends them as they are (the changelog record holds
			// them too).
			out := Record[K, A]{Key: r.Key, Value: agg, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
				keyEnc: carry(g.key, carriesKey, kb), valueEnc: carry(codec, carriesValue, vb)}
			return up.update(kb, vb, old, found, time.UnixMilli(updated), out)
		}
	})
	n.name = op + "-" + name
	return Table[K, A]{b: b, n: n, store: name, key: g.key, value: codec, sources: s.sources, meta: meta}
}

// repartition writes g's records to "<app>-<name>-repartition" and returns
// the stream reading them back.
func repartition[K, V any](g Grouped[K, V], name string) Stream[K, V] {
	s := g.s
	suffix := name + "-repartition"
	if !sinkTo(s, "repartition", true, suffix, func(t *task) string { return t.app.internalTopic(suffix) }, g.key, g.value) {
		return invalid[K, V](s.b)
	}
	s.b.sinks = append(s.b.sinks, &sinkSpec{topic: suffix, internal: true, op: "repartition", sources: s.sources})
	return addSource(s.b, suffix, true, s.sources, g.key, g.value, nil)
}
