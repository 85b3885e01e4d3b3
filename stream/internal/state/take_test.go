package state

import (
	"fmt"
	"testing"
)

// TakeKnown answers and acts as Known followed by DeleteKnown, in every
// state of a key: cached or not (an incomplete cache), deleted by the round,
// deleted by a committed round the database has not seen, absent from a
// complete cache, with the cache disabled; it never reads the database
// (but with the cache disabled); its deletions commit, and a rollback
// undoes them as DeleteKnown's.
func TestTakeKnownIsKnownThenDeleteKnown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int64
	}{
		{"incomplete", int64(10 * (cacheEntryOverhead + 20))},
		{"complete", DefaultCacheBytes},
		{"disabled", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Open(t.TempDir(), nil, CacheBytes(tc.cache))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
			const n = 100
			txn := d.Begin()
			for i := range n {
				if _, err := txn.Put("s", key(i), []byte("v"), 7); err != nil {
					t.Fatal(err)
				}
			}
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			// Keys 0-9: deleted by a committed round (not flushed).
			for i := range 10 {
				if err := txn.Delete("s", key(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			txn.Discard()
			if tc.name == "incomplete" && d.cache.complete {
				t.Fatal("cache complete: the case needs one that is not")
			}
			if tc.name == "complete" && !d.cache.complete {
				t.Fatal("cache not complete")
			}
			txn = d.Begin()
			// Keys 10-19: deleted by the round; 20-29 read by it; n..n+9
			// never written.
			for i := 10; i < 20; i++ {
				if err := txn.Delete("s", key(i)); err != nil {
					t.Fatal(err)
				}
			}
			for i := 20; i < 30; i++ {
				if _, _, _, err := txn.Get("s", key(i)); err != nil {
					t.Fatal(err)
				}
			}
			misses := d.cache.misses
			deleted := map[int]bool{}
			for i := range n + 10 {
				found, known := txn.Known("s", key(i))
				want := !known || found
				took, err := txn.TakeKnown("s", key(i), 7)
				if err != nil {
					t.Fatal(err)
				}
				if took != want {
					t.Fatalf("key %d: TakeKnown %v, Known said found %v known %v", i, took, found, known)
				}
				if found, known := txn.Known("s", key(i)); !known || found {
					t.Fatalf("key %d after TakeKnown: found %v known %v, want deleted", i, found, known)
				}
				deleted[i] = took
			}
			if tc.name != "disabled" && d.cache.misses != misses {
				t.Fatalf("TakeKnown read the database %d times", d.cache.misses-misses)
			}
			if d.cache.enabled() {
				for i := range n + 10 {
					// Its deletions are cold, as DeleteKnown's.
					if e := d.cache.entries[string(dataKey(nil, "s", key(i)))]; e != nil && e.txn != nil &&
						deleted[i] && !e.txn.cold {
						t.Fatalf("key %d: deletion not cold", i)
					}
				}
			}
			// A record's TakeKnown of a key it read first is rolled back.
			if err := txn.Apply(); err != nil {
				t.Fatal(err)
			}
			if _, err := txn.Put("s", key(5), []byte("w"), 8); err != nil {
				t.Fatal(err)
			}
			if err := txn.Apply(); err != nil {
				t.Fatal(err)
			}
			if took, err := txn.TakeKnown("s", key(5), 8); err != nil || !took {
				t.Fatalf("TakeKnown of a key the round wrote: %v %v", took, err)
			}
			txn.Rollback()
			if v, _, ok, err := txn.Get("s", key(5)); err != nil || !ok || string(v) != "w" {
				t.Fatalf("after the rollback: %q %v %v, want the round's write", v, ok, err)
			}
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			txn.Discard()
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			for i := range n + 10 {
				_, _, ok, err := d.Get("s", key(i))
				if err != nil {
					t.Fatal(err)
				}
				if want := i == 5; ok != want {
					t.Fatalf("key %d committed: found %v, want %v", i, ok, want)
				}
			}
		})
	}
}
