package state

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// Load makes the cache answer keys of store: those it cannot answer yet are
// read from the database with one iterator (a seek per key; keys in
// ascending order make the seeks cheap), not one point read each — the
// windows of one key, or the windows one close scan closes. It reads what a
// Get of each key would read; a key the cache already holds (its state may
// be newer than the database's) is left as it is, and so is one whose
// stored value does not follow the format (its Get reports it). It does
// nothing with a complete or disabled cache. The entries it adds are clean
// and count against the cache's budget at the next commit.
func (t *Txn) Load(store string, keys [][]byte) error {
	c := &t.d.cache
	if c.complete || !c.enabled() || len(keys) == 0 {
		return nil
	}
	miss := t.loadMiss[:0]
	var lo, hi []byte
	for i, k := range keys {
		t.kbuf = dataKey(t.kbuf[:0], store, k)
		if _, ok := c.entries[string(t.kbuf)]; ok {
			continue
		}
		miss = append(miss, i)
		if lo == nil || bytes.Compare(t.kbuf, lo) < 0 {
			lo = append(lo[:0], t.kbuf...)
		}
		if hi == nil || bytes.Compare(t.kbuf, hi) > 0 {
			hi = append(hi[:0], t.kbuf...)
		}
	}
	t.loadMiss = miss[:0]
	if len(miss) < 2 {
		return nil // a point read is as cheap
	}
	it, err := t.d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: append(hi, 0)})
	if err != nil {
		return err
	}
	for _, i := range miss {
		dk := dataKey(nil, store, keys[i])
		if _, ok := c.entries[string(dk)]; ok {
			continue // listed twice
		}
		if !it.SeekGE(dk) || !bytes.Equal(it.Key(), dk) {
			c.insertClean(string(dk), nil, 0, false)
			continue
		}
		v := it.Value()
		if len(v) < 8 {
			continue
		}
		c.insertClean(string(dk), append([]byte(nil), v[8:]...), decodeTS(v), true)
	}
	return it.Close()
}
