package state

// PutAbsent is Put for a key the caller knows has no committed value in
// store (a windowed store's index entry, created with its window: the
// window was absent, so the entry is too). It skips the database read Put
// makes for a key the cache cannot answer; otherwise it is Put. If the key
// does have a committed value after all, the write still replaces it; only
// the store's TTL index may keep a stale entry for it, so use it only in
// stores without a TTL.
func (t *Txn) PutAbsent(store string, key, value []byte, ts int64) (int64, error) {
	c := &t.d.cache
	if c.complete || !c.enabled() {
		return t.Put(store, key, value, ts)
	}
	t.kbuf = dataKey(t.kbuf[:0], store, key)
	if _, ok := c.entries[string(t.kbuf)]; !ok {
		c.insertClean(string(t.kbuf), nil, 0, false)
	}
	return t.Put(store, key, value, ts)
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
// value for it.
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
	if err := t.Delete(store, key); err != nil {
		return err
	}
	if pre {
		t.last.inserted = true // a Discard forgets the entry again
	}
	return nil
}
