package state

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Reads for queries from other goroutines than the task's (queryable
// state). Pebble serves reads concurrently with writes, so these may run
// while the task writes. They see what the database holds: a task's writes
// reach it when its cache is flushed, at each commit (checkpoint) or earlier
// when the cache is full, so queries see the state at least as of the last
// commit, and never uncommitted ExactlyOnce writes (those enter the cache
// only once their transaction commits). They must not overlap Close or
// Wipe: the caller excludes that.

// Get returns key's value and last update time (ms) in store, or found false.
// The returned value is a copy.
func (d *DB) Get(store string, key []byte) (value []byte, ts int64, found bool, err error) {
	return d.getData(store, key, dataKey(nil, store, key))
}

// getData reads the data key dk (of key in store) from Pebble; the value is
// a copy.
func (d *DB) getData(store string, key, dk []byte) (value []byte, ts int64, found bool, err error) {
	v, closer, err := d.db.Get(dk)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("state get %s: %w", store, err)
	}
	defer closer.Close()
	if len(v) < 8 {
		return nil, 0, false, &CorruptionError{Store: store, Key: append([]byte(nil), key...), Reason: "value shorter than its timestamp"}
	}
	return append([]byte(nil), v[8:]...), decodeTS(v), true, nil
}

// ReadScan is Scan for queries from other goroutines: it reads what the
// database holds, without flushing the task's cache (which only the task's
// goroutine may touch), so it sees the same writes as Get. The task itself
// may use it where it knows which of its committed writes the cache may
// still hold (see Flushes) and reads each found key again through its Txn.
func (d *DB) ReadScan(store string, from, to []byte, fn func(key, value []byte, ts int64) error) error {
	return d.scanDB(store, from, to, fn)
}

// Flush writes the cache's dirty entries to the database (unsynced), so Get
// and ReadScan see them. Task goroutine only.
func (d *DB) Flush() error { return d.flushDirty() }

// Unflushed reports whether the cache may hold writes the database does not
// (false: Get and ReadScan see every committed write). Task goroutine only.
func (d *DB) Unflushed() bool { return len(d.cache.dirty) > 0 }

// Flushes counts the flushes of the cache's dirty entries to Pebble since
// the DB was opened: a caller that noted keys committed while the cache
// held them knows, once it moved, that Pebble holds them (a flush writes
// every dirty entry). Task goroutine only.
func (d *DB) Flushes() uint64 { return d.cache.flushes }

// TaskScan is ReadScan for the task's goroutine: it sees exactly what
// ReadScan would (what Pebble holds, without flushing the cache), but reuses
// one Pebble iterator across calls instead of opening one per scan, which
// dominates short scans (a key's few windows). Task goroutine only.
//
// The kept iterator reads the database as of its creation. It is replaced
// once any batch of store data reached Pebble since (Flush, the flushes of
// Commit and Close, CommitThrough: the only writes of data keys after
// Open), so every scan sees every data key Pebble holds; writes of meta keys
// (watermark, checkpoint) do not invalidate it, no scan reads them. It is
// closed with the database (Close, Wipe). Holding it pins at most the
// memtables and files of one view, until the next batch.
func (d *DB) TaskScan(store string, from, to []byte, fn func(key, value []byte, ts int64) error) error {
	s := &d.scan
	if s.it != nil && s.batches != d.batches {
		d.dropTaskScan()
	}
	// The bounds the iterator holds must not change until the next
	// SetBounds returns: alternate two buffers.
	s.cur = 1 - s.cur
	lo := dataKey(s.bounds[s.cur][0][:0], store, from)
	var hi []byte
	if to != nil {
		hi = dataKey(s.bounds[s.cur][1][:0], store, to)
	} else {
		hi = append(s.bounds[s.cur][1][:0], prefixEnd(storePrefix(prefixData, store))...)
	}
	s.bounds[s.cur][0], s.bounds[s.cur][1] = lo, hi
	it := s.it
	if it == nil {
		var err error
		it, err = d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		s.it, s.batches = it, d.batches
	} else {
		it.SetBounds(lo, hi)
	}
	n := len(storePrefix(prefixData, store))
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		if len(v) < 8 {
			return &CorruptionError{Store: store, Key: append([]byte(nil), it.Key()[n:]...), Reason: "value shorter than its timestamp"}
		}
		if err := fn(it.Key()[n:], v[8:], decodeTS(v)); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		d.dropTaskScan()
		return err
	}
	return nil
}

// taskScanIter is TaskScan's kept iterator: batches is DB.batches when it
// was opened; bounds the two alternating bound buffers ([i][0] lower, [i][1]
// upper), cur the one the iterator holds.
type taskScanIter struct {
	it      *pebble.Iterator
	batches uint64
	bounds  [2][2][]byte
	cur     int
}

// dropTaskScan closes TaskScan's kept iterator, if any.
func (d *DB) dropTaskScan() {
	if d.scan.it != nil {
		d.scan.it.Close()
		d.scan.it = nil
	}
}
