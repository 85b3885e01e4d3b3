package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"
)

// JoinForeign joins table l to table r on a foreign key (Kafka Streams'
// foreign-key table join, KIP-213, inner): for every key of l whose value v
// names, through fk, a key of r present in r, the result table holds
// fn(key, v, r's value). The tables need not be co-partitioned: l's key and
// r's key differ.
//
// How it stays correct when a row's foreign key changes, without a stale
// result (the mechanism, as Kafka Streams'):
//
//   - every update of l sends a subscription, keyed by the foreign key, to
//     "<app>-<store>-fk-subscription" (partitioned as r, read by r's tasks):
//     "subscribe l's key with the hash of its value now", and, when the
//     foreign key changed or the row was deleted, "unsubscribe" to the old
//     foreign key; a deleted row deletes its result at once;
//   - r's task keeps, per key of r, the keys of l subscribed to it (the store
//     "<store>-fk-subscriptions", with its changelog) and answers each
//     subscription, and every later update of that key of r, with r's value
//     (or its absence) to "<app>-<store>-fk-response", keyed by l's key
//     (partitioned as l), carrying the subscription's value hash;
//   - l's task applies a response only if the hash matches the hash of l's
//     current value for the key: a response to a subscription that a later
//     update replaced (another foreign key, or a deleted row) is dropped.
//
// The result is a table kept in store (changelog, queryable, collapsed
// between commits), as JoinTables'; its codec is inferred or given with
// Codecs. fk's result is encoded with r's key codec. A key of r subscribed
// by many keys of l costs one stored list of them (read and rewritten when a
// subscription changes).
func JoinForeign[K, V, KO, VO, VR any](l Table[K, V], fk func(key K, v V) (KO, error), r Table[KO, VO], store StoreConfig,
	fn func(key K, v V, vo VO) (VR, error), opts ...CodecOpt[K, VR],
) Table[K, VR] {
	return joinForeign(l, fk, r, store, "fk-join", false, func(k K, v V, vo VO, _ bool) (VR, error) { return fn(k, v, vo) }, opts)
}

// LeftJoinForeign is JoinForeign keeping every key of l: fn gets found=false
// (and the zero VO) when r has no value for the foreign key.
func LeftJoinForeign[K, V, KO, VO, VR any](l Table[K, V], fk func(key K, v V) (KO, error), r Table[KO, VO],
	store StoreConfig, fn func(key K, v V, vo VO, found bool) (VR, error), opts ...CodecOpt[K, VR],
) Table[K, VR] {
	return joinForeign(l, fk, r, store, "left-fk-join", true, fn, opts)
}

// Subscription and response values (internal topics of one App version):
//
//	subscription: op (1 byte: 's' subscribe, 'u' unsubscribe) | hash (16 bytes, 's' only) | l's key
//	response:     hash (16 bytes) | found (1 byte: 0 or 1) | r's value (if found)
//	subscriptions store value: repeated { len(l's key) uvarint | l's key | hash (16 bytes) }, by key
const (
	fkSubscribe   = 's'
	fkUnsubscribe = 'u'
	fkHashLen     = 16
)

var errFKFormat = errors.New("foreign-key join: malformed internal record")

func fkHash(v []byte) []byte {
	h := fnv.New128a()
	h.Write(v)
	return h.Sum(nil)
}

// fkSubs is a decoded subscriptions store value: l's keys and their hashes,
// sorted by key.
type fkSubs struct {
	keys   [][]byte
	hashes [][]byte
}

func decodeFKSubs(b []byte) (fkSubs, error) {
	var s fkSubs
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		// (A length in its shortest form only: one list, one encoding.)
		if w <= 0 || w != len(binary.AppendUvarint(nil, n)) || n > uint64(len(b)-w) || uint64(len(b)-w)-n < fkHashLen {
			return fkSubs{}, errFKFormat
		}
		b = b[w:]
		if k := len(s.keys); k > 0 && bytes.Compare(s.keys[k-1], b[:n]) >= 0 {
			return fkSubs{}, errFKFormat // keys are kept sorted and unique
		}
		s.keys = append(s.keys, b[:n:n])
		s.hashes = append(s.hashes, b[n:n+fkHashLen:n+fkHashLen])
		b = b[n+fkHashLen:]
	}
	return s, nil
}

func (s *fkSubs) encode() []byte {
	var out []byte
	for i, k := range s.keys {
		out = binary.AppendUvarint(out, uint64(len(k)))
		out = append(out, k...)
		out = append(out, s.hashes[i]...)
	}
	return out
}

// set subscribes key with hash (replacing its hash), or unsubscribes it
// (hash nil).
func (s *fkSubs) set(key, hash []byte) {
	i, found := slices.BinarySearchFunc(s.keys, key, bytes.Compare)
	switch {
	case hash == nil && found:
		s.keys = slices.Delete(s.keys, i, i+1)
		s.hashes = slices.Delete(s.hashes, i, i+1)
	case hash != nil && found:
		s.hashes[i] = hash
	case hash != nil:
		s.keys = slices.Insert(s.keys, i, key)
		s.hashes = slices.Insert(s.hashes, i, hash)
	}
}

// fkLeft is one task's instance of the left side (l's sub-topology): the
// result store and its collapsed updates.
type fkLeft[K, V, KO, VO, VR any] struct {
	t       *task
	n       *node
	left    *taskStore
	result  *taskStore
	up      *tableUpdates[K, VR]
	subs    string // subscription topic
	leftJ   bool
	value   Codec[VR]
	fn      func(K, V, VO, bool) (VR, error)
	lvalue  Codec[V]
	rvalue  Codec[VO]
	key     Codec[K]
	fkey    Codec[KO]
	fk      func(K, V) (KO, error)
	carries bool
}

// fkRight is one task's instance of the right side (r's sub-topology): the
// subscriptions store.
type fkRight struct {
	t     *task
	n     *node
	right *taskStore
	subs  *taskStore
	resp  string // response topic
}

func joinForeign[K, V, KO, VO, VR any](l Table[K, V], fk func(K, V) (KO, error), r Table[KO, VO], store StoreConfig,
	op string, leftJ bool, fn func(K, V, VO, bool) (VR, error), opts []CodecOpt[K, VR],
) Table[K, VR] {
	b := l.b
	if !l.valid() || !r.valid() {
		return Table[K, VR]{b: b}
	}
	if r.b != b {
		b.errorf("%s %q: tables from different builders", op, store.Name)
		return Table[K, VR]{b: b}
	}
	if fk == nil || fn == nil {
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
	subsStore := StoreConfig{Name: store.Name + "-fk-subscriptions",
		NoExpiry: "one entry per key of the left table subscribed: bounded by that table"}
	if !b.declareStore(store) || !b.declareStore(subsStore) {
		return Table[K, VR]{b: b}
	}
	name := store.Name
	subSuffix, respSuffix := name+"-fk-subscription", name+"-fk-response"
	l.meta.wantOld = true // the old foreign key of an update, to unsubscribe

	// Right side: the subscription topic's source, co-partitioned with r.
	subSrc := addSource(b, subSuffix, true, l.sources, Bytes(), Bytes(), nil)
	b.sinks = append(b.sinks, &sinkSpec{topic: subSuffix, internal: true, op: op + "-subscribe", sources: l.sources})
	b.stores = append(b.stores, &storeSpec{name: subsStore.Name, noExpiry: subsStore.NoExpiry, source: subSrc.sources[0],
		op: op + "-subscriptions"})
	rightNode := b.addNode(op+"-subscriptions", nil)
	rightNode.name = op + "-" + subsStore.Name
	rightNode.build = func(t *task, _ []any) any {
		return &fkRight{t: t, n: rightNode, right: t.store(r.store), subs: t.store(subsStore.Name),
			resp: t.app.internalTopic(respSuffix)}
	}
	subIn := subSrc.link(op+"-subscription-in", func(t *task, children []any) any {
		rs := children[0].(*fkRight)
		return func(rec Record[[]byte, []byte]) error { return rs.subscription(rec) }
	})
	rIn := Stream[KO, VO]{b: b, n: r.n}.link(op+"-right", func(t *task, children []any) any {
		rs := children[0].(*fkRight)
		carriesKey := carries(r.key)
		return func(rec Record[KO, VO]) error {
			kb, err := encodeCarried(r.key, carriesKey, rec.keyEnc, rec.Key)
			if err != nil {
				return failedIn(rs.n, fmt.Errorf("encode foreign key: %w", err))
			}
			return rs.rightUpdate(kb, rec.Timestamp, rec.Headers, rec.Origin)
		}
	})
	subIn.children = append(subIn.children, rightNode)
	rIn.children = append(rIn.children, rightNode)
	b.links = append(b.links, [2]int{subIn.id, rIn.id})

	// Left side: the response topic's source, co-partitioned with l.
	respSrc := addSource(b, respSuffix, true, r.sources, Bytes(), Bytes(), nil)
	b.sinks = append(b.sinks, &sinkSpec{topic: respSuffix, internal: true, op: op + "-respond", sources: r.sources})
	b.stores = append(b.stores, &storeSpec{name: name, ttl: store.TTL, noExpiry: store.NoExpiry, source: l.sources[0],
		op: op, codecs: newStoreCodecs(l.key, codec)})
	meta := &tableMeta{}
	res := b.addNode(op, nil)
	res.name = op + "-" + name
	res.build = func(t *task, children []any) any {
		j := &fkLeft[K, V, KO, VO, VR]{t: t, n: res, left: t.store(l.store), result: t.store(name),
			subs: t.app.internalTopic(subSuffix), leftJ: leftJ, value: codec, fn: fn, lvalue: l.value, rvalue: r.value,
			key: l.key, fkey: r.key, fk: fk, carries: carries(l.key)}
		j.up = newTableUpdates[K, VR](t, res.id, j.result, store.EveryUpdate, l.key, codec, meta.oldWanted, children)
		return j
	}
	lIn := Stream[K, V]{b: b, n: l.n}.link(op+"-left", func(t *task, children []any) any {
		j := children[0].(*fkLeft[K, V, KO, VO, VR])
		return func(rec Record[K, V]) error { return j.leftUpdate(rec) }
	})
	respIn := respSrc.link(op+"-response-in", func(t *task, children []any) any {
		j := children[0].(*fkLeft[K, V, KO, VO, VR])
		return func(rec Record[[]byte, []byte]) error { return j.response(rec) }
	})
	lIn.children = append(lIn.children, res)
	respIn.children = append(respIn.children, res)
	b.links = append(b.links, [2]int{lIn.id, respIn.id})
	return Table[K, VR]{b: b, n: res, store: name, key: l.key, value: codec, sources: l.sources, meta: meta}
}

// leftUpdate sends the subscriptions an update of l calls for, and deletes
// the result of a deleted row.
func (j *fkLeft[K, V, KO, VO, VR]) leftUpdate(rec Record[K, V]) (err error) {
	defer func() { err = failedIn(j.n, err) }()
	kb, err := encodeCarried(j.key, j.carries, rec.keyEnc, rec.Key)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	var oldFK, newFK []byte
	if rec.old != nil {
		ko, err := j.fk(rec.Key, *rec.old)
		if err != nil {
			return err
		}
		if oldFK, err = j.fkey.Encode(ko); err != nil {
			return fmt.Errorf("encode foreign key: %w", err)
		}
	}
	if !rec.Tombstone {
		ko, err := j.fk(rec.Key, rec.Value)
		if err != nil {
			return err
		}
		if newFK, err = j.fkey.Encode(ko); err != nil {
			return fmt.Errorf("encode foreign key: %w", err)
		}
	}
	t := j.t
	if oldFK != nil && (newFK == nil || !bytes.Equal(oldFK, newFK)) {
		t.emit(j.subs, -1, oldFK, append([]byte{fkUnsubscribe}, kb...), rec.Timestamp, nil)
		t.markOrigin(rec.Origin)
	}
	if newFK != nil {
		// The hash of the value l's store holds now: a response carries it
		// back, and only a response to the current value applies.
		raw, found, err := j.left.get(kb)
		if err != nil {
			return err
		}
		if !found {
			return nil // deleted since (a later update of this round): its own update follows
		}
		v := append(append([]byte{fkSubscribe}, fkHash(raw)...), kb...)
		t.emit(j.subs, -1, newFK, v, rec.Timestamp, nil)
		t.markOrigin(rec.Origin)
		return nil
	}
	// A deleted row: its result goes at once.
	old, found, err := j.result.get(kb)
	if err != nil || !found {
		return err
	}
	if err := t.txn.Delete(j.result.spec.name, kb); err != nil {
		return fmt.Errorf("store %s: %w", j.result.spec.name, err)
	}
	return j.up.update(kb, nil, old, true, rec.Timestamp, Record[K, VR]{Key: rec.Key, Timestamp: rec.Timestamp,
		Headers: rec.Headers, Origin: rec.Origin, keyEnc: carry(j.key, j.carries, kb)})
}

// response applies r's answer for one key of l, if it answers l's current
// value.
func (j *fkLeft[K, V, KO, VO, VR]) response(rec Record[[]byte, []byte]) (err error) {
	defer func() { err = failedIn(j.n, err) }()
	v := rec.Value
	if len(v) < fkHashLen+1 || v[fkHashLen] > 1 {
		return errFKFormat
	}
	kb := rec.Key
	raw, found, err := j.left.get(kb)
	if err != nil {
		return err
	}
	if !found || !bytes.Equal(fkHash(raw), v[:fkHashLen]) {
		return nil // answers a value l no longer holds: stale
	}
	k, err := j.key.Decode(kb)
	if err != nil {
		return fmt.Errorf("decode key: %w", err)
	}
	lv, err := j.lvalue.Decode(raw)
	if err != nil {
		return fmt.Errorf("decode left value: %w", err)
	}
	rfound := v[fkHashLen] == 1
	var vo VO
	if rfound {
		if vo, err = j.rvalue.Decode(v[fkHashLen+1:]); err != nil {
			return fmt.Errorf("decode right value: %w", err)
		}
	}
	old, had, err := j.result.get(kb)
	if err != nil {
		return err
	}
	out := Record[K, VR]{Key: k, Timestamp: rec.Timestamp, Headers: rec.Headers, Origin: rec.Origin,
		keyEnc: carry(j.key, j.carries, kb)}
	t := j.t
	if !rfound && !j.leftJ {
		if !had {
			return nil
		}
		if err := t.txn.Delete(j.result.spec.name, kb); err != nil {
			return fmt.Errorf("store %s: %w", j.result.spec.name, err)
		}
		return j.up.update(kb, nil, old, true, rec.Timestamp, out)
	}
	vr, err := j.fn(k, lv, vo, rfound)
	if err != nil {
		return err
	}
	vb, err := j.value.Encode(vr)
	if err != nil {
		return fmt.Errorf("store %s: encode value: %w", j.result.spec.name, err)
	}
	updated, err := t.txn.Put(j.result.spec.name, kb, vb, rec.Timestamp.UnixMilli())
	if err != nil {
		return fmt.Errorf("store %s: %w", j.result.spec.name, err)
	}
	out.Value = vr
	return j.up.update(kb, vb, old, had, time.UnixMilli(updated), out)
}

// subscription applies a subscription to r's key rec.Key and answers a
// subscribe with r's current value.
func (rs *fkRight) subscription(rec Record[[]byte, []byte]) (err error) {
	defer func() { err = failedIn(rs.n, err) }()
	v := rec.Value
	if len(v) < 1 || (v[0] == fkSubscribe && len(v) < 1+fkHashLen) || (v[0] != fkSubscribe && v[0] != fkUnsubscribe) {
		return errFKFormat
	}
	fkb := rec.Key
	raw, found, err := rs.subs.get(fkb)
	if err != nil {
		return err
	}
	var s fkSubs
	if found {
		if s, err = decodeFKSubs(raw); err != nil {
			return fmt.Errorf("store %s: %w", rs.subs.spec.name, err)
		}
	}
	var key, hash []byte
	if v[0] == fkSubscribe {
		hash, key = v[1:1+fkHashLen], v[1+fkHashLen:]
	} else {
		key = v[1:]
	}
	s.set(slices.Clone(key), slices.Clone(hash))
	if len(s.keys) == 0 {
		if found {
			if err := rs.subs.delete(fkb, rec.Timestamp); err != nil {
				return err
			}
		}
	} else if err := rs.subs.put(fkb, s.encode(), rec.Timestamp); err != nil {
		return err
	}
	if hash == nil {
		return nil
	}
	rv, rfound, err := rs.right.get(fkb)
	if err != nil {
		return err
	}
	rs.respond(key, hash, rv, rfound, rec.Timestamp, rec.Headers)
	return nil
}

// rightUpdate answers every subscriber of r's key fkb with its new value.
func (rs *fkRight) rightUpdate(fkb []byte, ts time.Time, headers []Header, _ Origin) error {
	raw, found, err := rs.subs.get(fkb)
	if err != nil || !found {
		return err
	}
	s, err := decodeFKSubs(raw)
	if err != nil {
		return failedIn(rs.n, fmt.Errorf("store %s: %w", rs.subs.spec.name, err))
	}
	rv, rfound, err := rs.right.get(fkb)
	if err != nil {
		return err
	}
	for i, k := range s.keys {
		rs.respond(k, s.hashes[i], rv, rfound, ts, headers)
	}
	return nil
}

func (rs *fkRight) respond(key, hash, rv []byte, found bool, ts time.Time, headers []Header) {
	v := make([]byte, 0, fkHashLen+1+len(rv))
	v = append(v, hash...)
	if found {
		v = append(v, 1)
		v = append(v, rv...)
	} else {
		v = append(v, 0)
	}
	rs.t.emit(rs.resp, -1, key, v, ts, headers)
}

// delete removes a key of an operator's store, with a changelog tombstone.
func (s *taskStore) delete(key []byte, ts time.Time) error {
	if err := s.t.txn.Delete(s.spec.name, key); err != nil {
		return fmt.Errorf("store %s: %w", s.spec.name, err)
	}
	s.t.emit(s.changelog, s.t.id.partition, key, nil, ts, nil)
	return nil
}
