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
