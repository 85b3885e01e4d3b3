package stream

import (
	"fmt"
	"time"
)

// StoreConfig declares a keyed state store.
//
// Every store is bounded: TTL is required. A key not updated for TTL of event
// time — measured against the task's stream time, the largest event
// timestamp the task has seen — is removed from the store and a tombstone is
// written to the store's changelog. Expiry is therefore deterministic: a
// replay of the same input expires the same keys. A key is never removed
// before its TTL has passed, and at most one TTL index bucket later: TTL/64,
// at least 1 s (or the TTL itself if shorter); see state.BucketWidth.
type StoreConfig struct {
	// Name of the store, unique in the topology. It names the changelog
	// topic "<app>-<name>-changelog" and, when the operator repartitions,
	// the topic "<app>-<name>-repartition".
	Name string
	// TTL bound of every key, > 0.
	TTL time.Duration
}

// Grouped is a stream prepared for a keyed stateful operator: it carries the
// codecs used to write the records to a repartition topic when one is needed.
type Grouped[K, V any] struct {
	s     Stream[K, V]
	key   Codec[K]
	value Codec[V]
}

// GroupByKey prepares s for Count, Reduce or Aggregate by its current key.
//
// If the key may have changed since the source (KeyBy upstream) or s merges
// several sources, the stateful operator first writes the records to
// "<app>-<store>-repartition" (created with the upstream's partition count,
// partitioned by murmur2 of the encoded key, as Java clients do) and reads
// them back, so each key is handled by exactly one task. Per-key order is
// kept: one producer writes each upstream partition's records in order.
// Otherwise the input topic is assumed to be partitioned by this key already
// (as Kafka Streams assumes), and no repartition happens.
func GroupByKey[K, V any](s Stream[K, V], key Codec[K], value Codec[V]) Grouped[K, V] {
	if key == nil || value == nil {
		s.b.errorf("group by key: nil codec")
	}
	return Grouped[K, V]{s: s, key: key, value: value}
}

// Count counts the records per key. It emits, for every input record, the
// key's new count (an update stream: downstream sinks keyed by K stay
// idempotent). Counts are 64-bit.
func Count[K, V any](g Grouped[K, V], store StoreConfig) Stream[K, int64] {
	return Aggregate(g, store, Int64(),
		func() int64 { return 0 },
		func(_ Record[K, V], n int64) (int64, error) { return n + 1, nil })
}

// Reduce combines the values per key with fn(previous, new); the first value
// of a key is stored as is. It emits the key's new value for every input
// record.
func Reduce[K, V any](g Grouped[K, V], store StoreConfig, fn func(agg, v V) (V, error)) Stream[K, V] {
	return aggregate(g, store, "reduce", g.value, nil,
		func(r Record[K, V], agg V, found bool) (V, error) {
			if !found {
				return r.Value, nil
			}
			return fn(agg, r.Value)
		})
}

// Aggregate folds the records per key into an aggregate of type A, starting
// from init() for a key with no state, stored with codec. It emits the key's
// new aggregate for every input record.
func Aggregate[K, V, A any](g Grouped[K, V], store StoreConfig, codec Codec[A], init func() A,
	fn func(r Record[K, V], agg A) (A, error),
) Stream[K, A] {
	return aggregate(g, store, "aggregate", codec, init,
		func(r Record[K, V], agg A, found bool) (A, error) { return fn(r, agg) })
}

func aggregate[K, V, A any](g Grouped[K, V], store StoreConfig, op string, codec Codec[A], init func() A,
	fn func(r Record[K, V], agg A, found bool) (A, error),
) Stream[K, A] {
	s := g.s
	b := s.b
	if err := validTopic(store.Name); err != nil {
		b.errs = append(b.errs, fmt.Errorf("store: %w", err))
	}
	if store.TTL <= 0 {
		b.errorf("store %q: TTL %v: every store must declare a positive TTL bound", store.Name, store.TTL)
	}
	if codec == nil {
		b.errorf("store %q: nil codec", store.Name)
	}
	for _, st := range b.stores {
		if st.name == store.Name {
			b.errorf("store %q declared twice", store.Name)
		}
	}
	if s.keyChanged || len(s.sources) != 1 {
		s = repartition(g, store.Name)
	}
	b.stores = append(b.stores, &storeSpec{name: store.Name, ttl: store.TTL, source: s.sources[0], op: op})
	b.stores[len(b.stores)-1].codecs = newStoreCodecs(g.key, codec)
	name := store.Name
	carriesKey, carriesValue := carries(g.key), carries(codec)
	return attach(s, op, false, func(t *task, next func(Record[K, A]) error) func(Record[K, V]) error {
		st := t.store(name)
		return func(r Record[K, V]) error {
			kb, err := encodeCarried(g.key, carriesKey, r.keyEnc, r.Key)
			if err != nil {
				return fmt.Errorf("store %s: encode key: %w", name, err)
			}
			old, found, err := st.get(kb)
			if err != nil {
				return err
			}
			var agg A
			if found {
				if agg, err = codec.Decode(old); err != nil {
					return fmt.Errorf("store %s: decode stored value: %w", name, err)
				}
			} else if init != nil {
				agg = init()
			}
			if agg, err = fn(r, agg, found); err != nil {
				return err
			}
			vb, err := codec.Encode(agg)
			if err != nil {
				return fmt.Errorf("store %s: encode value: %w", name, err)
			}
			if err := st.put(kb, vb, r.Timestamp); err != nil {
				return err
			}
			// The output carries the stored bytes: a sink with the same
			// codecs sends them as they are (the changelog record holds
			// them too).
			return next(Record[K, A]{Key: r.Key, Value: agg, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
				keyEnc: carry(g.key, carriesKey, kb), valueEnc: carry(codec, carriesValue, vb)})
		}
	})
}

// repartition writes g's records to "<app>-<name>-repartition" and returns
// the stream reading them back.
func repartition[K, V any](g Grouped[K, V], name string) Stream[K, V] {
	s := g.s
	suffix := name + "-repartition"
	s.b.sinks = append(s.b.sinks, &sinkSpec{topic: suffix, internal: true, op: "repartition", sources: s.sources})
	sinkTo(s, "repartition", func(t *task) string { return t.app.internalTopic(suffix) }, g.key, g.value)
	return addSource(s.b, suffix, true, s.sources, g.key, g.value, nil)
}
