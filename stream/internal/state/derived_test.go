package state

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// testDerived derives from every key "k..." of a store the entry "i...":
// the test's stand-in for a windowed store's close index.
var testDerived = DerivedIndex{
	Of: func(dst, key []byte, _ int64) []byte {
		if len(key) == 0 || key[0] != 'k' {
			return dst
		}
		dst = append(dst, 'i')
		return append(dst, key[1:]...)
	},
	Holds: func(key []byte) bool { return len(key) > 0 && key[0] == 'i' },
	Value: []byte{1},
}

// testDerivedByTime derives from every key "k..." updated at ts the entry
// "i" | ts (8 bytes BE) | "...": the stand-in for the row form's close
// index, which follows a row's next window.
var testDerivedByTime = DerivedIndex{
	Of: func(dst, key []byte, ts int64) []byte {
		if len(key) == 0 || key[0] != 'k' {
			return dst
		}
		dst = binary.BigEndian.AppendUint64(append(dst, 'i'), uint64(ts))
		return append(dst, key[1:]...)
	},
	ByTime: true,
	Holds:  func(key []byte) bool { return len(key) > 0 && key[0] == 'i' },
	Value:  []byte{1},
}

// TestDerivedModel drives a store with derived entries through random
// rounds of puts (some asserted absent), deletes, discards, flushes,
// reopens and wipes, with cache budgets from disabled to ample, and checks
// after every round that Pebble holds the derived entry of exactly the
// keys it holds (ByTime: at the time it holds them; their puts move it up
// and down, PutAt), that the cache holds no derived entry, and that reads
// through a Txn equal a map model.
func TestDerivedModel(t *testing.T) {
	for _, byTime := range []bool{false, true} {
		for _, budget := range []int64{0, 600, 4 << 10, DefaultCacheBytes} {
			t.Run(fmt.Sprintf("byTime=%v/budget=%d", byTime, budget), func(t *testing.T) {
				testDerivedModel(t, byTime, budget)
			})
		}
	}
}

func testDerivedModel(t *testing.T, byTime bool, budget int64) {
	ix := testDerived
	if byTime {
		ix = testDerivedByTime
	}
	dir := t.TempDir()
	opts := []Option{CacheBytes(budget), NoTTLIndex("s"), Derived("s", ix)}
	d := reopenDB(t, dir, nil, opts...)
	defer func() { d.Close() }()
	rng := rand.New(rand.NewPCG(uint64(budget), 11))
	model := map[string]int64{} // key -> update time
	const keys = 30
	for round := range 300 {
		switch rng.IntN(25) {
		case 0:
			d = reopenDB(t, dir, d, opts...)
		case 1:
			if err := d.Wipe(); err != nil {
				t.Fatal(err)
			}
			clear(model)
		case 2, 3, 4:
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		txn := d.Begin()
		next := maps.Clone(model)
		for range rng.IntN(8) {
			k := fmt.Sprintf("k%02d", rng.IntN(keys))
			ts := int64(rng.IntN(1000))
			var err error
			switch _, ok := next[k]; {
			case rng.IntN(3) == 0:
				err = txn.Delete("s", []byte(k))
				delete(next, k)
			case !ok && rng.IntN(2) == 0:
				_, err = txn.PutAbsent("s", []byte(k), []byte("v"), ts)
				next[k] = ts
			case byTime:
				err = txn.PutAt("s", []byte(k), []byte("v"), ts)
				next[k] = ts
			default:
				ts, err = txn.Put("s", []byte(k), []byte("v"), ts)
				next[k] = ts
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		// Other keys of the store have no entry.
		if _, err := txn.Put("s", []byte("m"), []byte("mark"), int64(round)); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(6) == 0 {
			txn.Discard()
		} else {
			if err := txn.Commit(); err != nil {
				t.Fatal(err)
			}
			txn.Discard()
			model = next
			model["m"] = int64(round)
		}
		checkDerived(t, d, &ix, model, round)
	}
}

// checkDerived compares d with model (see TestDerivedModel).
func checkDerived(t *testing.T, d *DB, ix *DerivedIndex, model map[string]int64, round int) {
	t.Helper()
	for k := range d.cache.entries {
		if d.isDerived([]byte(k)) {
			t.Fatalf("round %d: the cache holds derived entry %q", round, k)
		}
	}
	txn := d.Begin()
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		_, ts, found, err := txn.Get("s", []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		mts, ok := model[k]
		if found != ok || found && ts != mts {
			t.Fatalf("round %d: Get(%s) = %v at %d, model %v at %d", round, k, found, ts, ok, mts)
		}
	}
	txn.Discard()
	var want, derived []string
	err := d.ReadScan("s", nil, nil, func(k, v []byte, ts int64) error {
		if k[0] == 'i' {
			if string(v) != "\x01" {
				t.Fatalf("round %d: derived entry %q = %q", round, k, v)
			}
			derived = append(derived, string(k))
		} else if k[0] == 'k' {
			want = append(want, string(ix.Of(nil, k, ts)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(want, derived) {
		t.Fatalf("round %d: Pebble holds the entries %q of its keys and the entries %q", round, want, derived)
	}
}
