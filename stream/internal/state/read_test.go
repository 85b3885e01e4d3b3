package state

import (
	"bytes"
	"fmt"
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
