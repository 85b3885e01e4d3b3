package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestGetConcurrentWithWrites reads keys from several goroutines while the
// owner writes them: every read sees either nothing or a value the writer
// committed, never a torn one.
func TestGetConcurrentWithWrites(t *testing.T) {
	d, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const keys, rounds = 50, 20
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for k := range keys {
					v, ts, found, err := d.Get("s", []byte(fmt.Sprint("k", k)))
					if err != nil {
						errs <- err
						return
					}
					if found && !bytes.Equal(v, []byte(fmt.Sprint("v", ts))) {
						errs <- fmt.Errorf("key k%d: value %q at ts %d", k, v, ts)
						return
					}
				}
			}
		}()
	}
	for r := 1; r <= rounds; r++ {
		txn := d.Begin()
		for k := range keys {
			if _, err := txn.Put("s", []byte(fmt.Sprint("k", k)), []byte(fmt.Sprint("v", r)), int64(r)); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Apply(); err != nil {
			t.Fatal(err)
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		txn.Discard()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Committed writes sit in the cache until a flush (a checkpoint, in
	// a task); readers see what the database holds.
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	v, ts, found, err := d.Get("s", []byte("k7"))
	if err != nil || !found || string(v) != fmt.Sprint("v", rounds) || ts != rounds {
		t.Fatalf("final k7 = %q ts %d found %v err %v, want v%d at %d", v, ts, found, err, rounds, rounds)
	}
	if _, _, found, err := d.Get("other", []byte("k7")); found || err != nil {
		t.Fatalf("k7 in another store: found %v err %v", found, err)
	}
}

// TestTaskScanSeesWhatReadScanSees interleaves writes (commits held in the
// cache, flushes, write-through commits) with scans of random ranges of two
// stores: TaskScan, which keeps its iterator between calls, returns exactly
// what ReadScan (a new iterator each time) returns, before and after each
// write reaches Pebble, and after a Wipe; Close closes the kept iterator.
func TestTaskScanSeesWhatReadScanSees(t *testing.T) {
	d, err := Open(t.TempDir(), nil, CacheBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	key := func() []byte { return []byte(fmt.Sprintf("k%02d", rng.IntN(40))) }
	stores := []string{"a", "b"}
	type kv struct{ k, v string }
	collect := func(scan func(string, []byte, []byte, func(k, v []byte, ts int64) error) error,
		store string, from, to []byte, limit int) ([]kv, error) {
		var out []kv
		err := scan(store, from, to, func(k, v []byte, ts int64) error {
			if len(out) == limit {
				return errStopTest
			}
			out = append(out, kv{string(k), fmt.Sprintf("%s@%d", v, ts)})
			return nil
		})
		if errors.Is(err, errStopTest) {
			err = nil
		}
		return out, err
	}
	check := func(step int) {
		t.Helper()
		for range 3 {
			store := stores[rng.IntN(2)]
			from, to := key(), key()
			if bytes.Compare(from, to) > 0 {
				from, to = to, from
			}
			if rng.IntN(4) == 0 {
				to = nil
			}
			limit := rng.IntN(6) // stops early too (the iterator stays mid-range)
			got, err := collect(d.TaskScan, store, from, to, limit)
			if err != nil {
				t.Fatalf("step %d: TaskScan: %v", step, err)
			}
			want, err := collect(d.ReadScan, store, from, to, limit)
			if err != nil {
				t.Fatalf("step %d: ReadScan: %v", step, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d: %s [%s, %s) limit %d: TaskScan %v, ReadScan %v", step, store, from, to, limit, got, want)
			}
		}
	}
	seen := 0
	for step := range 600 {
		check(step)
		txn := d.Begin()
		for range 1 + rng.IntN(4) {
			store, k := stores[rng.IntN(2)], key()
			if rng.IntN(3) == 0 {
				if err := txn.Delete(store, k); err != nil {
					t.Fatal(err)
				}
			} else if _, err := txn.Put(store, k, []byte(fmt.Sprint("v", step)), int64(step)); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Apply(); err != nil {
			t.Fatal(err)
		}
		switch rng.IntN(5) {
		case 0:
			err = txn.CommitThrough()
		default:
			err = txn.Commit()
		}
		if err != nil {
			t.Fatal(err)
		}
		txn.Discard()
		check(step)
		if rng.IntN(4) == 0 {
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := collect(d.TaskScan, "a", nil, nil, -1); err != nil {
			t.Fatal(err)
		} else {
			seen = max(seen, len(got))
		}
	}
	if seen == 0 {
		t.Fatal("no scan saw a key: the writes never reached Pebble")
	}
	if err := d.Wipe(); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		if got, err := collect(d.TaskScan, s, nil, nil, -1); err != nil || len(got) != 0 {
			t.Fatalf("store %s after Wipe: %v, %v", s, got, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close with a kept scan iterator: %v", err)
	}
}

var errStopTest = errors.New("stop")
