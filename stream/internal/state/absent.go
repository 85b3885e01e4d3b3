package state

import "github.com/cockroachdb/pebble/v2"

// PutAbsent is Put for a key the caller knows has no committed value in
// store (a windowed store's index entry, created with its window: the
// window was absent, so the entry is too). It skips the database read Put
// makes for a key the cache cannot answer; otherwise it is Put. If the key
// does have a committed value after all, the write still replaces it; only
// the store's TTL index may keep a stale entry for it, so use it only in
// stores without a TTL. The key is written cold (see DeleteCold): the
// caller does not read it back soon.
func (t *Txn) PutAbsent(store string, key, value []byte, ts int64) (int64, error) {
	t.KnowAbsent(store, key)
	ts, err := t.Put(store, key, value, ts)
	if err == nil {
		t.last.cold = true
	}
	return ts, err
}

// KnowAbsent records that key has no committed value in store (the caller
// knows it: a window it knows is new), so the next Get or Put of it needs
// no database read — nor a lookup of the cache: the entry it adds is linked
// to the round as the latest lookup's (a Discard removes it again). The
// same caveats as PutAbsent's hold; a key the cache already knows is left
// as it is.
func (t *Txn) KnowAbsent(store string, key []byte) {
	c := &t.d.cache
	if c.complete || !c.enabled() {
		return // a key without an entry is absent, or the cache is off
	}
	t.kbuf = dataKey(t.kbuf[:0], store, key)
	if _, ok := c.entries[string(t.kbuf)]; !ok {
		t.link(store, c.insertClean(string(t.kbuf), nil, 0, false), true)
	}
}

// Last returns the greatest key of store in [from, to) (to nil: no upper
// bound), or ok false if there is none. It flushes the cache's dirty
// entries first (as Scan), so it sees every committed write.
func (d *DB) Last(store string, from, to []byte) (key []byte, ok bool, err error) {
	if err := d.flushDirty(); err != nil {
		return nil, false, err
	}
	lo := dataKey(nil, store, from)
	hi := prefixEnd(storePrefix(prefixData, store))
	if to != nil {
		hi = dataKey(nil, store, to)
	}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, false, err
	}
	if it.Last() {
		key = append([]byte(nil), it.Key()[len(storePrefix(prefixData, store)):]...)
		ok = true
	}
	return key, ok, it.Close()
}

// DeleteCold is Delete for a key the caller will not read again soon (a
// closed window): once committed, the cache drops its entry before any
// other when it must evict. It changes no answer of the cache or the
// database, only which keys stay cached.
func (t *Txn) DeleteCold(store string, key []byte) error {
	if err := t.Delete(store, key); err != nil {
		return err
	}
	t.last.cold = true
	return nil
}

// Known returns key's state in store as the open round or the cache knows
// it, without reading the database: known is false if neither does (the
// database's state stands).
func (t *Txn) Known(store string, key []byte) (found, known bool) {
	c := &t.d.cache
	t.kbuf = dataKey(t.kbuf[:0], store, key)
	ce, ok := c.entries[string(t.kbuf)]
	switch {
	case !ok:
		return false, c.complete
	case ce.txn != nil && ce.txn.owner == t:
		return !ce.txn.deleted, true
	case ce.txn != nil:
		return false, false // another round's: Delete reports it
	}
	return ce.found, true
}

// DeleteKnown is Delete for a key the caller knows the database holds, last
// updated at ts (a scan just returned it, and the caller writes it with a
// fixed time): it skips the database read Delete makes for a key the cache
// cannot answer. The key's committed value is not read: until the round
// ends, a Rollback of the record that deleted it makes Get return an empty
// value for it. The deletion is cold (see DeleteCold).
func (t *Txn) DeleteKnown(store string, key []byte, ts int64) error {
	c := &t.d.cache
	pre := false
	if c.enabled() && !c.complete {
		t.kbuf = dataKey(t.kbuf[:0], store, key)
		if _, ok := c.entries[string(t.kbuf)]; !ok {
			c.insertClean(string(t.kbuf), []byte{}, ts, true)
			pre = true
		}
	}
	if err := t.DeleteCold(store, key); err != nil {
		return err
	}
	if pre {
		t.last.inserted = true // a Discard forgets the entry again
	}
	return nil
}

// Evictions counts the cache entries evicted since the DB was opened.
func (d *DB) Evictions() uint64 { return d.cache.evicted }
