package state

import "github.com/cockroachdb/pebble/v2"

// readCache holds, in memory, the committed state of data keys of a DB: the
// value and update time of a key, or the fact that the key is absent. It
// spares the Pebble lookup (a memtable skiplist seek, then bloom-filtered
// sstable probes) on the read-modify-write of every aggregate: a key seen in
// an earlier round is answered from the map.
//
// Invariants:
//   - an entry equals the key's state in the database: entries change only
//     after the write that changes the database succeeded (Txn.Commit),
//     and a Wipe empties the cache;
//   - complete means the cache holds every data key of the database, so a
//     key it does not hold is absent. It is true for an empty database
//     (new or wiped) and after a warm-up that loaded every data key; the
//     first eviction clears it for good (until the next Wipe);
//   - bytes, the estimated memory of the entries, stays <= limit after each
//     insert: inserting past the limit evicts entries (a random tenth, by
//     Go's randomised map iteration; no LRU bookkeeping on the hot path).
//
// A limit of 0 disables the cache. Not safe for concurrent use (a DB is used
// by one goroutine at a time).
type readCache struct {
	entries  map[string]cacheEntry // by encoded data key
	bytes    int64
	limit    int64
	complete bool
	evicted  uint64 // entries evicted since open (for tests and metrics)
}

type cacheEntry struct {
	dk    string // the map key, so a Txn can share it instead of allocating its own
	value []byte // owned by the cache; nil with found == false
	ts    int64
	found bool
}

// cacheEntryOverhead estimates the memory of one entry beyond its key and
// value bytes: the map slot (string header and cacheEntry) plus the
// allocation headers of the key and value.
const cacheEntryOverhead = 112

// DefaultCacheBytes is the default memory budget of a DB's read cache, per
// task (Kafka Streams' cache.max.bytes.buffering default is the same 10 MiB,
// for all the threads of an instance).
const DefaultCacheBytes = 10 << 20

func newReadCache(limit int64) readCache {
	return readCache{entries: map[string]cacheEntry{}, limit: max(limit, 0)}
}

func (c *readCache) enabled() bool { return c.limit > 0 }

// get returns the cached state of dk; ok is false when the cache cannot
// answer (the key is not cached and the cache is not complete).
func (c *readCache) get(dk []byte) (e cacheEntry, ok bool) {
	if !c.enabled() {
		return cacheEntry{}, false
	}
	if e, ok := c.entries[string(dk)]; ok {
		return e, true
	}
	return cacheEntry{}, c.complete
}

// set records the committed state of dk. value is copied. A key string the
// caller already holds (the Txn's) is reused as the map key.
func (c *readCache) set(dk string, value []byte, ts int64, found bool) {
	if !c.enabled() {
		return
	}
	if old, ok := c.entries[dk]; ok {
		c.bytes -= entrySize(dk, old.value)
	}
	if !found && c.complete {
		// In a complete cache absence needs no entry.
		delete(c.entries, dk)
		c.evictOver()
		return
	}
	var v []byte
	if found {
		v = make([]byte, len(value))
		copy(v, value)
		if v == nil {
			v = []byte{}
		}
	}
	c.entries[dk] = cacheEntry{dk: dk, value: v, ts: ts, found: found}
	c.bytes += entrySize(dk, v)
	c.evictOver()
}

func entrySize(dk string, v []byte) int64 { return int64(len(dk)+len(v)) + cacheEntryOverhead }

// evictOver drops entries until the cache is at most nine tenths full, when
// it is over its limit.
func (c *readCache) evictOver() {
	if c.bytes <= c.limit {
		return
	}
	c.complete = false
	target := c.limit - c.limit/10
	for k, e := range c.entries {
		if c.bytes <= target {
			break
		}
		c.bytes -= entrySize(k, e.value)
		delete(c.entries, k)
		c.evicted++
	}
}

// reset empties the cache; complete says whether the database is empty of
// data keys.
func (c *readCache) reset(complete bool) {
	clear(c.entries)
	c.bytes = 0
	c.complete = complete && c.enabled()
}

// warm loads data keys into the cache in key order until the budget is
// reached; if every data key fits, the cache becomes complete. A value that
// does not follow the format is left out (and the cache stays incomplete),
// so reading it reports the corruption.
func (d *DB) warm() error {
	d.cache.reset(false)
	if !d.cache.enabled() {
		return nil
	}
	lo := []byte{prefixData}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	complete := true
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if len(v) < 8 {
			complete = false
			continue
		}
		if d.cache.bytes+entrySize(string(k), v[8:]) > d.cache.limit {
			complete = false
			break
		}
		d.cache.set(string(k), v[8:], decodeTS(v), true)
	}
	if err := it.Close(); err != nil {
		d.cache.reset(false)
		return err
	}
	d.cache.complete = complete
	return nil
}
