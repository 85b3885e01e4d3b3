package state

// TakeKnown deletes key from store, which a database scan just returned
// (written at ts), unless the open round or the cache knows it is absent
// (the round deleted it since, or a commit the scan did not see yet): it
// reports whether it deleted it. It is Known followed, if the key is not
// known absent, by DeleteKnown — a windowed store's close taking an index
// entry — in one lookup of the cache instead of three.
//
// As with DeleteKnown, the database is not read: a key the cache cannot
// answer is taken as present with an empty value, which a Rollback of the
// record that deleted it (or a Get after one) shows until the round ends;
// with the cache disabled it is Delete (which reads the database). The
// deletion is cold (see DeleteCold).
func (t *Txn) TakeKnown(store string, key []byte, ts int64) (bool, error) {
	c := &t.d.cache
	t.kbuf = dataKey(t.kbuf[:0], store, key)
	ce, ok := c.entries[string(t.kbuf)]
	var e *txnEntry
	switch {
	case ok && ce.txn != nil:
		if ce.txn.owner != t {
			return false, ErrConcurrentTxn
		}
		e = ce.txn
		t.last = e
	case ok:
		if !ce.found {
			return false, nil // as Known: the entry is left as it is
		}
		e = t.link(store, ce, false)
	case c.complete:
		return false, nil // a key without an entry is absent
	case !c.enabled():
		return true, t.DeleteCold(store, key)
	default:
		e = t.link(store, c.insertClean(string(t.kbuf), []byte{}, ts, true), true)
	}
	if e.deleted {
		return false, nil
	}
	t.save(e)
	e.value, e.ts, e.deleted, e.written, e.cold = nil, 0, true, true, true
	return true, nil
}
