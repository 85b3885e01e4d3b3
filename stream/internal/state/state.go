// Package state is the local key-value storage of stream tasks: one Pebble
// database per task holding that task's keyed stores, with a per-store TTL
// index and a checkpoint of the changelog offsets the local data covers.
//
// The local database is a cache of the changelog topics: it may be deleted
// at any time (Wipe) and rebuilt from them. The checkpoint makes a restart
// cheap: it is written with a synced write at each commit, after the
// changelog records it covers were acknowledged, so the database is known to
// contain at least every changelog write below the checkpointed offsets, and
// a restore replays only the changelog from there.
//
// Key layout (one ordered keyspace; a store, and a key prefix within a
// store, is one contiguous range):
//
//	data:  'd' | len(store) u8 | store | key               -> ts u64 BE | value
//	index: 'x' | len(store) u8 | store | ts u64 BE | key   -> (empty)
//	meta:  'm' | name                                       -> see meta.go
//
// ts is the key's last update in event-time milliseconds, stored with the
// sign bit flipped so that byte order is numeric order. The index lets TTL
// expiry scan only expired keys. These bytes are a persisted format: change
// them only with a new FormatVersion (an old database is then wiped and
// restored from the changelogs).
//
// A DB is used by one goroutine at a time (its task); it is not safe for
// concurrent use.
package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// FormatVersion is the version of the key layout above.
const FormatVersion = 1

const (
	prefixData  = 'd'
	prefixIndex = 'x'
	prefixMeta  = 'm'
)

// DB is one task's local state.
type DB struct {
	dir string
	db  *pebble.DB
	log *slog.Logger
}

// Open opens (or creates) the database in dir. A database of another format
// version is wiped: it is a cache of the changelogs.
func Open(dir string, logger *slog.Logger) (*DB, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &DB{dir: dir, log: logger}
	if err := d.open(); err != nil {
		return nil, err
	}
	v, err := d.getMeta(metaFormat)
	if err != nil {
		d.db.Close()
		return nil, err
	}
	switch {
	case v == nil:
		// New database (or one from before the format key): start clean.
		if err := d.Wipe(); err != nil {
			return nil, err
		}
	case len(v) != 1 || v[0] != FormatVersion:
		d.log.Warn("state: local store has another format version; wiping, it will be restored from the changelogs",
			"dir", dir, "version", v)
		if err := d.Wipe(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *DB) open() error {
	db, err := pebble.Open(d.dir, &pebble.Options{Logger: pebbleLogger{d.log}})
	if err != nil {
		return fmt.Errorf("open state %s: %w", d.dir, err)
	}
	d.db = db
	return nil
}

// Wipe deletes every store and the checkpoint, leaving an empty database of
// the current format version.
func (d *DB) Wipe() error {
	if d.db != nil {
		if err := d.db.Close(); err != nil {
			return fmt.Errorf("wipe state %s: %w", d.dir, err)
		}
		d.db = nil
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return fmt.Errorf("wipe state %s: %w", d.dir, err)
	}
	if err := d.open(); err != nil {
		return err
	}
	return d.db.Set(metaKey(metaFormat), []byte{FormatVersion}, pebble.Sync)
}

// Close closes the database. Unsynced writes survive a process crash (they
// are in the OS cache) but not necessarily a machine crash; the checkpoint
// only ever claims synced data.
func (d *DB) Close() error {
	if d.db == nil {
		return nil
	}
	err := d.db.Close()
	d.db = nil
	return err
}

// DiskSize is the database's size on disk in bytes.
func (d *DB) DiskSize() uint64 { return d.db.Metrics().DiskSpaceUsage() }

// Txn is a set of writes applied atomically by Commit, reading its own writes.
// A task uses one per record, so that a failed attempt leaves no trace.
type Txn struct {
	d *DB
	b *pebble.Batch
}

// Begin starts a transaction.
func (d *DB) Begin() *Txn { return &Txn{d: d, b: d.db.NewIndexedBatch()} }

// Get returns the value and timestamp (ms) of key in store.
func (t *Txn) Get(store string, key []byte) (value []byte, ts int64, found bool, err error) {
	v, closer, err := t.b.Get(dataKey(nil, store, key))
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

// Put sets key in store to value, keeping the TTL index in step. The key's
// update time becomes the larger of ts (ms) and its previous update time, so
// an out-of-order record does not make a key look older. It returns that
// update time.
func (t *Txn) Put(store string, key, value []byte, ts int64) (int64, error) {
	old, found, err := t.unindex(store, key)
	if err != nil {
		return 0, err
	}
	if found && old > ts {
		ts = old
	}
	v := make([]byte, 8, 8+len(value))
	binary.BigEndian.PutUint64(v, encodeTS(ts))
	v = append(v, value...)
	if err := t.b.Set(dataKey(nil, store, key), v, nil); err != nil {
		return 0, err
	}
	return ts, t.b.Set(indexKey(store, ts, key), nil, nil)
}

// Delete removes key from store.
func (t *Txn) Delete(store string, key []byte) error {
	if _, _, err := t.unindex(store, key); err != nil {
		return err
	}
	return t.b.Delete(dataKey(nil, store, key), nil)
}

func (t *Txn) unindex(store string, key []byte) (ts int64, found bool, err error) {
	_, ts, found, err = t.Get(store, key)
	if err != nil || !found {
		return ts, found, err
	}
	return ts, true, t.b.Delete(indexKey(store, ts, key), nil)
}

// Commit applies the transaction (not synced: see DB.Sync) and ends it.
func (t *Txn) Commit() error {
	err := t.b.Commit(pebble.NoSync)
	t.b.Close()
	t.b = nil
	return err
}

// Discard drops the transaction's writes.
func (t *Txn) Discard() {
	if t.b != nil {
		t.b.Close()
		t.b = nil
	}
}

// Expired returns up to limit keys of store last updated before ts (ms),
// oldest first.
func (d *DB) Expired(store string, before int64, limit int) ([][]byte, error) {
	lo := storePrefix(prefixIndex, store)
	hi := binary.BigEndian.AppendUint64(append([]byte(nil), lo...), encodeTS(before))
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for ok := it.First(); ok && len(keys) < limit; ok = it.Next() {
		k := it.Key()
		if len(k) < len(lo)+8 {
			it.Close()
			return nil, &CorruptionError{Store: store, Key: append([]byte(nil), k...), Reason: "short index key"}
		}
		keys = append(keys, append([]byte(nil), k[len(lo)+8:]...))
	}
	return keys, it.Close()
}

// Scan calls fn for every key of store in key order (from, to: optional
// bounds, to exclusive). fn must not retain its arguments.
func (d *DB) Scan(store string, from, to []byte, fn func(key, value []byte, ts int64) error) error {
	lo := dataKey(nil, store, from)
	var hi []byte
	if to != nil {
		hi = dataKey(nil, store, to)
	} else {
		hi = prefixEnd(storePrefix(prefixData, store))
	}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	n := len(storePrefix(prefixData, store))
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		if len(v) < 8 {
			it.Close()
			return &CorruptionError{Store: store, Key: append([]byte(nil), it.Key()[n:]...), Reason: "value shorter than its timestamp"}
		}
		if err := fn(it.Key()[n:], v[8:], decodeTS(v)); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// CorruptionError reports local data that does not follow the format. The
// caller wipes the database and restores it from the changelogs.
type CorruptionError struct {
	Store  string
	Key    []byte
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("state: corrupt store %s at key %q: %s", e.Store, e.Key, e.Reason)
}

func storePrefix(kind byte, store string) []byte {
	p := make([]byte, 0, 2+len(store))
	p = append(p, kind, byte(len(store)))
	return append(p, store...)
}

func dataKey(dst []byte, store string, key []byte) []byte {
	dst = append(dst, prefixData, byte(len(store)))
	dst = append(dst, store...)
	return append(dst, key...)
}

func indexKey(store string, ts int64, key []byte) []byte {
	k := storePrefix(prefixIndex, store)
	k = binary.BigEndian.AppendUint64(k, encodeTS(ts))
	return append(k, key...)
}

func encodeTS(ts int64) uint64 { return uint64(ts) ^ (1 << 63) }

func decodeTS(v []byte) int64 { return int64(binary.BigEndian.Uint64(v) ^ (1 << 63)) }

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error("pebble fatal: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}

var _ io.Closer = (*DB)(nil)
