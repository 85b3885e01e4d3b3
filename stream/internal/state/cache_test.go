package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestCacheModel drives the DB through random rounds of puts, deletes,
// discards, reopens (which warm the cache, and may change the store's TTL and
// so its index bucket width) and wipes, with cache budgets from disabled to
// tiny (constant eviction) to ample, and checks after every round that reads
// through a Txn (served by the cache when it can), the Pebble contents and the
// TTL index all equal a map model.
func TestCacheModel(t *testing.T) {
	for _, budget := range []int64{0, 600, 4 << 10, DefaultCacheBytes} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(uint64(budget), 7))
			// Widths 1 (exact), 37 and 100 ms over times in [-300, 700).
			ttls := []time.Duration{0, 37 * time.Millisecond, 100 * time.Millisecond}
			ttl := ttls[rng.IntN(len(ttls))]
			d, err := Open(dir, nil, CacheBytes(budget), StoreTTL("s", ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { d.Close() }()
			type entry struct {
				v  string
				ts int64
			}
			model := map[string]entry{}
			unflushedExpiry := 0
			const keys = 40
			for round := range 400 {
				switch rng.IntN(20) {
				case 0:
					if err := d.Close(); err != nil {
						t.Fatal(err)
					}
					ttl = ttls[rng.IntN(len(ttls))]
					if d, err = Open(dir, nil, CacheBytes(budget), StoreTTL("s", ttl)); err != nil {
						t.Fatal(err)
					}
				case 1:
					if err := d.Wipe(); err != nil {
						t.Fatal(err)
					}
					model = map[string]entry{}
				}
				txn := d.Begin()
				next := map[string]entry{}
				for k, e := range model {
					next[k] = e
				}
				for range 1 + rng.IntN(15) {
					k := fmt.Sprintf("k%02d", rng.IntN(keys))
					switch rng.IntN(5) {
					case 0:
						if err := txn.Delete("s", []byte(k)); err != nil {
							t.Fatal(err)
						}
						delete(next, k)
					case 1:
						v, ts, ok, err := txn.Get("s", []byte(k))
						e, want := next[k]
						if err != nil || ok != want || (ok && (string(v) != e.v || ts != e.ts)) {
							t.Fatalf("round %d: get %s = %q %d %v %v, model %v %v", round, k, v, ts, ok, err, e, want)
						}
					default:
						ts := rng.Int64N(1000) - 300
						v := fmt.Sprintf("v%d-%d", round, rng.IntN(1000))
						got, err := txn.Put("s", []byte(k), []byte(v), ts)
						if err != nil {
							t.Fatal(err)
						}
						if e, ok := next[k]; ok && e.ts > ts {
							ts = e.ts
						}
						if got != ts {
							t.Fatalf("round %d: put %s ts = %d, want %d", round, k, got, ts)
						}
						next[k] = entry{v, ts}
					}
				}
				if rng.IntN(4) == 0 {
					txn.Discard()
				} else {
					commit := txn.Commit
					if rng.IntN(3) == 0 {
						commit = txn.CommitThrough // restore's way
					}
					if err := commit(); err != nil {
						t.Fatal(err)
					}
					txn.Discard()
					model = next
				}
				if d.cache.bytes > budget {
					t.Fatalf("round %d: cache holds %d bytes, budget %d", round, d.cache.bytes, budget)
				}
				// Reads through a new Txn.
				check := d.Begin()
				for i := range keys {
					k := fmt.Sprintf("k%02d", i)
					v, ts, ok, err := check.Get("s", []byte(k))
					e, want := model[k]
					if err != nil || ok != want || (ok && (string(v) != e.v || ts != e.ts)) {
						t.Fatalf("round %d: read %s = %q %d %v %v, model %v %v (cache complete %v)",
							round, k, v, ts, ok, err, e, want, d.cache.complete)
					}
				}
				check.Discard()
				// Each check below but the reads flushes the dirty
				// entries (sometimes, for Expired): run them now and then,
				// so entries also stay dirty over several rounds.
				if rng.IntN(3) != 0 {
					continue
				}
				// The TTL index, read with the dirty entries unflushed
				// when none of them can be expired.
				flushes := d.cache.flushes
				cut := rng.Int64N(1100) - 400
				exp, err := d.Expired("s", cut, 10*keys)
				if err != nil {
					t.Fatal(err)
				}
				if d.cache.flushes == flushes && len(d.cache.dirty) > 0 {
					unflushedExpiry++
				}
				gotExp := strs(exp)
				var want []string
				width := BucketWidth(ttl)
				for k, e := range model {
					// Removed once the cut passes the end of its bucket:
					// never early, at most one width late.
					due := bucketEnd(e.ts, width) <= cut
					if (due && e.ts >= cut) || (!due && cut-e.ts >= width) {
						t.Fatalf("key at %d: due %v at %d (width %d)", e.ts, due, cut, width)
					}
					if due {
						want = append(want, k)
					}
				}
				slices.Sort(gotExp)
				slices.Sort(want)
				if !slices.Equal(gotExp, want) {
					t.Fatalf("round %d: expired before %d = %v, want %v", round, cut, gotExp, want)
				}
				if rng.IntN(2) != 0 {
					continue
				}
				// Pebble itself, bypassing the cache (Scan flushes).
				got := map[string]entry{}
				if err := d.Scan("s", nil, nil, func(k, v []byte, ts int64) error {
					got[string(k)] = entry{string(v), ts}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(model) {
					t.Fatalf("round %d: store %v, model %v", round, got, model)
				}
				for k, e := range model {
					if got[k] != e {
						t.Fatalf("round %d: key %s: store %v, model %v", round, k, got[k], e)
					}
				}
				// The TTL index holds exactly one entry per key, at its
				// bucket.
				checkIndex(t, d, "s")
				exp, err = d.Expired("s", 1<<40, 10*keys)
				if err != nil {
					t.Fatal(err)
				}
				gotExp = strs(exp)
				want = want[:0]
				for k := range model {
					want = append(want, k)
				}
				slices.Sort(gotExp)
				slices.Sort(want)
				if !slices.Equal(gotExp, want) {
					t.Fatalf("round %d: index keys %v, want %v", round, gotExp, want)
				}
			}
			if budget == 600 && d.cache.evicted == 0 {
				t.Fatal("tiny budget never evicted: the test does not exercise eviction")
			}
			if budget == DefaultCacheBytes && unflushedExpiry == 0 {
				t.Fatal("Expired never ran over unflushed entries: the test does not exercise the filter")
			}
		})
	}
}

// A reopened database whose keys fit the budget has a complete cache (new
// keys need no Pebble lookup); one that does not fit is not complete, and
// keys outside the cache are still read from Pebble.
func TestCacheWarmCompleteness(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	txn := d.Begin()
	for i := range 100 {
		if _, err := txn.Put("s", fmt.Appendf(nil, "k%03d", i), []byte("value"), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	if !d.cache.complete || len(d.cache.entries) != 100 {
		t.Fatalf("new database: complete %v, %d entries; want complete with 100", d.cache.complete, len(d.cache.entries))
	}
	d.Close()

	d, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !d.cache.complete || len(d.cache.entries) != 100 {
		t.Fatalf("warmed: complete %v, %d entries; want complete with 100", d.cache.complete, len(d.cache.entries))
	}
	d.Close()

	small := int64(30 * (cacheEntryOverhead + 20))
	d, err = Open(dir, nil, CacheBytes(small))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.cache.complete || len(d.cache.entries) == 0 || len(d.cache.entries) >= 100 {
		t.Fatalf("partly warmed: complete %v, %d entries", d.cache.complete, len(d.cache.entries))
	}
	txn = d.Begin()
	defer txn.Discard()
	cached := len(d.cache.entries)
	for i := range 100 {
		v, ts, ok, err := txn.Get("s", fmt.Appendf(nil, "k%03d", i))
		if err != nil || !ok || string(v) != "value" || ts != int64(i) {
			t.Fatalf("k%03d = %q %d %v %v", i, v, ts, ok, err)
		}
	}
	if _, _, ok, err := txn.Get("s", []byte("absent")); ok || err != nil {
		t.Fatalf("absent key: found %v err %v", ok, err)
	}
	// Keys outside the cache, and absent ones, are read from Pebble.
	if want := uint64(100 - cached + 1); d.cache.misses != want {
		t.Fatalf("%d Pebble lookups, want %d (100 keys, %d cached, 1 absent)", d.cache.misses, want, cached)
	}
}

// A complete cache answers every read without Pebble, new keys included;
// keys read from Pebble once are answered from the cache in later rounds.
func TestCacheSparesLookups(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	for round := range 3 {
		txn := d.Begin()
		for i := range 50 {
			k := fmt.Appendf(nil, "k%03d", round*25+i) // half new, half seen
			if _, _, _, err := txn.Get("s", k); err != nil {
				t.Fatal(err)
			}
			if _, err := txn.Put("s", k, []byte("v"), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		txn.Discard()
	}
	if d.cache.misses != 0 {
		t.Fatalf("complete cache: %d Pebble lookups, want 0", d.cache.misses)
	}
	d.Close()

	// Reopened with a budget too small to warm completely: the first
	// read of an uncached key goes to Pebble, the next round's does not.
	d, err := Open(dir, nil, CacheBytes(10*(cacheEntryOverhead+16)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.cache.complete {
		t.Fatal("cache complete with a budget for 10 of 100 keys")
	}
	k := []byte("k099")
	for range 2 {
		txn := d.Begin()
		if _, _, ok, err := txn.Get("s", k); !ok || err != nil {
			t.Fatalf("k099: found %v err %v", ok, err)
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		txn.Discard()
	}
	if d.cache.misses != 1 {
		t.Fatalf("%d Pebble lookups of k099 over two rounds, want 1", d.cache.misses)
	}
}

// A value that does not follow the format is not cached by the warm-up, so
// reading it still reports the corruption.
func TestCacheWarmSkipsCorruptValue(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	if err := d.db.Set(dataKey(nil, "s", []byte("bad")), []byte{1, 2}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d = open(t, dir)
	defer d.Close()
	if d.cache.complete {
		t.Fatal("cache complete despite a skipped corrupt value")
	}
	txn := d.Begin()
	defer txn.Discard()
	_, _, _, err := txn.Get("s", []byte("bad"))
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("get corrupt value: err %v, want CorruptionError", err)
	}
}

// Expired over unflushed writes: a key updated since its indexed time, or
// deleted, is not expired from Pebble's stale index entry; a new key older
// than the cut is (the dirty entries are flushed first).
func TestExpiredWithDirtyEntries(t *testing.T) {
	d := open(t, t.TempDir())
	defer d.Close()
	commit := func(f func(txn *Txn)) {
		t.Helper()
		txn := d.Begin()
		f(txn)
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		txn.Discard()
	}
	commit(func(txn *Txn) {
		for _, k := range []string{"a", "b", "c"} {
			txn.Put("s", []byte(k), []byte("v"), 10)
		}
	})
	if err := d.WriteCheckpoint(Checkpoint{"s": 1}); err != nil {
		t.Fatal(err)
	}
	commit(func(txn *Txn) {
		txn.Put("s", []byte("a"), []byte("v2"), 500) // updated: not expired at 100
		txn.Delete("s", []byte("b"))                 // deleted: not expired
	})
	if len(d.cache.dirty) != 2 {
		t.Fatalf("%d dirty entries, want 2", len(d.cache.dirty))
	}
	flushes := d.cache.flushes
	keys, err := d.Expired("s", 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := strs(keys); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("expired before 100 = %v, want [c]", got)
	}
	if d.cache.flushes != flushes {
		t.Fatal("Expired flushed although no dirty entry could expire")
	}
	commit(func(txn *Txn) { txn.Put("s", []byte("d"), []byte("v"), 5) })
	keys, err = d.Expired("s", 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := strs(keys); !slices.Equal(got, []string{"d", "c"}) {
		t.Fatalf("expired before 100 = %v, want [d c]", got)
	}
}

// Rounds updating the same keys write Pebble once per flush, not once per
// round: the dirty entries dedupe until a checkpoint.
func TestDirtyWritesDedupeUntilCheckpoint(t *testing.T) {
	d := open(t, t.TempDir())
	defer d.Close()
	for round := range 10 {
		txn := d.Begin()
		for _, k := range []string{"a", "b"} {
			if _, err := txn.Put("s", []byte(k), fmt.Appendf(nil, "v%d", round), int64(round)); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		txn.Discard()
	}
	if n := len(d.cache.dirty); n != 2 {
		t.Fatalf("%d dirty entries after 10 rounds over 2 keys, want 2", n)
	}
	if _, _, err := d.db.Get(dataKey(nil, "s", []byte("a"))); !errors.Is(err, pebble.ErrNotFound) {
		t.Fatalf("a dirty write reached Pebble before a flush (get err %v)", err)
	}
	if err := d.WriteCheckpoint(Checkpoint{"s": 20}); err != nil {
		t.Fatal(err)
	}
	if len(d.cache.dirty) != 0 || d.cache.flushes != 1 {
		t.Fatalf("after checkpoint: %d dirty, %d flushes; want 0, 1", len(d.cache.dirty), d.cache.flushes)
	}
	v, closer, err := d.db.Get(dataKey(nil, "s", []byte("a")))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if string(v[8:]) != "v9" || decodeTS(v) != 9 {
		t.Fatalf("a in Pebble = %q ts %d, want v9 ts 9", v[8:], decodeTS(v))
	}
}

// Wiping a database that holds nothing (a new task's) keeps it as it is;
// wiping one with data or a checkpoint removes them; either way the result
// is an empty, usable database with a complete cache.
func TestWipeFreshAndUsed(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	defer func() { d.Close() }()
	if err := d.Wipe(); err != nil {
		t.Fatal(err)
	}
	if fresh, err := d.fresh(); err != nil || !fresh || !d.cache.complete {
		t.Fatalf("after wiping a new database: fresh %v err %v complete %v", fresh, err, d.cache.complete)
	}
	txn := d.Begin()
	if _, err := txn.Put("s", []byte("k"), []byte("v"), 1); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	if err := d.WriteCheckpoint(Checkpoint{"s": 1}); err != nil {
		t.Fatal(err)
	}
	if fresh, _ := d.fresh(); fresh {
		t.Fatal("a database with data and a checkpoint reported fresh")
	}
	if err := d.Wipe(); err != nil {
		t.Fatal(err)
	}
	if cp, err := d.Checkpoint(); err != nil || cp != nil {
		t.Fatalf("checkpoint after wipe = %v, %v", cp, err)
	}
	txn = d.Begin()
	if _, _, ok, err := txn.Get("s", []byte("k")); ok || err != nil {
		t.Fatalf("k after wipe: found %v err %v", ok, err)
	}
	txn.Discard()
	if fresh, err := d.fresh(); err != nil || !fresh || !d.cache.complete {
		t.Fatalf("after wiping a used database: fresh %v err %v complete %v", fresh, err, d.cache.complete)
	}
	// Reopened, the wiped database is still of the current format.
	d.Close()
	d = open(t, dir)
	if fresh, err := d.fresh(); err != nil || !fresh {
		t.Fatalf("reopened: fresh %v err %v", fresh, err)
	}
}
