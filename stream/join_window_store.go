package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
)

// The encodings of a stream-stream join's store (the layout is drawn in
// join_window.go) and its key lists.
//
// Its changelog is written per write (streamJoin.put), not collapsed
// between flushes as windowed aggregates' and Process stores' are
// (storeChangelog): a bucket and its index entry are written once and
// deleted once; under at-least-once their deletion waits for the round
// after the commit covering the close, so none is created and deleted
// between two flushes; only the key lists are rewritten, once per bucket
// of the key added or closed. Counted on a self-join within ±1 s of
// 200k records over 20 s of event time, a flush per 1500 records: with
// the benchmark's 100k keys (each twice, 10 s apart) a collapse writes
// the same 11.68 records per input; with 1k keys, 21.9% fewer records
// and 26.2% fewer bytes, all of them key lists. A collapse would also
// have to keep join_window.go's prefix invariant (index, key list, bucket
// written in that order, deleted in the reverse one) in its flushes: five
// phases, one more than storeChangelog has.

func bufKey(side int, kb []byte, t int64) []byte {
	k := make([]byte, 0, 1+len(kb)+2+timekey.TimeSize)
	k = append(k, ssjBufTag[side])
	k = timekey.AppendKey(k, kb)
	return timekey.AppendTime(k, t)
}

func joinIndexKey(side int, t int64, kb []byte) []byte {
	k := make([]byte, 0, 1+timekey.TimeSize+len(kb)+2)
	k = append(k, ssjIdxTag[side])
	k = timekey.AppendTime(k, t)
	return timekey.AppendKey(k, kb)
}

// parseJoinIndexKey returns an index key's time and encoded key.
func parseJoinIndexKey(name string, k []byte) (int64, []byte, error) {
	if len(k) < 1+timekey.TimeSize {
		return 0, nil, &state.CorruptionError{Store: name, Key: slices.Clone(k), Reason: "short join index key"}
	}
	kb, rest, err := timekey.ReadKey(k[1+timekey.TimeSize:])
	if err != nil || len(rest) != 0 {
		return 0, nil, &state.CorruptionError{Store: name, Key: slices.Clone(k), Reason: "malformed join index key"}
	}
	return readEnd(k), kb, nil
}

// bucketTime is the time of a bucket key.
func bucketTime(bk []byte) int64 {
	return int64(binary.BigEndian.Uint64(bk[len(bk)-timekey.TimeSize:]) ^ (1 << 63))
}

// bucketEntry is one buffered record of a bucket.
type bucketEntry struct {
	flags byte
	value []byte
}

var errJoinBucket = errors.New("malformed stream-stream join store value")

func decodeBucket(v []byte) ([]bucketEntry, error) {
	var out []bucketEntry
	for len(v) > 0 {
		f := v[0]
		n, w := binary.Uvarint(v[1:])
		// (A length in its shortest form only: one value, one encoding.)
		if f&^ssjMatched != 0 || w <= 0 || w != len(binary.AppendUvarint(nil, n)) || n > uint64(len(v)-1-w) {
			return nil, errJoinBucket
		}
		v = v[1+w:]
		out = append(out, bucketEntry{flags: f, value: v[:n:n]})
		v = v[n:]
	}
	return out, nil
}

func encodeBucket(es []bucketEntry) []byte {
	n := 0
	for _, e := range es {
		n += 1 + binary.MaxVarintLen64 + len(e.value)
	}
	out := make([]byte, 0, n)
	for _, e := range es {
		out = append(out, e.flags)
		out = binary.AppendUvarint(out, uint64(len(e.value)))
		out = append(out, e.value...)
	}
	return out
}

// joinSparseTimes is how many buckets of a key a key list names by time;
// a key with more is looked up by a scan. (A variable: tests lower it to
// run both kinds of lookup.)
var joinSparseTimes = 32

const (
	ssjKeyList    = 'k'
	keyListSparse = 0
	keyListDense  = 1
)

func keyListKey(side int, kb []byte) []byte {
	k := make([]byte, 0, 2+len(kb)+2)
	k = append(k, ssjKeyList, ssjBufTag[side])
	return timekey.AppendKey(k, kb)
}

// keyList is a decoded key list: times (sparse) or a count (dense).
type keyList struct {
	dense bool
	times []int64
	count uint64
}

func decodeKeyList(v []byte) (keyList, error) {
	if len(v) == 0 {
		return keyList{}, errJoinBucket
	}
	switch v[0] {
	case keyListSparse:
		if (len(v)-1)%8 != 0 {
			return keyList{}, errJoinBucket
		}
		l := keyList{times: make([]int64, 0, (len(v)-1)/8)}
		for b := v[1:]; len(b) > 0; b = b[8:] {
			t := int64(binary.BigEndian.Uint64(b))
			if n := len(l.times); n > 0 && l.times[n-1] >= t {
				return keyList{}, errJoinBucket // kept ascending and distinct
			}
			l.times = append(l.times, t)
		}
		return l, nil
	case keyListDense:
		n, w := binary.Uvarint(v[1:])
		if w <= 0 || w != len(v)-1 || w != len(binary.AppendUvarint(nil, n)) {
			return keyList{}, errJoinBucket
		}
		return keyList{dense: true, count: n}, nil
	}
	return keyList{}, errJoinBucket
}

func (l keyList) encode() []byte {
	if l.dense {
		return binary.AppendUvarint([]byte{keyListDense}, l.count)
	}
	v := make([]byte, 1, 1+8*len(l.times))
	for _, t := range l.times {
		v = binary.BigEndian.AppendUint64(v, uint64(t))
	}
	return v
}

// readList reads side's key list of kb (found false: the key has no
// bucket of that side).
func (j *streamJoin[K, V1, V2, VR]) readList(side int, kb []byte) (lk []byte, l keyList, found bool, err error) {
	lk = keyListKey(side, kb)
	v, found, err := j.get(lk)
	if err != nil || !found {
		return lk, l, false, err
	}
	if l, err = decodeKeyList(v); err != nil {
		return lk, l, false, &fatalError{fmt.Errorf("store %s: key list: %w", j.name, err)}
	}
	return lk, l, true, nil
}

// lookup returns the keys of side's buckets of key kb with times in
// [from, to], in time order (each to be read through the transaction: it
// may be gone).
func (j *streamJoin[K, V1, V2, VR]) lookup(side int, kb []byte, from, to int64) ([][]byte, error) {
	_, l, found, err := j.readList(side, kb)
	if err != nil || !found {
		return nil, err
	}
	if l.dense {
		return j.buckets(side, kb, from, to)
	}
	var out [][]byte
	for _, t := range l.times {
		if t >= from && t <= to {
			out = append(out, bufKey(side, kb, t))
		}
	}
	return out, nil
}

// listAdd names side's new bucket (kb, t) in the key's list.
func (j *streamJoin[K, V1, V2, VR]) listAdd(side int, kb []byte, t int64) error {
	lk, l, _, err := j.readList(side, kb)
	if err != nil {
		return err
	}
	if l.dense {
		l.count++
	} else if i, ok := slices.BinarySearch(l.times, t); !ok {
		l.times = slices.Insert(l.times, i, t)
		if len(l.times) > joinSparseTimes {
			l = keyList{dense: true, count: uint64(len(l.times))}
		}
	}
	return j.put(lk, l.encode(), t)
}

// listRemove drops side's closed bucket (kb, t) from the key's list
// (existed: the bucket was there to delete) through the transaction, and
// returns the list's key and new value (nil: deleted) for the changelog,
// or a nil key if the list did not change.
func (j *streamJoin[K, V1, V2, VR]) listRemove(side int, kb []byte, t int64, existed bool) ([]byte, []byte, error) {
	lk, l, found, err := j.readList(side, kb)
	if err != nil || !found {
		return nil, nil, err
	}
	if l.dense {
		if !existed || l.count == 0 {
			return nil, nil, nil // see the invariants: never too low
		}
		l.count--
	} else {
		i, ok := slices.BinarySearch(l.times, t)
		if !ok {
			return nil, nil, nil
		}
		l.times = slices.Delete(l.times, i, i+1)
	}
	if !l.dense && len(l.times) == 0 || l.dense && l.count == 0 {
		if err := j.t.txn.DeleteCold(j.name, lk); err != nil {
			return nil, nil, &fatalError{fmt.Errorf("store %s: %w", j.name, err)}
		}
		return lk, nil, nil
	}
	v := l.encode()
	if _, err := j.t.txn.Put(j.name, lk, v, t); err != nil {
		return nil, nil, &fatalError{fmt.Errorf("store %s: %w", j.name, err)}
	}
	return lk, v, nil
}
