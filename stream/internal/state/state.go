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
// In front of Pebble sits a write-back cache (cache.go): reads of keys seen
// before, and of new keys while every key fits, need no Pebble lookup; the
// writes of a round are held in memory and reach Pebble in one key-ordered
// batch at the next checkpoint (or when the cache is full, or before a
// direct read of Pebble: Scan, MaxTS, an Expired scan that could see them).
// A checkpoint still claims only what is synced: WriteCheckpoint flushes
// first.
//
// Key layout (one ordered keyspace; a store, and a key prefix within a
// store, is one contiguous range):
//
//	data:  'd' | len(store) u8 | store | key                -> ts u64 BE | value
//	index: 'x' | len(store) u8 | store | end u64 BE | key   -> (empty)
//	meta:  'm' | name                                        -> see meta.go, bucket.go, maxts.go
//
// ts is the key's last update in event-time milliseconds, stored with the
// sign bit flipped so that byte order is numeric order. end is the exclusive
// end of the time bucket holding ts (bucketEnd: the store's bucket width is
// derived from its TTL and persisted, see bucket.go), encoded the same way.
// The index lets TTL expiry scan only expired keys; being coarse, it is
// rewritten only when an update moves a key to another bucket. These bytes
// are a persisted format (docs/format/state.md): change them only with a new
// FormatVersion (an old database is then wiped and restored from the
// changelogs).
//
// A DB is used by one goroutine at a time (its task); it is not safe for
// concurrent use.
package state

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FormatVersion is the version of the key layout above. Version 1 indexed
// the exact update time; 2 indexes the end of its bucket; 3 lets a store
// have no index (width 0: NoTTLIndex); 4: a windowed store of hopping
// windows in pane layout keeps one row of panes per key (stream's
// window_pane_row.go), so its local copies are rebuilt from the changelog;
// 5: the close index of that row form is derived by the database from the
// rows' update times (DerivedIndex.ByTime), where 4 held it as written
// entries.
const FormatVersion = 5

const (
	prefixData  = 'd'
	prefixIndex = 'x'
	prefixMeta  = 'm'
)

// Pebble is sized for many small stores (an App opens one DB per stateful
// task, and a task's store is often a few keys): the store cache (cache.go)
// absorbs repeated updates of a key before Pebble sees them, so Pebble's
// own buffers can stay small.
//
// memTableSize is the size of a DB's Pebble memtable (up to two exist while
// one is flushed; they grow from 256 KiB as they fill). Pebble preallocates
// each WAL file at 110% of it, so it sets a store's disk floor: 4 MiB
// (Pebble's default) makes a 7-key store ~4.5 MiB on disk where 32 MiB made
// it ~36 MiB (TestSmallStoreFootprint).
const memTableSize = 4 << 20

// blockCacheSize is the Pebble block cache of one DB (Pebble's default, 8
// MiB, per DB). Reads of hot keys are answered by the store cache; the block
// cache serves only its misses, and an idle task should not hold much.
const blockCacheSize = 2 << 20

// DB is one task's local state.
type DB struct {
	dir      string
	db       *pebble.DB
	fsCloser io.Closer
	log      *slog.Logger
	// cache answers reads of committed state (see readCache); Txn.Commit
	// keeps it equal to the database.
	cache stateCache
	// declared holds the bucket width of every store given to Open
	// (StoreTTL); widths the width in effect of every store seen since,
	// equal to its persisted one (bucket.go).
	declared map[string]int64
	widths   map[string]int64
	// maxTS holds each store's persisted max time bound (maxts.go) once
	// read; raises is writeBatch's scratch.
	maxTS  map[string]*maxTSState
	raises []maxTSUpdate
	// freeTxn is the transaction last discarded, reused by Begin; active
	// the one last begun or with a round open (its entries are linked to
	// the cache's).
	freeTxn *Txn
	active  *Txn
	// scratch of writeBatch and flushDirty
	writes []write
	// order, index and their radix-sort twins (which of each pair holds
	// the previous sort's result varies)
	order, orderTmp []keyOrder
	runTmp          []keyOrder // sortRun's
	index, indexTmp []indexOp
	dkBuf           []byte // scratch of Expired
	indexWrites     uint64 // index entries set or deleted by flushes since open (for tests)
	rebuilds        uint64 // TTL index rebuilds since open (for tests)
	// batches counts writeBatch's batches since open; scan is TaskScan's
	// kept iterator (read.go).
	batches uint64
	scan    taskScanIter
	// derived holds the derived entries of the stores declared with
	// Derived; deriveBuf and deriveSpans are writeBatch's scratch.
	derived     map[string]*DerivedIndex
	deriveBuf   []byte
	deriveSpans []deriveSpan
}

// Option configures Open.
type Option func(*options)

type options struct {
	cacheBytes int64
	ttls       map[string]time.Duration
	noIndex    map[string]bool
	derived    map[string]*DerivedIndex
}

// StoreTTL declares store's TTL: its TTL index uses buckets of
// BucketWidth(ttl), so Expired(store, before) returns a key at most that
// much after it expired (never before). A store opened before with another
// width has its index rebuilt by Open (one scan of its data keys). A store
// never declared keeps the width it was built with, or gets the exact index
// (1 ms buckets) if new.
func StoreTTL(store string, ttl time.Duration) Option {
	return func(o *options) {
		if o.ttls == nil {
			o.ttls = map[string]time.Duration{}
		}
		o.ttls[store] = ttl
	}
}

// NoTTLIndex declares that store has no TTL and keeps no TTL index: its
// writes are the data keys alone, and Expired finds nothing in it. A store
// opened before with an index has it deleted by Open (and one opened before
// without, declared with StoreTTL, gets it rebuilt).
func NoTTLIndex(store string) Option {
	return func(o *options) {
		if o.noIndex == nil {
			o.noIndex = map[string]bool{}
		}
		o.noIndex[store] = true
	}
}

// DerivedIndex describes entries of a store that the DB derives from its
// other keys (declared with Derived): a key may name one entry (Of), held in
// the same store with value Value and the update time of the key's write
// that created it. Declare it only for a store without a TTL index
// (NoTTLIndex).
//
// The DB keeps a key's entry in Pebble exactly while the key is there: the
// batch that writes the key to Pebble where Pebble did not hold it writes
// the entry, the batch that deletes the key deletes it. The entries never
// enter the cache or a Txn, so they cost the cache nothing and a round
// nothing: only reads of the database see them (ReadScan, TaskScan, Scan,
// Last, DB.Get), and they see them exactly for the keys they see. A Txn must
// not read or write an entry (it would answer from the cache, which does
// not hold it). The caller's assertions that a key is absent (PutAbsent,
// KnowAbsent) must be true, or the entry of a key Pebble did hold may be
// written again (harmless; ByTime: the entry of the time Pebble held would
// stay) — and a deletion always deletes the entry.
//
// A windowed store's close index ('c' | end | key | start of every window
// 'w' | key | end | start) is one: the windows a watermark closes are one
// scan of the database, and the open windows cost the cache one entry
// each instead of two.
//
// An index ByTime derives a key's entry from its update time too (the row
// form of hopping windows: a key's row at time next-1 has its close entry
// at next): the entry follows the time Pebble holds for the key, so the
// batch that writes the key at another time moves the entry (deletes the
// one of the time Pebble held, writes the new one). Its keys are written
// with PutAt, which sets the time exactly, also lower.
type DerivedIndex struct {
	// Of appends to dst the entry's key of key updated at ts, or returns
	// dst unchanged if key has none. It must not modify or retain key.
	// Unless ByTime, the entry must not depend on ts.
	Of func(dst, key []byte, ts int64) []byte
	// ByTime: the entry depends on the key's update time (see above).
	ByTime bool
	// Holds reports whether key is an entry (the cache does not load it).
	Holds func(key []byte) bool
	Value []byte
}

// Derived declares store's derived entries (see DerivedIndex). A store
// declared with it must be declared with it at every Open (its task, a
// standby of it): its entries are written only by the batches of a DB that
// knows them.
func Derived(store string, ix DerivedIndex) Option {
	return func(o *options) {
		if o.derived == nil {
			o.derived = map[string]*DerivedIndex{}
		}
		o.derived[store] = &ix
	}
}

// CacheBytes sets the memory budget of the DB's cache (default
// DefaultCacheBytes); 0 disables it.
func CacheBytes(n int64) Option { return func(o *options) { o.cacheBytes = n } }

// Open opens (or creates) the database in dir. A database of another format
// version is wiped: it is a cache of the changelogs. The cache of an existing
// database is warmed with its keys, up to the cache's budget.
func Open(dir string, logger *slog.Logger, opts ...Option) (*DB, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o := options{cacheBytes: DefaultCacheBytes}
	for _, opt := range opts {
		opt(&o)
	}
	d := &DB{dir: dir, log: logger, cache: newStateCache(o.cacheBytes),
		declared: map[string]int64{}, widths: map[string]int64{}, maxTS: map[string]*maxTSState{},
		derived: o.derived}
	for store, ttl := range o.ttls {
		d.declared[store] = BucketWidth(ttl)
	}
	for store := range o.noIndex {
		d.declared[store] = noIndexWidth
	}
	if err := d.open(); err != nil {
		return nil, err
	}
	v, err := d.getMeta(metaFormat)
	if err != nil {
		d.closeDB()
		return nil, err
	}
	switch {
	case v == nil:
		// A new database, or one whose first write (the format key) never
		// made it: start clean.
		empty, err := d.empty()
		if err != nil {
			d.closeDB()
			return nil, err
		}
		if !empty {
			if err := d.Wipe(); err != nil {
				return nil, err
			}
		} else if err := d.db.Set(metaKey(metaFormat), []byte{FormatVersion}, pebble.Sync); err != nil {
			d.closeDB()
			return nil, fmt.Errorf("open state %s: %w", dir, err)
		} else if err := d.ensureWidths(); err != nil {
			d.closeDB()
			return nil, fmt.Errorf("open state %s: %w", dir, err)
		} else {
			d.resetCache(true)
		}
	case len(v) != 1 || v[0] != FormatVersion:
		d.log.Warn("state: local store has another format version; wiping, it will be restored from the changelogs",
			"dir", dir, "version", v)
		if err := d.Wipe(); err != nil {
			return nil, err
		}
	default:
		if err := d.ensureWidths(); err != nil {
			d.closeDB()
			return nil, fmt.Errorf("open state %s: %w", dir, err)
		}
		if err := d.warm(); err != nil {
			d.closeDB()
			return nil, fmt.Errorf("open state %s: warm cache: %w", dir, err)
		}
	}
	return d, nil
}

func (d *DB) open() error {
	// Disk-health checking (slow disk operations are logged) with a closer
	// we own: pebble's default wrapper leaks its goroutine when Open fails.
	fs, closer := vfs.WithDiskHealthChecks(vfs.Default, 5*time.Second, nil, func(info vfs.DiskSlowInfo) {
		d.log.Warn("state: slow disk", "path", info.Path, "op", info.OpType.String(), "duration", info.Duration)
	})
	cache := pebble.NewCache(blockCacheSize)
	defer cache.Unref() // the DB holds its own reference while open
	opts := &pebble.Options{Logger: pebbleLogger{d.log}, FS: fs,
		MemTableSize: memTableSize,
		Cache:        cache,
	}
	// Bloom filters in every level: most reads of a keyed store look up
	// a key the store does not hold yet (a new key), which the filter
	// answers without reading data blocks.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(d.dir, opts)
	if err != nil {
		closer.Close()
		return fmt.Errorf("open state %s: %w", d.dir, err)
	}
	d.db, d.fsCloser = db, closer
	return nil
}

func (d *DB) closeDB() error {
	d.dropTaskScan()
	err := d.db.Close()
	d.db = nil
	if d.fsCloser != nil {
		d.fsCloser.Close()
		d.fsCloser = nil
	}
	return err
}

func (d *DB) empty() (bool, error) {
	it, err := d.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	return empty, it.Close()
}

// fresh reports whether the database holds nothing but its format key, of
// the current version, and the bucket widths of its stores.
func (d *DB) fresh() (bool, error) {
	it, err := d.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	format, bucket := metaKey(metaFormat), metaKey(metaBucketPrefix)
	sawFormat := false
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		switch {
		case string(k) == string(format) && len(v) == 1 && v[0] == FormatVersion:
			sawFormat = true
		case len(k) > len(bucket) && string(k[:len(bucket)]) == string(bucket):
		default:
			return false, it.Close()
		}
	}
	return sawFormat, it.Close()
}

// Wipe deletes every store and the checkpoint, leaving an empty database of
// the current format version.
func (d *DB) Wipe() error {
	d.resetCache(false)
	clear(d.maxTS)
	if d.db != nil {
		if fresh, err := d.fresh(); err == nil && fresh {
			// Nothing to delete (a new task's database): spare the
			// close, removal and re-creation of the Pebble files.
			d.resetCache(true)
			return nil
		}
		clear(d.widths)
		if err := d.closeDB(); err != nil {
			return fmt.Errorf("wipe state %s: %w", d.dir, err)
		}
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return fmt.Errorf("wipe state %s: %w", d.dir, err)
	}
	if err := d.open(); err != nil {
		return err
	}
	if err := d.db.Set(metaKey(metaFormat), []byte{FormatVersion}, pebble.Sync); err != nil {
		return err
	}
	if err := d.ensureWidths(); err != nil {
		return err
	}
	d.resetCache(true)
	return nil
}

// Close writes the cache's dirty entries to Pebble and closes the
// database. Unsynced writes survive a process crash (they are in the OS
// cache) but not necessarily a machine crash; the checkpoint only ever claims
// synced data.
func (d *DB) Close() error {
	if d.db == nil {
		return nil
	}
	ferr := d.flushDirty()
	if err := d.closeDB(); err != nil {
		return err
	}
	return ferr
}

// IndexWrites is how many TTL index entries the flushes since Open set or
// deleted (for tests).
func (d *DB) IndexWrites() uint64 { return d.indexWrites }

// DiskSize is the database's size on disk in bytes.
func (d *DB) DiskSize() uint64 { return d.db.Metrics().DiskSpaceUsage() }

// Expired returns up to limit keys of store last updated before `before`
// (ms): the keys of the TTL index buckets that end at or before it, oldest
// bucket first. Every key returned was updated before `before`; a key
// updated before it but in the bucket holding it is returned by a later
// call, once `before` reaches the bucket's end (at most one bucket width
// later, see BucketWidth; exact for a store of the exact width).
//
// It reads Pebble's TTL index without flushing the cache when no dirty entry
// can be expired (every dirty value is at or after before): an index entry of
// a dirty key is then stale (the key was updated since, or deleted) and is
// skipped.
func (d *DB) Expired(store string, before int64, limit int) ([][]byte, error) {
	if w, err := d.widthOf(store); err != nil || w == noIndexWidth {
		return nil, err
	}
	if d.cache.minDirtyTS < before {
		if err := d.flushDirty(); err != nil {
			return nil, err
		}
	}
	lo := storePrefix(prefixIndex, store)
	// Index keys up to and including bucket end `before`.
	var hi []byte
	if e := encodeTS(before); e != math.MaxUint64 {
		hi = binary.BigEndian.AppendUint64(append([]byte(nil), lo...), e+1)
	} else {
		hi = prefixEnd(lo)
	}
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
		key := k[len(lo)+8:]
		if len(d.cache.dirty) > 0 {
			d.dkBuf = dataKey(d.dkBuf[:0], store, key)
			if d.cache.isDirty(d.dkBuf) {
				continue
			}
		}
		keys = append(keys, append([]byte(nil), key...))
	}
	return keys, it.Close()
}

// MaxTS returns the latest update time (ms) of any key in store, or false if
// the store is empty. It flushes the cache's dirty entries first. It reads
// one key when the store's persisted max time bound is still held by the key
// written with it (maxts.go), else the data keys of the index's last bucket
// (one for the exact width).
func (d *DB) MaxTS(store string) (int64, bool, error) {
	if err := d.flushDirty(); err != nil {
		return 0, false, err
	}
	if ts, ok, err := d.boundedMaxTS(store); err != nil || ok {
		return ts, ok, err
	}
	if w, err := d.widthOf(store); err != nil {
		return 0, false, err
	} else if w == noIndexWidth {
		// No index to start from: every data key.
		maxTS, found := int64(math.MinInt64), false
		err := d.scanDB(store, nil, nil, func(_, _ []byte, ts int64) error {
			maxTS, found = max(maxTS, ts), true
			return nil
		})
		if !found {
			maxTS = 0
		}
		return maxTS, found, err
	}
	lo := storePrefix(prefixIndex, store)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return 0, false, err
	}
	var end int64
	maxTS, found := int64(math.MinInt64), false
	for ok := it.Last(); ok; ok = it.Prev() {
		k := it.Key()
		if len(k) < len(lo)+8 {
			it.Close()
			return 0, false, &CorruptionError{Store: store, Key: append([]byte(nil), k...), Reason: "short index key"}
		}
		e := decodeTS(k[len(lo):])
		if found && e != end {
			break // past the last bucket holding a key
		}
		key := k[len(lo)+8:]
		d.dkBuf = dataKey(d.dkBuf[:0], store, key)
		_, ts, ok, err := d.getData(store, key, d.dkBuf)
		if err != nil {
			it.Close()
			return 0, false, err
		}
		if !ok {
			continue // not indexed data: the invariant says there is none
		}
		if !found || ts > maxTS {
			maxTS = ts
		}
		found, end = true, e
		if maxTS >= e-1 {
			break // the largest time the bucket can hold
		}
	}
	if !found {
		maxTS = 0
	}
	return maxTS, found, it.Close()
}

// Scan calls fn for every key of store in key order (from, to: optional
// bounds, to exclusive). fn must not retain its arguments. It flushes the
// cache's dirty entries first.
func (d *DB) Scan(store string, from, to []byte, fn func(key, value []byte, ts int64) error) error {
	if err := d.flushDirty(); err != nil {
		return err
	}
	return d.scanDB(store, from, to, fn)
}

// scanDB is Scan over what the database holds (the cache not flushed).
func (d *DB) scanDB(store string, from, to []byte, fn func(key, value []byte, ts int64) error) error {
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
