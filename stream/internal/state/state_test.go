package state

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func open(t *testing.T, dir string) *DB {
	t.Helper()
	d, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPutGetDeleteAndExpiry(t *testing.T) {
	d := open(t, t.TempDir())
	defer d.Close()
	txn := d.Begin()
	for i, k := range []string{"a", "b", "c"} {
		if _, err := txn.Put("s", []byte(k), []byte("v"+k), int64(100*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	// Another store with the same keys is independent.
	if _, err := txn.Put("s2", []byte("a"), []byte("other"), 1); err != nil {
		t.Fatal(err)
	}
	// An older timestamp does not make "c" look older.
	if ts, err := txn.Put("s", []byte("c"), []byte("vc2"), 50); err != nil || ts != 300 {
		t.Fatalf("put c: ts %d err %v", ts, err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn = d.Begin()
	v, ts, ok, err := txn.Get("s", []byte("c"))
	if err != nil || !ok || string(v) != "vc2" || ts != 300 {
		t.Fatalf("get c = %q %d %v %v", v, ts, ok, err)
	}
	txn.Discard()

	keys, err := d.Expired("s", 250, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := strs(keys); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("expired before 250 = %v", got)
	}
	if keys, _ := d.Expired("s", 1000, 1); len(keys) != 1 {
		t.Fatalf("limit not applied: %d", len(keys))
	}
	txn = d.Begin()
	if err := txn.Delete("s", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Put("s", []byte("b"), []byte("vb2"), 400); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	keys, _ = d.Expired("s", 1000, 10)
	if got := strs(keys); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("index after delete/update = %v, want [c b] (by age)", got)
	}
	var scanned []string
	if err := d.Scan("s", nil, nil, func(k, v []byte, ts int64) error {
		scanned = append(scanned, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(scanned, []string{"b=vb2", "c=vc2"}) {
		t.Fatalf("scan = %v", scanned)
	}
}

func TestDiscardLeavesNoTrace(t *testing.T) {
	d := open(t, t.TempDir())
	defer d.Close()
	txn := d.Begin()
	txn.Put("s", []byte("k"), []byte("v"), 1)
	txn.Discard()
	txn = d.Begin()
	defer txn.Discard()
	if _, _, ok, _ := txn.Get("s", []byte("k")); ok {
		t.Fatal("discarded write visible")
	}
	if keys, _ := d.Expired("s", 10, 10); len(keys) != 0 {
		t.Fatal("discarded write indexed")
	}
}

func TestCheckpointSurvivesReopenAndWipe(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	txn := d.Begin()
	txn.Put("s", []byte("k"), []byte("v"), 1)
	txn.Commit()
	if err := d.WriteCheckpoint(Checkpoint{"s": 42, "t": 7}); err != nil {
		t.Fatal(err)
	}
	d.Close()

	d = open(t, dir)
	cp, err := d.Checkpoint()
	if err != nil || cp["s"] != 42 || cp["t"] != 7 || len(cp) != 2 {
		t.Fatalf("checkpoint after reopen = %v %v", cp, err)
	}
	txn = d.Begin()
	if _, _, ok, _ := txn.Get("s", []byte("k")); !ok {
		t.Fatal("data lost on reopen")
	}
	txn.Discard()
	if err := d.Wipe(); err != nil {
		t.Fatal(err)
	}
	if cp, _ := d.Checkpoint(); cp != nil {
		t.Fatalf("checkpoint after wipe = %v", cp)
	}
	txn = d.Begin()
	if _, _, ok, _ := txn.Get("s", []byte("k")); ok {
		t.Fatal("data after wipe")
	}
	txn.Discard()
	d.Close()
}

func TestCheckpointCodec(t *testing.T) {
	c := Checkpoint{"a": 0, "counts": 1 << 40, "z": -1}
	b := EncodeCheckpoint(c)
	got, err := DecodeCheckpoint(b)
	if err != nil || len(got) != 3 || got["counts"] != 1<<40 || got["z"] != -1 {
		t.Fatalf("round trip = %v %v", got, err)
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x40
		if _, err := DecodeCheckpoint(bad); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("flipped byte %d: err %v", i, err)
		}
	}
	for n := range len(b) {
		if _, err := DecodeCheckpoint(b[:n]); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("truncated to %d: err %v", n, err)
		}
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(EncodeCheckpoint(Checkpoint{"s": 5}))
	f.Add(EncodeCheckpoint(Checkpoint{}))
	f.Add([]byte{1, 200, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCheckpoint(b)
		if err != nil {
			return
		}
		if again, err := DecodeCheckpoint(EncodeCheckpoint(c)); err != nil || len(again) != len(c) {
			t.Fatalf("re-encode of a decoded checkpoint fails: %v", err)
		}
	})
}

// TestModel compares the store with a map under random puts and deletes,
// including TTL index consistency.
func TestModel(t *testing.T) {
	d := open(t, t.TempDir())
	defer d.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	type entry struct {
		v  string
		ts int64
	}
	model := map[string]entry{}
	for range 50 {
		txn := d.Begin()
		for range 20 {
			k := string(rune('a' + rng.IntN(12)))
			if rng.IntN(4) == 0 {
				txn.Delete("s", []byte(k))
				delete(model, k)
				continue
			}
			ts := rng.Int64N(1000)
			v := string(rune('A' + rng.IntN(26)))
			got, _ := txn.Put("s", []byte(k), []byte(v), ts)
			if e, ok := model[k]; ok && e.ts > ts {
				ts = e.ts
			}
			if got != ts {
				t.Fatalf("put ts = %d, want %d", got, ts)
			}
			model[k] = entry{v, ts}
		}
		if rng.IntN(3) == 0 {
			txn.Discard()
			// Rebuild the model from the store: discarded writes vanish.
			model = map[string]entry{}
			d.Scan("s", nil, nil, func(k, v []byte, ts int64) error {
				model[string(k)] = entry{string(v), ts}
				return nil
			})
			continue
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		got := map[string]entry{}
		d.Scan("s", nil, nil, func(k, v []byte, ts int64) error {
			got[string(k)] = entry{string(v), ts}
			return nil
		})
		if len(got) != len(model) {
			t.Fatalf("store %v, model %v", got, model)
		}
		for k, e := range model {
			if got[k] != e {
				t.Fatalf("key %s: store %v, model %v", k, got[k], e)
			}
		}
		cut := rng.Int64N(1000)
		exp, _ := d.Expired("s", cut, 1000)
		var want []string
		for k, e := range model {
			if e.ts < cut {
				want = append(want, k)
			}
		}
		gotExp := strs(exp)
		slices.Sort(gotExp)
		slices.Sort(want)
		if !slices.Equal(gotExp, want) {
			t.Fatalf("expired before %d = %v, want %v", cut, gotExp, want)
		}
	}
}

func strs(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// An unopenable directory is an error, not a panic, and leaks nothing
// (goleak in TestMain).
func TestOpenFailure(t *testing.T) {
	dir := t.TempDir() + "/file"
	if err := writeFile(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, nil); err == nil {
		t.Fatal("opened a store on a regular file")
	}
}

// Record-level rollback keeps the writes already applied in the round.
func TestRollbackKeepsAppliedWrites(t *testing.T) {
	d := open(t, t.TempDir())
	defer d.Close()
	txn := d.Begin()
	txn.Put("s", []byte("a"), []byte("1"), 1)
	if err := txn.Apply(); err != nil {
		t.Fatal(err)
	}
	txn.Put("s", []byte("a"), []byte("2"), 2)
	txn.Put("s", []byte("b"), []byte("x"), 2)
	if v, _, _, _ := txn.Get("s", []byte("a")); string(v) != "2" {
		t.Fatalf("record-level read = %q, want its own write", v)
	}
	txn.Rollback()
	if v, ts, ok, _ := txn.Get("s", []byte("a")); string(v) != "1" || ts != 1 || !ok {
		t.Fatalf("after rollback a = %q@%d, want the applied 1@1", v, ts)
	}
	if _, _, ok, _ := txn.Get("s", []byte("b")); ok {
		t.Fatal("rolled-back write visible")
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	keys, _ := d.Expired("s", 100, 10)
	if got := strs(keys); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("index = %v, want [a]", got)
	}
}

func writeFile(path string) error { return os.WriteFile(path, []byte("x"), 0o644) }

func TestMaxTS(t *testing.T) {
	d := open(t, t.TempDir())
	defer d.Close()
	if _, ok, err := d.MaxTS("s"); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	txn := d.Begin()
	txn.Put("s", []byte("a"), nil, 5)
	txn.Put("s", []byte("b"), nil, -7)
	txn.Put("t", []byte("c"), nil, 100)
	txn.Commit()
	txn.Discard()
	if ts, ok, err := d.MaxTS("s"); !ok || err != nil || ts != 5 {
		t.Fatalf("MaxTS = %d %v %v, want 5", ts, ok, err)
	}
}

// checkIndex checks the TTL index invariant of store (bucket.go): exactly
// one index entry per data key, at the end of its update time's bucket.
func checkIndex(t *testing.T, d *DB, store string) {
	t.Helper()
	if err := d.flushDirty(); err != nil {
		t.Fatal(err)
	}
	width, err := d.widthOf(store)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]int64{}
	if err := d.scanDB(store, nil, nil, func(k, _ []byte, ts int64) error {
		data[string(k)] = ts
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lo := storePrefix(prefixIndex, store)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	seen := map[string]bool{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		end, key := decodeTS(k[len(lo):]), string(k[len(lo)+8:])
		ts, ok := data[key]
		switch {
		case !ok:
			t.Fatalf("index entry %s@%d without data", key, end)
		case seen[key]:
			t.Fatalf("second index entry %s@%d", key, end)
		case end != bucketEnd(ts, width):
			t.Fatalf("index entry %s@%d, ts %d: want bucket end %d (width %d)", key, end, ts, bucketEnd(ts, width), width)
		}
		seen[key] = true
	}
	if len(seen) != len(data) {
		t.Fatalf("%d index entries for %d keys", len(seen), len(data))
	}
}
