package state

import (
	"fmt"
	"testing"
)

// PutAbsent writes a new key without a Pebble lookup when the cache is not
// complete (Put would look it up), and the write reads back.
func TestPutAbsentSkipsTheRead(t *testing.T) {
	d := openIncomplete(t)
	txn := d.Begin()
	defer txn.Discard()
	before := d.cache.misses
	if _, err := txn.PutAbsent("s", []byte("new"), []byte("n"), 5); err != nil {
		t.Fatal(err)
	}
	if d.cache.misses != before {
		t.Fatalf("PutAbsent looked the key up in Pebble (%d lookups)", d.cache.misses-before)
	}
	if _, err := txn.Put("s", []byte("new2"), []byte("n"), 5); err != nil {
		t.Fatal(err)
	}
	if d.cache.misses != before+1 {
		t.Fatalf("Put of an uncached key: %d lookups, want 1", d.cache.misses-before)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if v, ts, ok, err := d.Get("s", []byte("new")); err != nil || !ok || string(v) != "n" || ts != 5 {
		t.Fatalf("new = %q %d %v %v", v, ts, ok, err)
	}
}

// Epoch changes whenever a round ends; Discards counts the discarded ones.
func TestTxnEpochAndDiscards(t *testing.T) {
	d, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	txn := d.Begin()
	e0, x0 := txn.Epoch(), txn.Discards()
	if _, err := txn.Put("s", []byte("a"), []byte("1"), 1); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	e1 := txn.Epoch()
	if e1 == e0 || txn.Discards() != x0 {
		t.Fatalf("after Commit: epoch %d (was %d), discards %d (was %d)", e1, e0, txn.Discards(), x0)
	}
	if _, err := txn.Put("s", []byte("b"), []byte("1"), 1); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	if txn.Epoch() == e1 || txn.Discards() != x0+1 {
		t.Fatalf("after Discard: epoch %d (was %d), discards %d, want %d", txn.Epoch(), e1, txn.Discards(), x0+1)
	}
}

// Commits counts the committed rounds, empty ones and CommitThrough's
// included, and a Discard moves it not: a caller that commits and then
// discards (a task's round) tells a committed round from an aborted one.
func TestTxnCommits(t *testing.T) {
	for _, cache := range []int64{0, DefaultCacheBytes} {
		d, err := Open(t.TempDir(), nil, CacheBytes(cache))
		if err != nil {
			t.Fatal(err)
		}
		txn := d.Begin()
		c0 := txn.Commits()
		if _, err := txn.Put("s", []byte("a"), []byte("1"), 1); err != nil {
			t.Fatal(err)
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		c1 := txn.Commits()
		if c1 == c0 {
			t.Fatalf("cache %d: Commit left Commits at %d", cache, c1)
		}
		txn.Discard() // empty, after the commit
		if txn.Commits() != c1 {
			t.Fatalf("cache %d: Discard moved Commits from %d to %d", cache, c1, txn.Commits())
		}
		txn = d.Begin()
		if _, err := txn.Put("s", []byte("b"), []byte("1"), 1); err != nil {
			t.Fatal(err)
		}
		txn.Discard() // aborted
		if txn.Commits() != c1 {
			t.Fatalf("cache %d: an aborted round moved Commits from %d to %d", cache, c1, txn.Commits())
		}
		txn = d.Begin()
		if err := txn.Commit(); err != nil { // empty
			t.Fatal(err)
		}
		if txn.Commits() == c1 {
			t.Fatalf("cache %d: an empty Commit left Commits at %d", cache, c1)
		}
		c2 := txn.Commits()
		if _, err := txn.Put("s", []byte("c"), []byte("1"), 1); err != nil {
			t.Fatal(err)
		}
		if err := txn.CommitThrough(); err != nil {
			t.Fatal(err)
		}
		if txn.Commits() == c2 {
			t.Fatalf("cache %d: CommitThrough left Commits at %d", cache, c2)
		}
		txn.Discard()
		d.Close()
	}
}

// Known answers from the round and the cache only; DeleteKnown deletes a key
// the cache does not hold without a Pebble lookup, and a Discard forgets it.
func TestKnownAndDeleteKnown(t *testing.T) {
	d, err := Open(t.TempDir(), nil, CacheBytes(int64(10*(cacheEntryOverhead+20))))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	txn := d.Begin()
	for i := range 100 {
		if _, err := txn.Put("s", fmt.Appendf(nil, "k%03d", i), []byte("v"), 7); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	txn = d.Begin()
	// Find a key the cache does not hold.
	var key []byte
	for i := range 100 {
		k := fmt.Appendf(nil, "k%03d", i)
		if _, known := txn.Known("s", k); !known {
			key = k
			break
		}
	}
	if key == nil {
		t.Fatal("every key cached: the test needs one that is not")
	}
	before := d.cache.misses
	if err := txn.DeleteKnown("s", key, 7); err != nil {
		t.Fatal(err)
	}
	if d.cache.misses != before {
		t.Fatal("DeleteKnown read Pebble")
	}
	if found, known := txn.Known("s", key); !known || found {
		t.Fatalf("after DeleteKnown: found %v known %v, want deleted", found, known)
	}
	txn.Discard() // the delete is dropped: the key is unknown to the cache again, and present
	txn = d.Begin()
	if _, known := txn.Known("s", key); known {
		t.Fatal("a discarded DeleteKnown left its cache entry")
	}
	if v, _, ok, err := txn.Get("s", key); err != nil || !ok || string(v) != "v" {
		t.Fatalf("after the discard: %q %v %v", v, ok, err)
	}
	if err := txn.DeleteKnown("s", key, 7); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := d.Get("s", key); err != nil || ok {
		t.Fatalf("committed DeleteKnown: still found (%v)", err)
	}
}

// When the cache must evict, it drops cold entries (PutAbsent, DeleteCold,
// DeleteKnown) before any other: hot keys written alongside stay cached
// (read without a Pebble lookup), and every key still reads back right.
func TestColdEntriesEvictedFirst(t *testing.T) {
	const hot, rounds, perRound = 20, 40, 30
	d, err := Open(t.TempDir(), nil, CacheBytes(int64(2*hot*(cacheEntryOverhead+40))))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	hotKey := func(i int) []byte { return fmt.Appendf(nil, "hot%03d", i) }
	coldKey := func(i int) []byte { return fmt.Appendf(nil, "cold%05d", i) }
	n := 0
	for r := range rounds {
		txn := d.Begin()
		for i := range hot {
			if _, err := txn.Put("s", hotKey(i), fmt.Appendf(nil, "%d", r), int64(r)); err != nil {
				t.Fatal(err)
			}
		}
		for range perRound {
			if _, err := txn.PutAbsent("s", coldKey(n), []byte("c"), int64(r)); err != nil {
				t.Fatal(err)
			}
			if n%3 == 0 && n > 0 {
				if err := txn.DeleteCold("s", coldKey(n-1)); err != nil {
					t.Fatal(err)
				}
			}
			n++
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		txn.Discard()
	}
	if d.cache.evicted == 0 {
		t.Fatal("nothing evicted: the test needs a cache that overflows")
	}
	txn := d.Begin()
	defer txn.Discard()
	before := d.cache.misses
	for i := range hot {
		v, _, ok, err := txn.Get("s", hotKey(i))
		if err != nil || !ok || string(v) != fmt.Sprint(rounds-1) {
			t.Fatalf("hot %d = %q %v %v", i, v, ok, err)
		}
	}
	if d.cache.misses != before {
		t.Fatalf("%d of %d hot keys were evicted while cold entries were cached", d.cache.misses-before, hot)
	}
	for i := range n {
		v, _, ok, err := txn.Get("s", coldKey(i))
		deleted := i%3 == 2 && i+1 < n
		if err != nil || ok == deleted || (ok && string(v) != "c") {
			t.Fatalf("cold %d (deleted %v) = %q %v %v", i, deleted, v, ok, err)
		}
	}
	if d.cache.misses == before {
		t.Fatal("no cold key was evicted")
	}
}

// A cold entry written again normally is hot again: it stays cached when
// cold ones are evicted.
func TestColdEntryWrittenAgainIsHot(t *testing.T) {
	d, err := Open(t.TempDir(), nil, CacheBytes(int64(20*(cacheEntryOverhead+40))))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	txn := d.Begin()
	if _, err := txn.PutAbsent("s", []byte("k"), []byte("1"), 1); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Put("s", []byte("k"), []byte("2"), 2); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	for i := range 60 { // overflow with cold entries
		if _, err := txn.PutAbsent("s", fmt.Appendf(nil, "c%03d", i), []byte("c"), 3); err != nil {
			t.Fatal(err)
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if d.cache.evicted == 0 {
		t.Fatal("nothing evicted")
	}
	before := d.cache.misses
	if v, _, ok, err := txn.Get("s", []byte("k")); err != nil || !ok || string(v) != "2" {
		t.Fatalf("k = %q %v %v", v, ok, err)
	}
	if d.cache.misses != before {
		t.Fatal("the rewritten key was evicted as cold")
	}
	txn.Discard()
}

// KnowAbsent spares the read of a key the caller knows is new; Last finds
// the greatest key of a range, dirty writes included.
func TestKnowAbsentAndLast(t *testing.T) {
	d := openIncomplete(t)
	txn := d.Begin()
	before := d.cache.misses
	txn.KnowAbsent("s", []byte("new"))
	if _, _, ok, err := txn.Get("s", []byte("new")); err != nil || ok {
		t.Fatalf("new: found %v, %v", ok, err)
	}
	if _, err := txn.Put("s", []byte("new"), []byte("n"), 2); err != nil {
		t.Fatal(err)
	}
	if d.cache.misses != before {
		t.Fatalf("%d Pebble lookups of a key known absent", d.cache.misses-before)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	for _, tc := range []struct{ from, to, want string }{
		{"k", "l", "k099"}, {"k000", "k050", "k049"}, {"a", "z", "new"}, {"x", "", ""},
	} {
		var to []byte
		if tc.to != "" {
			to = []byte(tc.to)
		}
		k, ok, err := d.Last("s", []byte(tc.from), to)
		if err != nil || ok != (tc.want != "") || string(k) != tc.want {
			t.Fatalf("Last(%q, %q) = %q %v %v, want %q", tc.from, tc.to, k, ok, err, tc.want)
		}
	}
	if k, ok, err := d.Last("other", nil, nil); err != nil || ok {
		t.Fatalf("Last of an empty store = %q %v %v", k, ok, err)
	}
}

// KnowAbsent links the entry it adds to the round, as a lookup does: the
// Get that follows answers from it (absent, no database read) and a
// Discard removes it again, leaving the cache as it was.
func TestKnowAbsentLinksItsEntry(t *testing.T) {
	d := reopenDB(t, t.TempDir(), nil)
	defer d.Close()
	commitRound(t, d, func(txn *Txn) { txn.Put("s", []byte("a"), []byte("v"), 1) })
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	d.cache.complete = false // as after an eviction: absent keys need a read or a KnowAbsent
	before, misses := d.CachedKeys(), d.cache.misses
	txn := d.Begin()
	txn.KnowAbsent("s", []byte("k"))
	if txn.last == nil || txn.last.key() != "k" {
		t.Fatal("KnowAbsent did not link its entry as the latest lookup's")
	}
	if _, _, found, err := txn.Get("s", []byte("k")); err != nil || found {
		t.Fatalf("Get after KnowAbsent = %v, %v; want absent", found, err)
	}
	if d.cache.misses != misses {
		t.Fatal("Get after KnowAbsent read the database")
	}
	txn.Discard()
	if n := d.CachedKeys(); n != before {
		t.Fatalf("the cache holds %d keys after a Discard, %d before the round", n, before)
	}
}

// GetKnown answers from the open round and the cache, never from Pebble: a
// key an incomplete cache does not hold is unknown (no read, no entry), a
// key it holds (committed or written in the round) is known, and a complete
// cache knows every key.
func TestGetKnownNeverReads(t *testing.T) {
	d, err := Open(t.TempDir(), nil, CacheBytes(int64(10*(cacheEntryOverhead+20))))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	txn := d.Begin()
	if _, _, found, known, err := txn.GetKnown("s", []byte("k000")); err != nil || found || !known {
		t.Fatalf("complete cache: found %v known %v err %v, want absent and known", found, known, err)
	}
	txn.Discard()
	fillIncomplete(t, d)
	txn = d.Begin()
	defer txn.Discard()
	misses, keys := d.cache.misses, d.CachedKeys()
	unknown := 0
	for i := range 100 {
		v, ts, found, known, err := txn.GetKnown("s", fmt.Appendf(nil, "k%03d", i))
		switch {
		case err != nil:
			t.Fatal(err)
		case !known:
			unknown++
		case !found || string(v) != "v" || ts != 1:
			t.Fatalf("k%03d: %q %d found %v", i, v, ts, found)
		}
	}
	if unknown == 0 || unknown == 100 {
		t.Fatalf("%d of 100 keys unknown: want the evicted ones only", unknown)
	}
	if d.cache.misses != misses || d.CachedKeys() != keys {
		t.Fatalf("GetKnown read Pebble (%d reads) or added entries (%d keys, was %d)",
			d.cache.misses-misses, d.CachedKeys(), keys)
	}
	if _, err := txn.Put("s", []byte("new"), []byte("n"), 2); err != nil {
		t.Fatal(err)
	}
	if _, _, found, known, err := txn.GetKnown("s", []byte("k050")); err != nil || (known && !found) {
		t.Fatalf("k050 after another write: found %v known %v err %v", found, known, err)
	}
	if v, _, found, known, err := txn.GetKnown("s", []byte("new")); err != nil || !found || !known || string(v) != "n" {
		t.Fatalf("the round's own write: %q found %v known %v err %v", v, found, known, err)
	}
}

// openIncomplete opens a database whose cache holds about ten small
// entries, filled by fillIncomplete; closed at the test's end.
func openIncomplete(t *testing.T) *DB {
	t.Helper()
	d, err := Open(t.TempDir(), nil, CacheBytes(int64(10*(cacheEntryOverhead+20))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	fillIncomplete(t, d)
	return d
}

// fillIncomplete commits keys k000..k099 (value "v") to store "s" of d,
// more than its cache holds: the cache is no longer complete, so a key
// without a cache entry needs a read.
func fillIncomplete(t *testing.T, d *DB) {
	t.Helper()
	txn := d.Begin()
	defer txn.Discard()
	for i := range 100 {
		if _, err := txn.Put("s", fmt.Appendf(nil, "k%03d", i), []byte("v"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if d.cache.complete {
		t.Fatal("cache still complete: the test needs one that is not")
	}
}
