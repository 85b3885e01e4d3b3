package state

import (
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
		t.Run(fmt.Sprintf("cache=%d", budget), func(t *testing.T) { txnRecordLevelModel(t, budget) })
	}
}

func txnRecordLevelModel(t *testing.T, cache int64) {
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
		for range 1 + rng.IntN(30) {
			rec := maps.Clone(roundModel)
			for range 1 + rng.IntN(4) {
				k := string(rune('a' + rng.IntN(10)))
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
