package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weirhq/weir/stream/internal/timekey"
)

// WindowQuery is a typed query handle on a windowed store (WindowedCount,
// WindowedReduce, WindowedAggregate): Kafka Streams' ReadOnlyWindowStore
// and ReadOnlySessionStore fetch by key. It reads the windows the store
// holds — open ones and, with WindowedStore.Retain, closed ones it retains.
type WindowQuery[K, A any] struct {
	app     *App
	name    string
	key     Codec[K]
	value   Codec[A]
	sliding bool
}

// errNotWindowed is returned by QueryWindows for a store that is not a
// windowed operation's.
var errNotWindowed = errors.New("not a windowed store")

// QueryWindows returns a typed query handle on a windowed store of app. K
// must be the grouping key type and A the aggregate type (int64 for
// WindowedCount).
func QueryWindows[K, A any](app *App, store string) (*WindowQuery[K, A], error) {
	spec, ok := app.stores[store]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStore, store)
	}
	if spec.window == "" || spec.codecs == nil {
		return nil, fmt.Errorf("stream: store %q: %w", store, errNotWindowed)
	}
	kc, ok := spec.codecs.key.(Codec[K])
	if !ok {
		return nil, fmt.Errorf("stream: store %q: keys are not of type %T", store, *new(K))
	}
	vc, ok := spec.codecs.value.(Codec[A])
	if !ok {
		return nil, fmt.Errorf("stream: store %q: aggregates are not of type %T", store, *new(A))
	}
	return &WindowQuery[K, A]{app: app, name: store, key: kc, value: vc,
		sliding: spec.codecs.windowKind == "sliding"}, nil
}

// Fetch returns key's windows that start at or after from and before to,
// in start order (at most DefaultRangeLimit; from and to bound the scan).
// Each entry's Timestamp is the window's last instant.
//
// Like App.Get, it reads only the partition holding the key (murmur2 of the
// encoded key over the store's partitions): on this instance if it serves
// it, else from the instance owning it (one request to its query endpoint,
// for that partition), or with AllowStale from a standby copy. Errors are
// Get's.
func (q *WindowQuery[K, A]) Fetch(ctx context.Context, key K, from, to time.Time, opts ...QueryOpt) ([]Entry[Windowed[K], A], error) {
	kb, err := q.key.Encode(key)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode key: %w", q.name, err)
	}
	// A window ends at or after its start: the scan starts at end = from.
	lo, hi := timekey.KeyWindows(kb, from.UnixMilli())
	es, err := q.app.rangeOfKey(ctx, q.name, kb, lo, hi, opts...)
	if err != nil {
		return nil, err
	}
	var out []Entry[Windowed[K], A]
	for _, e := range es {
		_, start, end, err := timekey.ParseWindowKey(e.Key)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", q.name, err)
		}
		if start < from.UnixMilli() || start >= to.UnixMilli() {
			continue
		}
		agg, err := q.decodeValue(e.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, Entry[Windowed[K], A]{
			Key:   Windowed[K]{Key: key, Start: time.UnixMilli(start).UTC(), End: time.UnixMilli(end).UTC()},
			Value: agg, Timestamp: e.Timestamp})
	}
	return out, nil
}

// rangeOfKey returns the entries with from <= key < to (at most
// DefaultRangeLimit) of the one partition of store that holds encoded key
// kb, as Get reads kb: locally if this instance serves the partition, else
// from its owner (a range request naming that partition only), else, with
// AllowStale, from an instance keeping a standby copy.
func (a *App) rangeOfKey(ctx context.Context, store string, kb, from, to []byte, opts ...QueryOpt) ([]StoreEntry, error) {
	o := applyQueryOpts(opts)
	spec, n, err := a.queryTarget(store)
	if err != nil {
		return nil, err
	}
	p := keyPartition(kb, n)
	es, err := a.rangeLocal(spec, p, from, to, DefaultRangeLimit, o.stale)
	if !errors.Is(err, errNotLocal) && !(o.stale && QueryRetriable(err)) {
		return es, err
	}
	if errors.Is(err, errNotLocal) {
		var ep string
		if ep, err = a.route(spec, p); err == nil {
			es, err = a.remoteRange(ctx, ep, store, []int32{p}, from, to, DefaultRangeLimit, false)
		}
	}
	if err == nil || !o.stale || !QueryRetriable(err) && !errors.Is(err, ErrNoRoute) {
		return es, err
	}
	return a.rangeFromStandbys(ctx, spec, p, from, to, DefaultRangeLimit)
}

func (q *WindowQuery[K, A]) decodeValue(v []byte) (A, error) {
	return decodeWindowAgg(q.value, q.sliding, v)
}

// decodeWindowAgg decodes the aggregate of a stored window value (see the
// layout in window_agg.go).
func decodeWindowAgg[A any](c Codec[A], sliding bool, v []byte) (A, error) {
	var zero A
	_, n := binary.Uvarint(v)
	if n <= 0 || (sliding && len(v) < n+16) {
		return zero, fmt.Errorf("stream: window value of %d bytes: no header", len(v))
	}
	v = v[n:]
	if sliding {
		v = v[16:]
	}
	return c.Decode(v)
}

// windowStoreCodecs are a windowed store's codecs for queries: the typed
// handle (QueryWindows) checks them; the HTTP API shows a window entry's
// key as the Windowed key and its value as the aggregate, and parses a key
// text as the prefix of that key's windows (a range from it reads them).
func windowStoreCodecs[K, A any](kc Codec[K], vc Codec[A], kind string) *storeCodecs {
	sc := newStoreCodecs(kc, vc)
	parse := sc.parseKey
	sc.windowKind = kind
	sc.parseKey = func(text string) ([]byte, error) {
		kb, err := parse(text)
		if err != nil {
			return nil, err
		}
		lo, _ := timekey.KeyWindows(kb, math.MinInt64)
		return lo[:len(lo)-timekey.TimeSize], nil
	}
	sc.decodeKey = func(b []byte) (any, error) {
		k, start, end, err := timekey.ParseWindowKey(b)
		if err != nil {
			return nil, err
		}
		key, err := kc.Decode(k)
		if err != nil {
			return nil, err
		}
		return Windowed[K]{Key: key, Start: time.UnixMilli(start).UTC(), End: time.UnixMilli(end).UTC()}, nil
	}
	sc.decodeValue = func(b []byte) (any, error) { return decodeWindowAgg(vc, kind == "sliding", b) }
	return sc
}
