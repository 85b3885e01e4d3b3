package state

import (
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// stateCache is a write-back cache of a DB's data keys: the value and update
// time of a key, or the fact that the key is absent.
//
// Reads: a key seen before is answered from the map, sparing the Pebble
// lookup (a memtable skiplist seek, then bloom-filtered sstable probes) on the
// read-modify-write of every aggregate.
//
// The map is also the Txn's: a key a round touches has an entry here (read
// from Pebble if needed) linked to the round's state of the key (txn.go).
//
// Writes: Txn.Commit (once per processing round) only marks the round's
// writes dirty here; DB.flushDirty writes the dirty entries to Pebble in one
// key-ordered batch, when the cache is over its budget and before anything
// that reads Pebble directly (a checkpoint, Scan, MaxTS, an Expired scan that
// could see a dirty key). A key updated in many rounds between two
// checkpoints costs one Pebble write (its data key, and its TTL index entry
// if the update moved it to another bucket), not one per round. The
// changelog is unaffected: it gets every update as before.
//
// Invariants:
//   - an entry holds the key's latest committed state; a clean entry equals
//     the key's state in Pebble, a dirty one records Pebble's state in
//     dbTS/dbFound (the TTL index entry the flush must replace);
//   - a key without an entry has no dirty state: Pebble holds its latest
//     state. Dirty entries are never evicted (a flush comes first), and a
//     dirty deletion stays as a negative entry until flushed;
//   - an entry linked to the open round (txn != nil) is never removed, and
//     its fields are the committed state, not the round's;
//   - complete means every key with state has an entry, so a key without one
//     is absent. It is true for an empty database (new or wiped) and after a
//     warm-up that loaded every data key; the first eviction clears it for
//     good (until the next Wipe);
//   - bytes, the estimated memory of the entries, is <= limit after every
//     Txn.Commit: past the limit the dirty entries are flushed and a random
//     tenth of the entries evicted (Go's randomised map iteration; no LRU
//     bookkeeping on the hot path).
//
// A limit of 0 disables the cache: every Commit writes through to Pebble,
// and the map holds only the keys of the open round.
// Not safe for concurrent use (a DB is used by one goroutine at a time).
type stateCache struct {
	entries  map[string]*cacheEntry // by encoded data key
	bytes    int64
	limit    int64
	complete bool
	// dirty lists the dirty entries (each once).
	dirty []*cacheEntry
	// free holds entries for reuse (evicted or deleted); slab the unused
	// rest of the last chunk allocated. Entries are allocated in chunks:
	// one allocation per cacheChunk keys, not one per key.
	free []*cacheEntry
	slab []cacheEntry
	// cold lists entries committed cold (see cacheEntry.cold), possibly
	// stale (removed, reused or warmed since): evict checks each.
	cold []*cacheEntry
	// minDirtyTS is a lower bound of the update time of every dirty entry
	// holding a value (math.MaxInt64 when there is none).
	minDirtyTS int64

	evicted uint64 // entries evicted since open (for tests)
	flushes uint64 // flushes of dirty entries since open (for tests)
	misses  uint64 // reads the cache could not answer (Pebble lookups; for tests)
}

type cacheEntry struct {
	dk    string // the map key, so a Txn can share it instead of allocating its own
	value []byte // retained from Txn.Put or a read, never modified; nil with found == false
	ts    int64
	found bool

	dirty   bool
	dbTS    int64 // Pebble's state of the key, when dirty
	dbFound bool
	listed  bool // in stateCache.dirty (until the next flush); never removed while listed
	// cold: the last round that touched the key said it will not be read
	// again soon (a windowed store's index entry, a closed window's
	// tombstone). Only a hint of which entries evict drops first: the
	// entry's state and every answer of the cache are the same either way.
	cold       bool
	coldListed bool // in stateCache.cold (once, however often it is there)
	// note is the caller's (Txn.Note): zero when the entry is created.
	note uint32
	txn  *txnEntry // the open round's state of the key, if the round touched it
}

// cacheEntryOverhead estimates the memory of one entry beyond its key and
// value bytes: the map slot (string header and pointer), the cacheEntry, and
// the allocation headers of the key and value.
const cacheEntryOverhead = 136

// DefaultCacheBytes is the default memory budget of a DB's cache, per task
// (Kafka Streams' cache.max.bytes.buffering default is the same 10 MiB, for
// all the threads of an instance).
const DefaultCacheBytes = 10 << 20

const cacheChunk = 256

func newStateCache(limit int64) stateCache {
	return stateCache{entries: map[string]*cacheEntry{}, limit: max(limit, 0), minDirtyTS: math.MaxInt64}
}

func (c *stateCache) newEntry() *cacheEntry {
	if n := len(c.free); n > 0 {
		e := c.free[n-1]
		c.free = c.free[:n-1]
		return e
	}
	if len(c.slab) == 0 {
		c.slab = make([]cacheEntry, cacheChunk)
	}
	e := &c.slab[0]
	c.slab = c.slab[1:]
	return e
}

// remove deletes e's key and keeps e for reuse.
func (c *stateCache) remove(e *cacheEntry) {
	c.bytes -= entrySize(e.dk, e.value)
	delete(c.entries, e.dk)
	*e = cacheEntry{}
	c.free = append(c.free, e)
}

func (c *stateCache) enabled() bool { return c.limit > 0 }

// insertClean adds an entry for dk, which has none, holding its state in
// Pebble (found false: absent), and returns it. value is retained.
func (c *stateCache) insertClean(dk string, value []byte, ts int64, found bool) *cacheEntry {
	e := c.newEntry()
	*e = cacheEntry{dk: dk, ts: ts, found: found}
	if found {
		e.value = value
		if e.value == nil {
			e.value = []byte{}
		}
	}
	c.entries[dk] = e
	c.bytes += entrySize(dk, e.value)
	return e
}

// dropAbsent removes e if it only says its key is absent, which a complete
// cache knows without an entry. e must not be linked to the open round.
func (c *stateCache) dropAbsent(e *cacheEntry) {
	if c.complete && !e.found && !e.dirty && !e.listed {
		c.remove(e)
	}
}

// commitClean records in e the state just written to Pebble for its key. e
// must be clean and not linked to the open round. value is retained.
func (c *stateCache) commitClean(e *cacheEntry, value []byte, ts int64, found bool) {
	c.bytes -= entrySize(e.dk, e.value)
	e.ts, e.found, e.value = ts, found, nil
	if found {
		e.value = value
		if e.value == nil {
			e.value = []byte{}
		}
	}
	c.bytes += entrySize(e.dk, e.value)
	c.dropAbsent(e)
}

// commitDirty records in e a committed write of its key (found false: a
// deletion) not yet in Pebble. e must not be linked to the open round. value
// is retained.
func (c *stateCache) commitDirty(e *cacheEntry, value []byte, ts int64, found bool) {
	c.bytes -= entrySize(e.dk, e.value)
	if !e.dirty {
		// A clean entry holds Pebble's state: the index entry the
		// flush replaces.
		e.dbTS, e.dbFound = e.ts, e.found
	}
	e.ts, e.found, e.value = ts, found, nil
	if found {
		// Retained, not copied: Txn.Put's caller hands value over.
		e.value = value
		if e.value == nil {
			e.value = []byte{}
		}
		c.minDirtyTS = min(c.minDirtyTS, ts)
	}
	// Absent in Pebble and now: nothing to flush.
	e.dirty = found || e.dbFound
	c.bytes += entrySize(e.dk, e.value)
	if e.dirty && !e.listed {
		c.dirty = append(c.dirty, e)
		e.listed = true
	}
	c.dropAbsent(e)
}

func entrySize(dk string, v []byte) int64 { return int64(len(dk)+cap(v)) + cacheEntryOverhead }

// isDirty reports whether dk has state not yet written to Pebble.
func (c *stateCache) isDirty(dk []byte) bool {
	e, ok := c.entries[string(dk)]
	return ok && e.dirty
}

// markClean records that every dirty entry was written to Pebble.
func (c *stateCache) markClean() {
	for _, e := range c.dirty {
		e.listed, e.dirty = false, false
		e.dbTS, e.dbFound = 0, false
		if e.txn == nil {
			c.dropAbsent(e)
		}
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	c.minDirtyTS = math.MaxInt64
	c.flushes++
}

// setCold records, at a commit, whether entry ce (of data key dk; it may
// have been removed by the commit) was last written cold.
func (c *stateCache) setCold(ce *cacheEntry, dk string, cold bool) {
	if ce.dk != dk {
		return // removed (dropAbsent)
	}
	ce.cold = cold
	if !cold || ce.coldListed {
		return
	}
	c.cold = append(c.cold, ce)
	ce.coldListed = true
	if len(c.cold) > 2*len(c.entries)+cacheChunk {
		// Removed entries (a complete cache drops deleted keys) leave
		// elements behind: keep the list within the map's size.
		live := c.cold[:0]
		for _, e := range c.cold {
			if e.coldListed {
				e.coldListed = false
				if e.dk != "" && e.cold {
					live = append(live, e)
				}
			}
		}
		for _, e := range live {
			e.coldListed = true
		}
		clear(c.cold[len(live):])
		c.cold = live
	}
}

// evict drops entries until the cache is at most nine tenths full: first
// every cold entry, then random ones. Call only with no dirty entry.
func (c *stateCache) evict() {
	c.complete = false
	target := c.limit - c.limit/10
	for _, e := range c.cold {
		if !e.coldListed {
			continue // listed twice (removed and reused)
		}
		e.coldListed = false
		if e.dk != "" && e.cold && e.txn == nil && !e.dirty && !e.listed {
			c.remove(e)
			c.evicted++
		}
	}
	clear(c.cold)
	c.cold = c.cold[:0]
	for _, e := range c.entries {
		if c.bytes <= target {
			break
		}
		if e.txn != nil {
			continue // not reached: eviction runs with no round open
		}
		c.remove(e)
		c.evicted++
	}
}

// resetCache empties the cache, dropping dirty entries and the open round's
// state (see stateCache.reset).
func (d *DB) resetCache(complete bool) {
	if d.active != nil {
		d.active.forget()
	}
	d.cache.reset(complete)
}

// reset empties the cache, dropping dirty entries; complete says whether
// the database is empty of data keys.
func (c *stateCache) reset(complete bool) {
	clear(c.entries)
	c.bytes = 0
	c.free, c.slab = nil, nil
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	clear(c.cold)
	c.cold = c.cold[:0]
	c.minDirtyTS = math.MaxInt64
	c.complete = complete && c.enabled()
}

// flushDirty writes the cache's dirty entries to Pebble in one unsynced
// batch. On error the entries stay dirty.
func (d *DB) flushDirty() error {
	c := &d.cache
	if len(c.dirty) == 0 {
		return nil
	}
	ws := d.writes[:0]
	if len(d.derived) > 0 {
		// Room for the derived entries' writes too (writeBatch appends
		// them): the array is kept for the next flush.
		ws = slices.Grow(ws, 2*len(c.dirty))
	} else {
		ws = slices.Grow(ws, len(c.dirty))
	}
	for _, e := range c.dirty {
		if e.dirty {
			ws = append(ws, write{dk: e.dk, value: e.value, ts: e.ts, found: e.found, dbTS: e.dbTS, dbFound: e.dbFound})
		}
	}
	err := d.writeBatch(ws)
	clear(ws)
	d.writes = ws[:0]
	if err != nil {
		return err
	}
	c.markClean()
	return nil
}

// fitCache brings the cache back within its budget: dirty entries are
// flushed, then entries evicted.
func (d *DB) fitCache() error {
	if d.cache.bytes <= d.cache.limit {
		return nil
	}
	if err := d.flushDirty(); err != nil {
		return err
	}
	d.cache.evict()
	return nil
}

// warm loads data keys into the cache in key order up to nine tenths of the
// budget (the eviction target: room is left for the keys processing reads
// next); if every data key fits, the cache becomes complete. A value that
// does not follow the format is left out (and the cache stays incomplete),
// so reading it reports the corruption.
func (d *DB) warm() error {
	d.resetCache(false)
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
		if d.isDerived(k) {
			continue // never cached (DerivedIndex)
		}
		if len(v) < 8 {
			complete = false
			continue
		}
		if d.cache.bytes+int64(len(k)+len(v)-8)+cacheEntryOverhead > d.cache.limit-d.cache.limit/10 {
			complete = false
			break
		}
		d.cache.insertClean(string(k), append([]byte{}, v[8:]...), decodeTS(v), true)
	}
	if err := it.Close(); err != nil {
		d.resetCache(false)
		return err
	}
	d.cache.complete = complete
	return nil
}

// CachedKeys is how many keys the cache holds an entry for (tests).
func (d *DB) CachedKeys() int { return len(d.cache.entries) }

// Caching reports whether the DB's cache is enabled: its entries, and the
// notes kept on them (Txn.Note), outlive a round.
func (d *DB) Caching() bool { return d.cache.enabled() }
