package state

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// MaxTS answers from the persisted bound while the key written with it still
// holds it, and from the index (exactly) when it does not: deleted,
// rewritten with an older time after a delete, or the record unreadable.
func TestMaxTSBound(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir, nil, StoreTTL("s", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	want := func(ts int64, ok bool, bounded bool) {
		t.Helper()
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		_, fast, err := d.boundedMaxTS("s")
		if err != nil {
			t.Fatal(err)
		}
		got, gotOK, err := d.MaxTS("s")
		if err != nil || got != ts || gotOK != ok {
			t.Fatalf("MaxTS = %d %v %v, want %d %v", got, gotOK, err, ts, ok)
		}
		if fast != bounded {
			t.Fatalf("answered from the bound: %v, want %v", fast, bounded)
		}
	}
	want(0, false, false)
	commitRound(t, d, func(txn *Txn) {
		txn.Put("s", []byte("a"), nil, 100)
		txn.Put("s", []byte("b"), nil, 300)
		txn.Put("s", []byte("c"), nil, 200)
		txn.Put("t", []byte("z"), nil, 900) // another store's bound
	})
	want(300, true, true)
	commitRound(t, d, func(txn *Txn) { txn.Put("s", []byte("a"), nil, 250) }) // below the bound
	want(300, true, true)
	commitRound(t, d, func(txn *Txn) { txn.Delete("s", []byte("b")) })
	want(250, true, false)
	commitRound(t, d, func(txn *Txn) { txn.Put("s", []byte("b"), nil, 50) }) // b again, older
	want(250, true, false)
	commitRound(t, d, func(txn *Txn) { txn.Put("s", []byte("c"), nil, 400) })
	want(400, true, true)

	// Reopened: the bound is read back.
	d.Close()
	if d, err = Open(dir, nil, StoreTTL("s", time.Hour)); err != nil {
		t.Fatal(err)
	}
	want(400, true, true)

	// An unreadable record is not trusted (nor rewritten): the index answers.
	if err := d.db.Set(maxTSKey("s"), []byte{1, 2}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if d, err = Open(dir, nil, StoreTTL("s", time.Hour)); err != nil {
		t.Fatal(err)
	}
	want(400, true, false)
	commitRound(t, d, func(txn *Txn) { txn.Put("s", []byte("d"), nil, 500) })
	want(500, true, false)

	// Wiped: empty, and a new bound from the first write.
	if err := d.Wipe(); err != nil {
		t.Fatal(err)
	}
	want(0, false, false)
	commitRound(t, d, func(txn *Txn) { txn.Put("s", []byte("e"), nil, 7) })
	want(7, true, true)
}

func FuzzDecodeMaxTSValue(f *testing.F) {
	f.Add(appendMaxTSValue(nil, 1_700_000_000_000, "zone-1"))
	f.Add(appendMaxTSValue(nil, -5, ""))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, key, ok := decodeMaxTSValue(b)
		if !ok {
			if len(b) >= 8 {
				t.Fatalf("refused %x", b)
			}
			return
		}
		if got := appendMaxTSValue(nil, ts, key); string(got) != string(b) {
			t.Fatalf("re-encoding %x gives %x", b, got)
		}
	})
}
