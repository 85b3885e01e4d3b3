package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The TTL index is coarse: a key's index entry names the end of the time
// bucket holding its update time, not the time itself, so an update that
// stays in its bucket writes only the data key (not also an index delete and
// an index set). The data value keeps the exact update time; reads and MaxTS
// are exact.
//
// Invariant (between Pebble batches): every data key of a store with update
// time ts has exactly one index entry, at bucketEnd(ts, w) for the store's
// width w, and every index entry is such an entry; a store of width
// noIndexWidth (NoTTLIndex: a windowed store, bounded by its windows' ends,
// not by a TTL) has no index entry. A flush keeps it (a
// write whose bucket changes deletes the old entry and sets the new one in
// the same batch as the data key); a width change rebuilds the store's index
// at Open (rebuildIndex), so entries of an older width never outlive the Open
// that changed it.
//
// Expiry bound: Expired(store, before) returns the keys of the buckets that
// end at or before `before`, each of which holds only keys with ts < before.
// A key is never removed early; it is removed at most one bucket width after
// it expired (ts + TTL), once stream time has passed the end of its bucket.

// minBucketWidth is the smallest width derived from a TTL (ms): a TTL under
// 64 s gets 1 s buckets (or buckets of the TTL itself if that is shorter).
const minBucketWidth = 1000

// bucketsPerTTL is how many buckets a TTL spans: a key is removed at most
// TTL/bucketsPerTTL after it expired.
const bucketsPerTTL = 64

// exactWidth is the width of a store with no declared TTL: every ms its own
// bucket, the exact index (a table's store; stores of tests).
const exactWidth = 1

// noIndexWidth is the width of a store declared with NoTTLIndex: it has no
// TTL index at all (no 'x' entries; Expired finds nothing in it).
const noIndexWidth = 0

// BucketWidth is the TTL index bucket width (ms) of a store with the given
// TTL: TTL/64, at least 1 s (at most the TTL itself), at least 1 ms; the
// exact width for ttl <= 0.
func BucketWidth(ttl time.Duration) int64 {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return exactWidth
	}
	w := ms / bucketsPerTTL
	if w < minBucketWidth {
		w = min(minBucketWidth, ms)
	}
	return max(w, exactWidth)
}

// bucketEnd returns the exclusive end of ts's bucket of width w: the
// smallest multiple of w greater than ts (saturated at math.MaxInt64, where
// the bound ts < end does not hold: no real event time is that large).
func bucketEnd(ts, w int64) int64 {
	mod := ts % w
	if mod < 0 {
		mod += w // buckets of negative times start at a multiple of w too
	}
	if ts > math.MaxInt64-(w-mod) {
		return math.MaxInt64
	}
	return ts + (w - mod)
}

// The width of a store is persisted as the meta key "bucket/<store>", so that
// an Open with another TTL knows the index it finds was built for another
// width:
//
//	version u8 (=1) | width uvarint (ms; 0: no index) | state u8 (0 complete, 1 rebuilding)
//
// "rebuilding" is written (with the deletion of the store's index) before a
// rebuild writes the new entries and replaced by "complete" after them: an
// Open that finds it (a crash during a rebuild) rebuilds again.
const (
	bucketMetaVersion = 1
	bucketComplete    = 0
	bucketRebuilding  = 1
	metaBucketPrefix  = "bucket/"
)

// ErrBadBucketMeta is returned (wrapped) for a persisted bucket width that
// does not decode.
var ErrBadBucketMeta = errors.New("state: bad bucket width")

func encodeBucketMeta(width int64, rebuilding bool) []byte {
	b := []byte{bucketMetaVersion}
	b = binary.AppendUvarint(b, uint64(width))
	if rebuilding {
		return append(b, bucketRebuilding)
	}
	return append(b, bucketComplete)
}

// decodeBucketMeta decodes what encodeBucketMeta wrote; any other input is
// an ErrBadBucketMeta.
func decodeBucketMeta(b []byte) (width int64, rebuilding bool, err error) {
	if len(b) < 3 || b[0] != bucketMetaVersion {
		return 0, false, fmt.Errorf("%w: %x", ErrBadBucketMeta, b)
	}
	w, n := binary.Uvarint(b[1:])
	// The encoding is canonical: an overlong varint is refused.
	if n <= 0 || w > math.MaxInt64 || 1+n+1 != len(b) || n != len(binary.AppendUvarint(nil, w)) {
		return 0, false, fmt.Errorf("%w: %x", ErrBadBucketMeta, b)
	}
	switch b[1+n] {
	case bucketComplete:
		return int64(w), false, nil
	case bucketRebuilding:
		return int64(w), true, nil
	}
	return 0, false, fmt.Errorf("%w: state %d", ErrBadBucketMeta, b[1+n])
}

func bucketMetaKey(store string) []byte { return metaKey(metaBucketPrefix + store) }

// widthOf returns store's bucket width. A store not declared to Open
// (StoreTTL) keeps the width it was built with, or gets the exact width if it
// has none yet (its first write comes after the width's, in the same WAL).
func (d *DB) widthOf(store string) (int64, error) {
	if w, ok := d.widths[store]; ok {
		return w, nil
	}
	v, err := d.getMeta(metaBucketPrefix + store)
	if err != nil {
		return 0, err
	}
	if v != nil {
		w, rebuilding, derr := decodeBucketMeta(v)
		switch {
		case derr != nil:
			d.log.Warn("state: unreadable bucket width; rebuilding the store's TTL index", "store", store, "err", derr)
			w = exactWidth
		case !rebuilding:
			d.widths[store] = w
			return w, nil
		}
		// Not reachable for a store already seen by this DB (Open
		// finished or redid every rebuild it found).
		if err := d.rebuildIndex(store, w); err != nil {
			return 0, err
		}
		return w, nil
	}
	if err := d.db.Set(bucketMetaKey(store), encodeBucketMeta(exactWidth, false), pebble.NoSync); err != nil {
		return 0, fmt.Errorf("state %s: bucket width of %s: %w", d.dir, store, err)
	}
	d.widths[store] = exactWidth
	return exactWidth, nil
}

// ensureWidths gives every declared store its width: kept if persisted, set
// if the store has no index yet, otherwise (another width, an interrupted
// rebuild, an unreadable record) the store's index is rebuilt. Stores found
// mid-rebuild that were not declared are finished too.
func (d *DB) ensureWidths() error {
	clear(d.widths)
	lo := metaKey(metaBucketPrefix)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	type found struct {
		width      int64
		rebuilding bool
		bad        bool
	}
	persisted := map[string]found{}
	for ok := it.First(); ok; ok = it.Next() {
		store := string(it.Key()[len(lo):])
		w, rebuilding, derr := decodeBucketMeta(it.Value())
		persisted[store] = found{w, rebuilding, derr != nil}
	}
	if err := it.Close(); err != nil {
		return err
	}
	for store, f := range persisted {
		if _, declared := d.declared[store]; declared || !(f.rebuilding || f.bad) {
			continue
		}
		w := f.width
		if f.bad {
			w = exactWidth
		}
		if err := d.rebuildIndex(store, w); err != nil {
			return err
		}
	}
	for store, w := range d.declared {
		f, ok := persisted[store]
		switch {
		case ok && !f.bad && !f.rebuilding && f.width == w:
			d.widths[store] = w
			continue
		case !ok:
			empty, err := d.storeEmpty(store)
			if err != nil {
				return err
			}
			if empty {
				if err := d.db.Set(bucketMetaKey(store), encodeBucketMeta(w, false), pebble.NoSync); err != nil {
					return err
				}
				d.widths[store] = w
				continue
			}
		}
		d.log.Info("state: TTL index bucket width changed; rebuilding the store's index",
			"store", store, "width_ms", w, "was_ms", f.width)
		if err := d.rebuildIndex(store, w); err != nil {
			return err
		}
	}
	return nil
}

// storeEmpty reports whether store has neither data nor index keys.
func (d *DB) storeEmpty(store string) (bool, error) {
	for _, kind := range []byte{prefixData, prefixIndex} {
		lo := storePrefix(kind, store)
		it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return false, err
		}
		any := it.First()
		if err := it.Close(); err != nil {
			return false, err
		}
		if any {
			return false, nil
		}
	}
	return true, nil
}

// rebuildChunk is the number of index entries a rebuild writes per batch.
const rebuildChunk = 4096

// rebuildIndex replaces store's TTL index by one of width w built from its
// data keys: one batch deletes the old index and marks the width
// "rebuilding", batches of rebuildChunk entries follow, a last batch marks it
// complete. The batches are unsynced: Pebble's WAL keeps their order, so a
// crash leaves "rebuilding" in place until the final batch survived, and
// the next Open rebuilds again.
func (d *DB) rebuildIndex(store string, w int64) error {
	fail := func(err error) error { return fmt.Errorf("state %s: rebuild TTL index of %s: %w", d.dir, store, err) }
	ilo := storePrefix(prefixIndex, store)
	b := d.db.NewBatch()
	if err := b.DeleteRange(ilo, prefixEnd(ilo), nil); err != nil {
		b.Close()
		return fail(err)
	}
	if err := b.Set(bucketMetaKey(store), encodeBucketMeta(w, true), nil); err != nil {
		b.Close()
		return fail(err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		b.Close()
		return fail(err)
	}
	b.Close()

	dlo := storePrefix(prefixData, store)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: dlo, UpperBound: prefixEnd(dlo)})
	if err != nil {
		return fail(err)
	}
	b = d.db.NewBatch()
	n, total := 0, 0
	var ik []byte
	for ok := it.First(); ok && w != noIndexWidth; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if len(v) < 8 {
			// Left out of the index; reading the key reports it.
			d.log.Warn("state: value shorter than its timestamp; not indexed", "store", store, "key", k[len(dlo):])
			continue
		}
		ik = appendIndexKey(ik[:0], store, bucketEnd(decodeTS(v), w), k[len(dlo):])
		if err = b.Set(ik, nil, nil); err != nil {
			break
		}
		n++
		total++
		if n == rebuildChunk {
			if err = b.Commit(pebble.NoSync); err != nil {
				break
			}
			b.Close()
			b, n = d.db.NewBatch(), 0
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = b.Set(bucketMetaKey(store), encodeBucketMeta(w, false), nil)
	}
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	b.Close()
	if err != nil {
		return fail(err)
	}
	d.widths[store] = w
	d.rebuilds++
	d.log.Info("state: TTL index rebuilt", "store", store, "width_ms", w, "keys", total)
	return nil
}

// appendIndexKey appends the index key of key in store at bucket end e.
func appendIndexKey(dst []byte, store string, e int64, key []byte) []byte {
	dst = append(dst, prefixIndex, byte(len(store)))
	dst = append(dst, store...)
	dst = binary.BigEndian.AppendUint64(dst, encodeTS(e))
	return append(dst, key...)
}
