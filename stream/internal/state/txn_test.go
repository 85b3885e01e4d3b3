package state

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTxnRecordLevelModel drives random records (reads, puts, deletes,
// each applied or rolled back) in random rounds (committed or discarded)
// and compares every read, the committed data and the TTL index with a
// map model.
func TestTxnRecordLevelModel(t *testing.T) {
	for _, budget := range []int64{DefaultCacheBytes, 0, 500} {
		t.Run(fmt.Sprintf("cache=%d", budget), func(t *testing.T) { txnRecordLevelModel(t, budget, 10, 30) })
	}
	// Rounds of hundreds of keys: a record's own entries (Rollback resets
	// them without an undo log) cross the Txn's slab boundaries.
	t.Run("keys=700", func(t *testing.T) { txnRecordLevelModel(t, DefaultCacheBytes, 700, 400) })
}

func txnRecordLevelModel(t *testing.T, cache int64, nkeys, maxRecords int) {
	d, err := Open(t.TempDir(), nil, CacheBytes(cache))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	type entry struct {
		v  string
		ts int64
	}
	rng := rand.New(rand.NewPCG(7, 11))
	db := map[string]entry{} // committed
	for round := range 60 {
		txn := d.Begin()
		roundModel := maps.Clone(db)
		for range 1 + rng.IntN(maxRecords) {
			rec := maps.Clone(roundModel)
			for range 1 + rng.IntN(4) {
				k := fmt.Sprint(rng.IntN(nkeys))
				switch rng.IntN(3) {
				case 0:
					v, ts, found, err := txn.Get("s", []byte(k))
					if err != nil {
						t.Fatal(err)
					}
					e, ok := rec[k]
					if found != ok || (ok && (string(v) != e.v || ts != e.ts)) {
						t.Fatalf("round %d: get %s = %q,%d,%v; want %+v,%v", round, k, v, ts, found, e, ok)
					}
				case 1:
					ts := rng.Int64N(1000)
					v := string(rune('A' + rng.IntN(26)))
					got, err := txn.Put("s", []byte(k), []byte(v), ts)
					if err != nil {
						t.Fatal(err)
					}
					if e, ok := rec[k]; ok && e.ts > ts {
						ts = e.ts
					}
					if got != ts {
						t.Fatalf("round %d: put %s ts = %d, want %d", round, k, got, ts)
					}
					rec[k] = entry{v, ts}
				case 2:
					if err := txn.Delete("s", []byte(k)); err != nil {
						t.Fatal(err)
					}
					delete(rec, k)
				}
			}
			if rng.IntN(4) == 0 {
				txn.Rollback()
			} else {
				if err := txn.Apply(); err != nil {
					t.Fatal(err)
				}
				roundModel = rec
			}
		}
		if rng.IntN(4) == 0 {
			txn.Discard()
		} else {
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			db = roundModel
		}
		got := map[string]entry{}
		if err := d.Scan("s", nil, nil, func(k, v []byte, ts int64) error {
			got[string(k)] = entry{string(v), ts}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, db) {
			t.Fatalf("round %d: store %v, want %v", round, got, db)
		}
		// The TTL index holds every key exactly once.
		keys, err := d.Expired("s", 1<<40, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var idx []string
		for _, k := range keys {
			idx = append(idx, string(k))
		}
		slices.Sort(idx)
		if want := slices.Sorted(maps.Keys(db)); !slices.Equal(idx, want) {
			t.Fatalf("round %d: index keys %v, want %v", round, idx, want)
		}
	}
}

// The round's writes live in its entries, linked to the cache's, until
// Commit: a flush in the middle of a round (Scan, Expired) writes the
// committed state only and keeps the linked entries; a discarded round
// leaves the cache as it was; a Wipe forgets the round.
func TestTxnSharesCacheEntries(t *testing.T) {
	for _, budget := range []int64{DefaultCacheBytes, 0} {
		t.Run(fmt.Sprintf("cache=%d", budget), func(t *testing.T) {
			d, err := Open(t.TempDir(), nil, CacheBytes(budget))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			scan := func() map[string]string {
				t.Helper()
				got := map[string]string{}
				if err := d.Scan("s", nil, nil, func(k, v []byte, ts int64) error {
					got[string(k)] = fmt.Sprintf("%s@%d", v, ts)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return got
			}
			txn := d.Begin()
			txn.Put("s", []byte("a"), []byte("1"), 10)
			txn.Put("s", []byte("c"), []byte("1"), 10)
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			txn.Delete("s", []byte("c")) // committed: a dirty deletion (with the cache)
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			entries := len(d.cache.entries)

			// A round: a's update and c's re-creation pending, b read.
			txn.Put("s", []byte("a"), []byte("2"), 20)
			txn.Get("s", []byte("b"))
			txn.Put("s", []byte("c"), []byte("2"), 20)
			keys, err := d.Expired("s", 15, 10) // judged on committed state
			if err != nil {
				t.Fatal(err)
			}
			if got := strs(keys); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("expired mid-round = %v, want [a] (its committed time is 10)", got)
			}
			if got := scan(); !maps.Equal(got, map[string]string{"a": "1@10"}) {
				t.Fatalf("scan mid-round = %v, want the committed a=1@10 only", got)
			}
			if v, ts, ok, _ := txn.Get("s", []byte("c")); !ok || string(v) != "2" || ts != 20 {
				t.Fatalf("the round's c after a flush = %q@%d %v, want its own write 2@20", v, ts, ok)
			}
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := scan(); !maps.Equal(got, map[string]string{"a": "2@20", "c": "2@20"}) {
				t.Fatalf("scan after commit = %v", got)
			}
			checkIndex(t, d, "s")

			// A discarded round leaves the cache as it was.
			entries = len(d.cache.entries)
			bytes := d.cache.bytes
			txn.Put("s", []byte("new"), []byte("x"), 30)
			txn.Get("s", []byte("other"))
			txn.Put("s", []byte("a"), []byte("3"), 30)
			txn.Discard()
			if len(d.cache.entries) != entries || d.cache.bytes != bytes {
				t.Fatalf("after a discard: %d entries, %d bytes; before: %d, %d",
					len(d.cache.entries), d.cache.bytes, entries, bytes)
			}
			if budget == 0 && entries != 0 {
				t.Fatalf("no cache: %d entries left after rounds", entries)
			}

			// Wipe forgets the open round.
			txn = d.Begin()
			txn.Put("s", []byte("w"), []byte("x"), 40)
			if err := d.Wipe(); err != nil {
				t.Fatal(err)
			}
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			txn.Discard()
			if got := scan(); len(got) != 0 {
				t.Fatalf("after a wipe mid-round: %v", got)
			}
		})
	}
}

// Two Txns with rounds open at once would share the cache's entries: the
// second one's access to a key the first one touched is refused.
func TestConcurrentTxnRefused(t *testing.T) {
	d := open(t, t.TempDir())
	defer d.Close()
	a, b := d.Begin(), d.Begin()
	if _, err := a.Put("s", []byte("k"), []byte("1"), 1); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := b.Get("s", []byte("k")); !errors.Is(err, ErrConcurrentTxn) {
		t.Fatalf("second txn's get: err %v, want ErrConcurrentTxn", err)
	}
	if _, err := b.Put("s", []byte("other"), []byte("2"), 1); err != nil {
		t.Fatalf("a key the first txn did not touch: %v", err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if v, _, ok, err := b.Get("s", []byte("k")); err != nil || !ok || string(v) != "1" {
		t.Fatalf("after the first txn committed: %q %v %v", v, ok, err)
	}
	b.Discard()
	a.Discard()
}

// A record's writes to keys it linked itself need no undo log (Rollback
// resets them from the committed state); a write to a key an earlier record
// of the round touched does, and Rollback restores that record's write.
func TestTxnUndoOnlyForEarlierRecords(t *testing.T) {
	d, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	txn := d.Begin()
	if _, err := txn.Put("s", []byte("a"), []byte("1"), 5); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	// Record 1: read-modify-write of a (committed) and of b (new).
	for _, k := range []string{"a", "b"} {
		if _, _, _, err := txn.Get("s", []byte(k)); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Put("s", []byte(k), []byte("2"), 6); err != nil {
			t.Fatal(err)
		}
	}
	if len(txn.undo) != 0 {
		t.Fatalf("undo log of a record writing only its own entries: %d entries", len(txn.undo))
	}
	if err := txn.Apply(); err != nil {
		t.Fatal(err)
	}
	// Record 2 writes a again and c, then fails.
	if _, err := txn.Put("s", []byte("a"), []byte("3"), 7); err != nil {
		t.Fatal(err)
	}
	if err := txn.Delete("s", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Put("s", []byte("c"), []byte("3"), 7); err != nil {
		t.Fatal(err)
	}
	if len(txn.undo) != 2 {
		t.Fatalf("undo log: %d entries, want 2 (a and b, written by record 1)", len(txn.undo))
	}
	txn.Rollback()
	want := map[string]string{"a": "2", "b": "2", "c": ""}
	for k, v := range want {
		got, _, found, err := txn.Get("s", []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if found != (v != "") || string(got) != v {
			t.Fatalf("after rollback %s = %q (found %v), want %q", k, got, found, v)
		}
	}
	// Record 3 fails after its own writes only: nothing of it remains.
	if _, err := txn.Put("s", []byte("d"), []byte("4"), 8); err != nil {
		t.Fatal(err)
	}
	txn.Rollback()
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	got := map[string]string{}
	if err := d.Scan("s", nil, nil, func(k, v []byte, ts int64) error {
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, map[string]string{"a": "2", "b": "2"}) {
		t.Fatalf("committed %v", got)
	}
}

// A note kept on a key's cache entry (Txn.Note) starts at zero, outlives
// the round (the cache keeps the entry), and is lost with the entry (a
// disabled cache drops it at every commit).
func TestTxnNote(t *testing.T) {
	for _, budget := range []int64{DefaultCacheBytes, 0} {
		d := reopenDB(t, t.TempDir(), nil, CacheBytes(budget))
		txn := d.Begin()
		if _, err := txn.Put("s", []byte("k"), []byte("v"), 1); err != nil {
			t.Fatal(err)
		}
		n, err := txn.Note("s", []byte("k"))
		if err != nil || *n != 0 {
			t.Fatalf("budget %d: a new entry's note = %v (%v), want 0", budget, n, err)
		}
		*n = 7
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		txn.Discard()
		txn = d.Begin()
		n, err = txn.Note("s", []byte("k"))
		if err != nil {
			t.Fatal(err)
		}
		if want := uint32(7); budget == 0 {
			if *n != 0 {
				t.Fatalf("budget 0: the note outlived its entry: %d", *n)
			}
		} else if *n != want {
			t.Fatalf("budget %d: note %d after the round, want %d", budget, *n, want)
		}
		if got := d.Caching(); got != (budget > 0) {
			t.Fatalf("budget %d: Caching() = %v", budget, got)
		}
		txn.Discard()
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
