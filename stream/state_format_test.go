package stream

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestOldFormatStoreRestoredFromChangelog: a local store written by an older
// state format (version 1: the exact TTL index) is wiped when its task opens
// it and rebuilt from the changelog, checkpoint or not. The old store here
// also holds a wrong count: a task that kept it would continue from 999.
func TestOldFormatStoreRestoredFromChangelog(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 1)
	b.createTopic("counts", 1)
	dir := t.TempDir()
	truth := map[string]int64{}
	app := b.run("oldfmt", countTopology, StateDir(dir), CommitInterval(10*time.Millisecond))
	produceEvents(b, 0, 50, 1, truth)
	b.waitFor("counts", 20*time.Second, atLeast(t, truth))
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	stores, err := filepath.Glob(filepath.Join(dir, "oldfmt", "*", "MANIFEST-*"))
	if err != nil || len(stores) != 1 {
		t.Fatalf("task stores: %v %v, want one", stores, err)
	}
	db, err := pebble.Open(filepath.Dir(stores[0]), &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'d'}, UpperBound: []byte{'e'}})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := Int64().Encode(999)
	if err != nil {
		t.Fatal(err)
	}
	wb := db.NewBatch()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v := append([]byte(nil), it.Value()[:8]...) // the update time
		wb.Set(it.Key(), append(v, wrong...), nil)
		n++
	}
	it.Close()
	wb.Set([]byte("mformat"), []byte{1}, nil)
	if err := wb.Commit(pebble.Sync); err != nil || n == 0 {
		t.Fatalf("rewrite as version 1: %d keys, %v", n, err)
	}
	wb.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	app = b.run("oldfmt", countTopology, StateDir(dir), CommitInterval(10*time.Millisecond))
	produceEvents(b, 50, 50, 1, truth)
	recs := b.waitFor("counts", 20*time.Second, atLeast(t, truth))
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	if got := latest(t, recs)[key(0)]; got != 100 {
		t.Fatalf("count after restart = %d, want 100 (restored from the changelog)", got)
	}
}
