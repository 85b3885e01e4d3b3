package state

import (
	"fmt"
	"testing"
)

// Load caches what a Get of each key would read: committed values, absent
// keys, and it leaves alone keys the cache holds with newer (dirty or
// round) state; afterwards the keys are read without a Pebble lookup.
func TestLoadMatchesGets(t *testing.T) {
	d, err := Open(t.TempDir(), nil, CacheBytes(int64(10*(cacheEntryOverhead+20))))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	txn := d.Begin()
	for i := 0; i < 100; i += 2 { // even keys exist
		if _, err := txn.Put("s", key(i), fmt.Appendf(nil, "v%d", i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.CommitThrough(); err != nil {
		t.Fatal(err)
	}
	// Overflow the cache: it is no longer complete.
	for i := range 100 {
		if _, err := txn.Put("other", key(i), []byte("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if d.cache.complete {
		t.Fatal("cache still complete: the test needs one that is not")
	}
	// Newer state than Pebble's: k010 rewritten (committed, dirty), k020
	// deleted in the open round.
	if _, err := txn.Put("s", key(10), []byte("new"), 200); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := txn.Delete("s", key(20)); err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for i := 5; i < 30; i++ {
		keys = append(keys, key(i))
	}
	if err := txn.Load("s", keys); err != nil {
		t.Fatal(err)
	}
	before := d.cache.misses
	for i := 5; i < 30; i++ {
		v, ts, ok, err := txn.Get("s", key(i))
		want, wantTS, wantOK := fmt.Sprintf("v%d", i), int64(i), i%2 == 0
		switch i {
		case 10:
			want, wantTS = "new", 200
		case 20:
			wantOK = false
		}
		if err != nil || ok != wantOK || (ok && (string(v) != want || ts != wantTS)) {
			t.Fatalf("k%03d = %q %d %v %v, want %q %d %v", i, v, ts, ok, err, want, wantTS, wantOK)
		}
	}
	if d.cache.misses != before {
		t.Fatalf("%d Pebble lookups after Load", d.cache.misses-before)
	}
	txn.Discard()
}
