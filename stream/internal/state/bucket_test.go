package state

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

func TestBucketWidth(t *testing.T) {
	for _, c := range []struct {
		ttl  time.Duration
		want int64
	}{
		{0, 1}, {-time.Second, 1}, {time.Microsecond, 1}, {time.Millisecond, 1},
		{30 * time.Millisecond, 30}, {500 * time.Millisecond, 500}, {time.Second, 1000},
		{10 * time.Second, 1000}, {64 * time.Second, 1000}, {128 * time.Second, 2000},
		{time.Hour, 56250}, {24 * time.Hour, 1350000},
	} {
		if got := BucketWidth(c.ttl); got != c.want {
			t.Errorf("BucketWidth(%v) = %d, want %d", c.ttl, got, c.want)
		}
	}
}

func TestBucketEnd(t *testing.T) {
	for _, c := range []struct{ ts, w, want int64 }{
		{0, 1, 1}, {5, 1, 6}, {-7, 1, -6},
		{0, 1000, 1000}, {999, 1000, 1000}, {1000, 1000, 2000}, {-1, 1000, 0}, {-1000, 1000, 0}, {-1001, 1000, -1000},
		{math.MaxInt64 - 5, 1000, math.MaxInt64}, {math.MinInt64, 1000, math.MinInt64 + 808},
	} {
		got := bucketEnd(c.ts, c.w)
		if got != c.want {
			t.Errorf("bucketEnd(%d, %d) = %d, want %d", c.ts, c.w, got, c.want)
		}
		if c.ts < math.MaxInt64-c.w && (got <= c.ts || got-c.ts > c.w) {
			t.Errorf("bucketEnd(%d, %d) = %d not in (ts, ts+w]", c.ts, c.w, got)
		}
	}
}

func commitRound(t *testing.T, d *DB, f func(txn *Txn)) {
	t.Helper()
	txn := d.Begin()
	f(txn)
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
}

// An update within its bucket writes the data key alone; one that crosses
// into another bucket moves the index entry; a delete removes it.
func TestBucketWrites(t *testing.T) {
	d, err := Open(t.TempDir(), nil, StoreTTL("s", 64*time.Second)) // width 1000
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	flush := func() {
		t.Helper()
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		checkIndex(t, d, "s")
	}
	commitRound(t, d, func(txn *Txn) {
		txn.Put("s", []byte("a"), []byte("1"), 100)
		txn.Put("s", []byte("b"), []byte("1"), 100)
	})
	flush()
	if d.indexWrites != 2 {
		t.Fatalf("%d index writes for two new keys, want 2", d.indexWrites)
	}
	commitRound(t, d, func(txn *Txn) {
		txn.Put("s", []byte("a"), []byte("2"), 999) // same bucket [0, 1000)
		txn.Put("s", []byte("b"), []byte("2"), 1000)
	})
	flush()
	if d.indexWrites != 2+2 {
		t.Fatalf("%d index writes, want 4: a stays in its bucket (none), b moves (delete + set)", d.indexWrites)
	}
	if _, ts, _, _ := d.Get("s", []byte("a")); ts != 999 {
		t.Fatalf("a's time = %d, want the exact 999", ts)
	}
	commitRound(t, d, func(txn *Txn) { txn.Delete("s", []byte("a")) })
	flush()
	if d.indexWrites != 5 {
		t.Fatalf("%d index writes, want 5 (the delete removes a's entry)", d.indexWrites)
	}
	// A rolled-back record and a discarded round write nothing.
	txn := d.Begin()
	txn.Put("s", []byte("c"), []byte("x"), 5000)
	txn.Rollback()
	txn.Put("s", []byte("b"), []byte("x"), 9000)
	txn.Apply()
	txn.Discard()
	flush()
	if d.indexWrites != 5 {
		t.Fatalf("%d index writes after a rollback and a discard, want 5", d.indexWrites)
	}
	if ts, ok, err := d.MaxTS("s"); err != nil || !ok || ts != 1000 {
		t.Fatalf("MaxTS = %d %v %v, want 1000", ts, ok, err)
	}
}

// Expired returns the keys of the buckets ending at or before the cut:
// never a key updated at or after it, and every key updated a bucket width
// before it.
func TestBucketExpiredBoundary(t *testing.T) {
	d, err := Open(t.TempDir(), nil, StoreTTL("s", 64*time.Second)) // width 1000
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	commitRound(t, d, func(txn *Txn) {
		for _, ts := range []int64{-1, 0, 999, 1000, 1999, 2000} {
			txn.Put("s", fmt.Appendf(nil, "k%d", ts), nil, ts)
		}
	})
	for _, c := range []struct {
		before int64
		want   []string
	}{
		{-1, nil},
		{0, []string{"k-1"}},
		{999, []string{"k-1"}}, // k0 and k999 expired, their bucket [0, 1000) not yet
		{1000, []string{"k-1", "k0", "k999"}},
		{1999, []string{"k-1", "k0", "k999"}},
		{2000, []string{"k-1", "k0", "k999", "k1000", "k1999"}},
		{math.MaxInt64, []string{"k-1", "k0", "k999", "k1000", "k1999", "k2000"}},
	} {
		keys, err := d.Expired("s", c.before, 100)
		if err != nil {
			t.Fatal(err)
		}
		if got := strs(keys); !slices.Equal(got, c.want) {
			t.Errorf("Expired(%d) = %v, want %v", c.before, got, c.want)
		}
	}
	if keys, _ := d.Expired("s", 2000, 2); len(keys) != 2 {
		t.Fatalf("limit 2: %d keys", len(keys))
	}
}

// MaxTS is exact with coarse buckets: the largest time in the last bucket
// holding a key, found again after that key is deleted.
func TestBucketMaxTS(t *testing.T) {
	d, err := Open(t.TempDir(), nil, StoreTTL("s", 64*time.Second)) // width 1000
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	commitRound(t, d, func(txn *Txn) {
		for i, ts := range []int64{-5, 1200, 1700, 1300, 2999} {
			txn.Put("s", fmt.Appendf(nil, "k%d", i), nil, ts)
		}
	})
	for _, c := range []struct {
		del  string
		want int64
	}{{"", 2999}, {"k4", 1700}, {"k2", 1300}, {"k1", 1300}, {"k3", -5}} {
		if c.del != "" {
			commitRound(t, d, func(txn *Txn) { txn.Delete("s", []byte(c.del)) })
		}
		if ts, ok, err := d.MaxTS("s"); err != nil || !ok || ts != c.want {
			t.Fatalf("after deleting %q: MaxTS = %d %v %v, want %d", c.del, ts, ok, err, c.want)
		}
	}
	commitRound(t, d, func(txn *Txn) { txn.Delete("s", []byte("k0")) })
	if _, ok, err := d.MaxTS("s"); ok || err != nil {
		t.Fatalf("empty store: MaxTS found %v err %v", ok, err)
	}
}

func indexEntries(t *testing.T, d *DB, store string) int {
	t.Helper()
	lo := storePrefix(prefixIndex, store)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// A TTL changed between runs rebuilds the store's index for the new width at
// Open: no entry of the old width is left, and expiry follows the new one. A
// store not declared keeps its persisted width.
func TestBucketWidthChange(t *testing.T) {
	dir := t.TempDir()
	reopen := func(d *DB, opts ...Option) *DB { t.Helper(); return reopenDB(t, dir, d, opts...) }
	d := reopen(nil, StoreTTL("s", time.Hour), StoreTTL("t", time.Hour)) // width 56250
	commitRound(t, d, func(txn *Txn) {
		for i := range 100 {
			txn.Put("s", fmt.Appendf(nil, "k%03d", i), nil, int64(i)*1000)
			txn.Put("t", fmt.Appendf(nil, "k%03d", i), nil, int64(i)*1000)
		}
	})
	if err := d.WriteCheckpoint(Checkpoint{"s": 100, "t": 100}); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, d, "s")
	if keys, _ := d.Expired("s", 10_000, 1000); len(keys) != 0 {
		t.Fatalf("width 56250: %d keys expired before 10000, want 0 (bucket not over)", len(keys))
	}

	// "s" to 64 s (width 1000); "t" not declared: keeps 56250.
	d = reopen(d, StoreTTL("s", 64*time.Second))
	if n := indexEntries(t, d, "s"); n != 100 {
		t.Fatalf("%d index entries of s after the rebuild, want 100", n)
	}
	checkIndex(t, d, "s")
	if w, _ := d.widthOf("s"); w != 1000 {
		t.Fatalf("width of s = %d, want 1000", w)
	}
	if w, _ := d.widthOf("t"); w != 56250 {
		t.Fatalf("width of undeclared t = %d, want its persisted 56250", w)
	}
	keys, err := d.Expired("s", 10_000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 10 || string(keys[9]) != "k009" {
		t.Fatalf("width 1000: expired before 10000 = %v, want k000..k009", strs(keys))
	}
	commitRound(t, d, func(txn *Txn) {
		txn.Put("t", []byte("k000"), nil, 60_000) // moves to bucket end 112500
		txn.Put("t", []byte("k001"), nil, 2_000)  // stays in its bucket
	})
	checkIndex(t, d, "t")
	if cp, err := d.Checkpoint(); err != nil || cp["s"] != 100 {
		t.Fatalf("checkpoint after a rebuild = %v %v: the data is unchanged, it must stay", cp, err)
	}

	// Back to the exact width, then reopened with the same TTL: no rebuild.
	d = reopen(d, StoreTTL("s", 0), StoreTTL("t", 0))
	checkIndex(t, d, "s")
	checkIndex(t, d, "t")
	if d.rebuilds != 2 {
		t.Fatalf("%d rebuilds at an Open changing two widths", d.rebuilds)
	}
	d = reopen(d, StoreTTL("s", 0), StoreTTL("t", 0))
	if d.rebuilds != 0 {
		t.Fatalf("%d rebuilds at an Open with unchanged TTLs", d.rebuilds)
	}
	if keys, _ := d.Expired("s", 5_000, 1000); len(keys) != 5 {
		t.Fatalf("exact width: %d keys expired before 5000, want 5", len(keys))
	}
	d.Close()
}

// A crash during a rebuild (the width marked "rebuilding", the index partly
// written) is finished by the next Open, declared or not; so is an
// unreadable width record.
func TestBucketRebuildInterrupted(t *testing.T) {
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("declared=%v", declared), func(t *testing.T) {
			dir := t.TempDir()
			opts := []Option{StoreTTL("s", 64*time.Second)}
			d, err := Open(dir, nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			commitRound(t, d, func(txn *Txn) {
				for i := range 50 {
					txn.Put("s", fmt.Appendf(nil, "k%02d", i), nil, int64(i)*100)
				}
			})
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			// What a crash in rebuildIndex can leave: the marker, a
			// stale entry of another width, some keys not indexed.
			b := d.db.NewBatch()
			b.Set(bucketMetaKey("s"), encodeBucketMeta(1000, true), nil)
			b.Set(appendIndexKey(nil, "s", 7, []byte("k01")), nil, nil)
			b.Delete(appendIndexKey(nil, "s", 1000, []byte("k02")), nil)
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
			b.Close()
			if err := d.closeDB(); err != nil { // no flush, no cache: as a crash
				t.Fatal(err)
			}
			if !declared {
				opts = nil
			}
			if d, err = Open(dir, nil, opts...); err != nil {
				t.Fatal(err)
			}
			defer func() { d.Close() }()
			checkIndex(t, d, "s")
			if n := indexEntries(t, d, "s"); n != 50 {
				t.Fatalf("%d index entries, want 50", n)
			}
			v, _ := d.getMeta(metaBucketPrefix + "s")
			if w, rebuilding, err := decodeBucketMeta(v); err != nil || rebuilding || w != 1000 {
				t.Fatalf("width record after Open: %d rebuilding %v err %v", w, rebuilding, err)
			}
			// An unreadable record: rebuilt with the exact width
			// (undeclared) or the declared one.
			if err := d.db.Set(bucketMetaKey("s"), []byte{9, 9}, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			d.Close()
			if d, err = Open(dir, nil, opts...); err != nil {
				t.Fatal(err)
			}
			checkIndex(t, d, "s")
		})
	}
}

// A database of format version 1 (the exact index) is wiped on Open: the
// caller finds no checkpoint and restores the stores from their changelogs.
func TestOldFormatWiped(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir, nil, StoreTTL("s", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	commitRound(t, d, func(txn *Txn) { txn.Put("s", []byte("k"), []byte("v"), 5) })
	if err := d.WriteCheckpoint(Checkpoint{"s": 1}); err != nil {
		t.Fatal(err)
	}
	// Rewrite it as version 1 wrote it: format 1, no bucket record, an
	// index entry at the exact time.
	b := d.db.NewBatch()
	b.Set(metaKey(metaFormat), []byte{1}, nil)
	b.Delete(bucketMetaKey("s"), nil)
	b.Delete(appendIndexKey(nil, "s", bucketEnd(5, BucketWidth(time.Hour)), []byte("k")), nil)
	b.Set(appendIndexKey(nil, "s", 5, []byte("k")), nil, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	d.Close()

	d, err = Open(dir, nil, StoreTTL("s", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if cp, err := d.Checkpoint(); err != nil || cp != nil {
		t.Fatalf("checkpoint of a wiped old-format store = %v %v, want none (full restore)", cp, err)
	}
	if _, _, ok, err := d.Get("s", []byte("k")); ok || err != nil {
		t.Fatalf("old data survived: %v %v", ok, err)
	}
	if fresh, err := d.fresh(); err != nil || !fresh {
		t.Fatalf("wiped store fresh = %v %v", fresh, err)
	}
	if w, _ := d.widthOf("s"); w != BucketWidth(time.Hour) {
		t.Fatalf("width after wipe = %d", w)
	}
	// What a restore then does: rebuild from the changelog.
	commitRound(t, d, func(txn *Txn) { txn.Put("s", []byte("k"), []byte("v"), 5) })
	checkIndex(t, d, "s")
}

func TestBucketMetaCodec(t *testing.T) {
	for _, w := range []int64{noIndexWidth, 1, 1000, 56250, math.MaxInt64} {
		for _, r := range []bool{false, true} {
			gw, gr, err := decodeBucketMeta(encodeBucketMeta(w, r))
			if err != nil || gw != w || gr != r {
				t.Fatalf("round trip %d %v: %d %v %v", w, r, gw, gr, err)
			}
		}
	}
	for _, b := range [][]byte{nil, {1}, {2, 1, 0}, {1, 1, 2}, {1, 1, 0, 0}, {1, 0x80, 0}} {
		if _, _, err := decodeBucketMeta(b); !errors.Is(err, ErrBadBucketMeta) {
			t.Errorf("decode %x: err %v, want ErrBadBucketMeta", b, err)
		}
	}
}

func FuzzDecodeBucketMeta(f *testing.F) {
	f.Add(encodeBucketMeta(1000, false))
	f.Add(encodeBucketMeta(1, true))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, r, err := decodeBucketMeta(b)
		if err != nil {
			if !errors.Is(err, ErrBadBucketMeta) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if w < noIndexWidth {
			t.Fatalf("decoded width %d", w)
		}
		if got := encodeBucketMeta(w, r); string(got) != string(b) {
			t.Fatalf("re-encoding %x gives %x", b, got)
		}
	})
}

// A store declared NoTTLIndex writes its data keys alone: no index entry,
// nothing expired, MaxTS still exact (also once the key holding the bound
// is deleted). Declared with a TTL later, its index is built; declared
// NoTTLIndex again, the index is deleted.
func TestNoTTLIndex(t *testing.T) {
	dir := t.TempDir()
	reopen := func(d *DB, opts ...Option) *DB { t.Helper(); return reopenDB(t, dir, d, opts...) }
	d := reopen(nil, NoTTLIndex("w"))
	commitRound(t, d, func(txn *Txn) {
		for i := range 100 {
			txn.Put("w", fmt.Appendf(nil, "k%03d", i), []byte("v"), int64(i)*1000)
		}
	})
	commitRound(t, d, func(txn *Txn) { txn.Delete("w", []byte("k050")) })
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := indexEntries(t, d, "w"); n != 0 || d.indexWrites != 0 {
		t.Fatalf("%d index entries, %d index writes; want none", n, d.indexWrites)
	}
	if keys, err := d.Expired("w", math.MaxInt64, 1000); err != nil || len(keys) != 0 {
		t.Fatalf("Expired = %d keys, %v; want none", len(keys), err)
	}
	if ts, ok, err := d.MaxTS("w"); err != nil || !ok || ts != 99_000 {
		t.Fatalf("MaxTS = %d %v %v, want 99000", ts, ok, err)
	}
	commitRound(t, d, func(txn *Txn) { txn.Delete("w", []byte("k099")) })
	if ts, ok, err := d.MaxTS("w"); err != nil || !ok || ts != 98_000 {
		t.Fatalf("MaxTS after deleting the bound's key = %d %v %v, want 98000", ts, ok, err)
	}

	d = reopen(d, StoreTTL("w", time.Hour))
	if n := indexEntries(t, d, "w"); n != 98 {
		t.Fatalf("%d index entries after declaring a TTL, want 98", n)
	}
	checkIndex(t, d, "w")
	d = reopen(d, NoTTLIndex("w"))
	if n := indexEntries(t, d, "w"); n != 0 {
		t.Fatalf("%d index entries after declaring NoTTLIndex again, want 0", n)
	}
	if w, _ := d.widthOf("w"); w != noIndexWidth {
		t.Fatalf("width %d, want %d", w, noIndexWidth)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// reopenDB closes d (if not nil) and opens the database in dir again with
// opts.
func reopenDB(t *testing.T, dir string, d *DB, opts ...Option) *DB {
	t.Helper()
	if d != nil {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Open(dir, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
