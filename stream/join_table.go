package stream

import (
	"fmt"
	"slices"
	"time"
)

// JoinTables joins two tables on their key (Kafka Streams' KTable-KTable
// join, inner): the result table holds fn(key, left value, right value) for
// every key present in both. It is a table like an aggregate's: kept in the
// store named by store (with its changelog, queryable, bounded as every
// store is), its updates collapsed between commits.
//
// A change on either side recomputes the key's result from both tables'
// current values (so the result never depends on the order the two sides'
// updates arrived in, only on their latest values); a deletion on either
// side (a tombstone, an expired key) deletes the key's result, forwarded
// downstream as a tombstone. The result's timestamp is the later of the two
// sides' update times.
//
// The two tables must be co-partitioned: same key, same partitioning, same
// partition count (checked at start, ErrPartitionMismatch), as for a
// stream-table join; a table whose key changed since its source is already
// repartitioned by its aggregate. The result's value codec is inferred
// (InferCodec) or given with Codecs (its key codec is ignored: the key codec
// is the left table's).
func JoinTables[K, V1, V2, VR any](l Table[K, V1], r Table[K, V2], store StoreConfig,
	fn func(key K, lv V1, rv V2) (VR, error), opts ...CodecOpt[K, VR],
) Table[K, VR] {
	return joinTables(l, r, store, "join-tables", func(lok, rok bool) bool { return lok && rok },
		func(k K, lv V1, _ bool, rv V2, _ bool) (VR, error) { return fn(k, lv, rv) }, opts)
}

// LeftJoinTables is JoinTables keeping every key of the left table: fn gets
// rok=false (and the zero V2) when the right table has no value for the key.
func LeftJoinTables[K, V1, V2, VR any](l Table[K, V1], r Table[K, V2], store StoreConfig,
	fn func(key K, lv V1, rv V2, rok bool) (VR, error), opts ...CodecOpt[K, VR],
) Table[K, VR] {
	return joinTables(l, r, store, "left-join-tables", func(lok, _ bool) bool { return lok },
		func(k K, lv V1, _ bool, rv V2, rok bool) (VR, error) { return fn(k, lv, rv, rok) }, opts)
}

// OuterJoinTables is JoinTables keeping every key of either table: fn gets
// lok or rok false (and the zero value) for the side that has none.
func OuterJoinTables[K, V1, V2, VR any](l Table[K, V1], r Table[K, V2], store StoreConfig,
	fn func(key K, lv V1, lok bool, rv V2, rok bool) (VR, error), opts ...CodecOpt[K, VR],
) Table[K, VR] {
	return joinTables(l, r, store, "outer-join-tables", func(lok, rok bool) bool { return lok || rok }, fn, opts)
}

// tableJoin is one task's instance of a table-table join: its two input
// tables' stores, its result store and the result's collapsed updates.
type tableJoin[K, V1, V2, VR any] struct {
	t           *task
	n           *node // the result node (error attribution)
	left, right *taskStore
	result      *taskStore
	up          *tableUpdates[K, VR]
	lv          Codec[V1]
	rv          Codec[V2]
	key         Codec[K]
	value       Codec[VR]
	carriesKey  bool
	carriesVal  bool
	need        func(lok, rok bool) bool
	fn          func(K, V1, bool, V2, bool) (VR, error)
}

func joinTables[K, V1, V2, VR any](l Table[K, V1], r Table[K, V2], store StoreConfig, op string,
	need func(lok, rok bool) bool, fn func(K, V1, bool, V2, bool) (VR, error), opts []CodecOpt[K, VR],
) Table[K, VR] {
	b := l.b
	if !l.valid() || !r.valid() {
		return Table[K, VR]{b: b}
	}
	if r.b != b {
		b.errorf("%s %q: tables from different builders", op, store.Name)
		return Table[K, VR]{b: b}
	}
	if fn == nil {
		b.errorf("%s %q: nil function", op, store.Name)
		return Table[K, VR]{b: b}
	}
	var codec Codec[VR]
	for _, o := range opts {
		codec = cmpOr(o.value, codec)
	}
	if codec == nil {
		var err error
		if codec, err = InferCodec[VR](); err != nil {
			b.errorf("%s %q: result value: %v; pass stream.Codecs", op, store.Name, err)
			return Table[K, VR]{b: b}
		}
	}
	if !b.declareStore(store) {
		return Table[K, VR]{b: b}
	}
	name := store.Name
	spec := &storeSpec{name: name, ttl: store.TTL, noExpiry: store.NoExpiry, source: l.sources[0], op: op,
		codecs: newStoreCodecs(l.key, codec)}
	b.stores = append(b.stores, spec)
	meta := &tableMeta{}
	// The result node's instance is the task's join (built once per task,
	// reached from both inputs); its children receive the result's updates.
	res := b.addNode(op, nil)
	res.build = func(t *task, children []any) any {
		j := &tableJoin[K, V1, V2, VR]{t: t, n: res, left: t.store(l.store), right: t.store(r.store),
			result: t.store(name), lv: l.value, rv: r.value, key: l.key, value: codec,
			carriesKey: carries(l.key), carriesVal: carries(codec), need: need, fn: fn}
		j.up = newTableUpdates[K, VR](t, res.id, j.result, store.EveryUpdate, l.key, codec, meta.oldWanted, children)
		return j
	}
	res.name = op + "-" + name
	// Either side's update recomputes the key from both stores.
	input := func(t *task, children []any) any {
		j := children[0].(*tableJoin[K, V1, V2, VR])
		return func(rec joinInput[K]) error { return j.update(rec) }
	}
	ln := Stream[K, V1]{b: b, n: l.n}.link(op+"-left", adaptInput[K, V1](input))
	rn := Stream[K, V2]{b: b, n: r.n}.link(op+"-right", adaptInput[K, V2](input))
	ln.children = append(ln.children, res)
	rn.children = append(rn.children, res)
	// The two tables' sources form one co-partitioned sub-topology.
	b.links = append(b.links, [2]int{ln.id, rn.id})
	sources := slices.Concat(l.sources, r.sources)
	slices.Sort(sources)
	return Table[K, VR]{b: b, n: res, store: name, key: l.key, value: codec, sources: slices.Compact(sources), meta: meta}
}

// joinInput is what a table-table join needs of an input table's update:
// its key and where it came from (the new values are read from the stores).
type joinInput[K any] struct {
	key     K
	keyEnc  encoded
	ts      time.Time
	headers []Header
	origin  Origin
}

// adaptInput turns a join input builder working on joinInput into the
// operator input of a table of values V.
func adaptInput[K, V any](build func(t *task, children []any) any) func(t *task, children []any) any {
	return func(t *task, children []any) any {
		f := build(t, children).(func(joinInput[K]) error)
		return func(r Record[K, V]) error {
			return f(joinInput[K]{key: r.Key, keyEnc: r.keyEnc, ts: r.Timestamp, headers: r.Headers, origin: r.Origin})
		}
	}
}

// update recomputes the result of one key from both tables' current values
// and records the change (none if the key's result neither was nor is).
func (j *tableJoin[K, V1, V2, VR]) update(in joinInput[K]) (err error) {
	defer func() { err = failedIn(j.n, err) }()
	kb, err := encodeCarried(j.key, j.carriesKey, in.keyEnc, in.key)
	if err != nil {
		return fmt.Errorf("store %s: encode key: %w", j.result.spec.name, err)
	}
	txn := j.t.txn
	lraw, lts, lok, err := txn.Get(j.left.spec.name, kb)
	if err != nil {
		return err
	}
	rraw, rts, rok, err := txn.Get(j.right.spec.name, kb)
	if err != nil {
		return err
	}
	old, found, err := j.result.get(kb)
	if err != nil {
		return err
	}
	ts := in.ts
	if lok && lts > ts.UnixMilli() {
		ts = time.UnixMilli(lts)
	}
	if rok && rts > ts.UnixMilli() {
		ts = time.UnixMilli(rts)
	}
	out := Record[K, VR]{Key: in.key, Timestamp: ts, Headers: in.headers, Origin: in.origin,
		keyEnc: carry(j.key, j.carriesKey, kb)}
	if !j.need(lok, rok) {
		if !found {
			return nil
		}
		if err := txn.Delete(j.result.spec.name, kb); err != nil {
			return fmt.Errorf("store %s: %w", j.result.spec.name, err)
		}
		return j.up.update(kb, nil, old, true, ts, out)
	}
	var lv V1
	var rv V2
	if lok {
		if lv, err = j.lv.Decode(lraw); err != nil {
			return fmt.Errorf("%s: decode left value: %w", j.n.name, err)
		}
	}
	if rok {
		if rv, err = j.rv.Decode(rraw); err != nil {
			return fmt.Errorf("%s: decode right value: %w", j.n.name, err)
		}
	}
	vr, err := j.fn(in.key, lv, lok, rv, rok)
	if err != nil {
		return err
	}
	vb, err := j.value.Encode(vr)
	if err != nil {
		return fmt.Errorf("store %s: encode value: %w", j.result.spec.name, err)
	}
	updated, err := txn.Put(j.result.spec.name, kb, vb, ts.UnixMilli())
	if err != nil {
		return fmt.Errorf("store %s: %w", j.result.spec.name, err)
	}
	out.Value, out.valueEnc = vr, carry(j.value, j.carriesVal, vb)
	return j.up.update(kb, vb, old, found, time.UnixMilli(updated), out)
}
