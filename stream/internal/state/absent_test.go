package state

import (
	"fmt"
	"testing"
)

// PutAbsent writes a new key without a Pebble lookup when the cache is not
// complete (Put would look it up), and the write reads back.
func TestPutAbsentSkipsTheRead(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir, nil, CacheBytes(int64(10*(cacheEntryOverhead+20))))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	txn := d.Begin()
	for i := range 100 { // more than the cache holds: it is no longer complete
		if _, err := txn.Put("s", fmt.Appendf(nil, "k%03d", i), []byte("v"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	if d.cache.complete {
		t.Fatal("cache still complete: the test needs one that is not")
	}
	txn = d.Begin()
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
