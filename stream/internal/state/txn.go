package state

import "errors"

// Txn batches writes in two levels, both reading their own writes:
//
//   - record level: Put and Delete take effect at once; Apply makes the
//     record's writes part of the round and Rollback undoes them — a task
//     applies a record's writes only if the whole record succeeded, so a
//     retried or dead-lettered record leaves no trace. An entry the record
//     itself linked (its first lookup of the key in the round) needs no undo
//     log: before the record it was the committed state, which its cache
//     entry still holds, so Rollback resets it from there. Only a write to
//     an entry of an earlier record of the round (a key updated twice in a
//     round, common in an exactly-once transaction spanning many rounds)
//     saves the entry's previous state in the undo log, replayed backwards;
//   - round level: Commit hands the round's writes to the DB's cache (dirty,
//     written to Pebble later in one batch; see stateCache), CommitThrough
//     writes them to Pebble at once in one atomic, unsynced batch;
//     DB.WriteCheckpoint syncs. Either way all of a round's writes, or
//     none (Discard), become the DB's state.
//
// One map holds every key: the DB cache's. A key the round touches (reads or
// writes) gets a txnEntry holding its state as the round sees it, linked
// from the key's cache entry (cacheEntry.txn) and listed in the Txn's slabs,
// so the per-record cost is one map probe (none when a Put follows a Get of
// the same key, the read-modify-write of every aggregate) plus, for a key the
// cache cannot answer, one database read per round (the cache then holds
// the key's Pebble state as a clean entry). Commit and Discard walk the
// slabs, not a map. With the cache disabled the map holds only the keys of
// the open round: their entries are removed at Commit and Discard.
//
// Invariants:
//   - a cache entry linked to a txnEntry (touched by the open round) is
//     never removed: not by eviction (which runs only after Commit, when
//     nothing is linked), not by a flush (markClean), not by a commit;
//   - the cache entry's own fields stay the committed state (what a flush
//     writes, what Expired judges) until Commit: uncommitted writes live in
//     the txnEntry only;
//   - at most one Txn of a DB has a round open (entries linked) at a time:
//     a task runs one Txn, a restore its own Txn only when the task's has
//     none. Wipe forgets the open round's entries.
//
// Entries come from chunked slabs and the data key is the cache entry's (no
// allocation for a key seen before). A Txn is not safe for concurrent use.
type Txn struct {
	d    *DB
	undo []undoEntry
	last *txnEntry // the entry of the latest lookup (nil after Commit/Discard)
	kbuf []byte    // scratch: data key of the current lookup
	// loadMiss: scratch of Load.
	loadMiss []int
	slabs    [][]txnEntry
	slab     int // current slab
	used     int // entries used in slabs[slab]
	// The current record: its number (txnEntry.rec of the entries it
	// linked) and the slab position of its first entry. Entries from that
	// position on are the record's own. rec wraps after 2^32 records; an
	// entry lives one round, so a round must span fewer (a task's round
	// is bounded by its commit interval and record limit).
	rec              uint32
	recSlab, recUsed int
	// epoch counts the rounds the Txn ended (Commit, CommitThrough,
	// Discard): see Epoch.
	epoch uint64
	// discards counts the rounds Discard dropped; commits the rounds
	// Commit or CommitThrough committed (an empty round included).
	discards, commits uint64
}

// txnEntry is a key's state as seen by the round.
type txnEntry struct {
	owner   *Txn
	ce      *cacheEntry // the key's cache entry: its committed state
	dk      string      // encoded data key (ce.dk): 'd' | len(store) | store | key
	store   string
	value   []byte
	ts      int64
	rec     uint32 // the record (Txn.rec) that linked the entry
	deleted bool
	written bool // false: a read, remembered so a later write needs no lookup
	// inserted: the round's lookup created the cache entry (a Discard
	// removes it again, leaving the cache as it was).
	inserted bool
	// cold: the round's last write of the key says it will not be read
	// again soon (PutAbsent, DeleteKnown, DeleteCold); the commit passes
	// it to the cache entry (cacheEntry.cold).
	cold bool
}

func (e *txnEntry) key() string { return e.dk[2+len(e.store):] }

// ErrConcurrentTxn is returned by a Txn reading or writing a key that
// another Txn of the DB touched in its open round (the invariant above is
// broken: the caller runs two rounds at once).
var ErrConcurrentTxn = errors.New("state: another transaction has a round open on this key")

// undoEntry is an entry's state before a write of the current record.
type undoEntry struct {
	e       *txnEntry
	value   []byte
	ts      int64
	deleted bool
	written bool
}

const slabSize = 256

// Begin starts a transaction. The DB keeps the Txn last discarded and hands
// it out again, with its slabs and buffers: a task begins one per round.
func (d *DB) Begin() *Txn {
	t := d.freeTxn
	if t != nil {
		d.freeTxn = nil
	} else {
		t = &Txn{d: d}
	}
	d.active = t
	return t
}

// Get returns the value and timestamp (ms) of key in store. The caller must
// not modify value.
func (t *Txn) Get(store string, key []byte) (value []byte, ts int64, found bool, err error) {
	e, err := t.lookup(store, key)
	if err != nil || e.deleted {
		return nil, 0, false, err
	}
	return e.value, e.ts, true, nil
}

// GetKnown is Get answered by the open round or the cache alone: known is
// false if neither can answer (an incomplete cache without an entry for the
// key), and then nothing is read or linked — the caller goes on with Get,
// or with KnowAbsent and Get if it knows the key is absent. A caller whose
// knowledge costs something to establish (a windowed store's filter of the
// windows it created) asks only for the keys the cache cannot answer.
func (t *Txn) GetKnown(store string, key []byte) (value []byte, ts int64, found, known bool, err error) {
	e, err := t.find(store, key, false)
	if err != nil || e == nil || e.deleted {
		return nil, 0, false, e != nil, err
	}
	return e.value, e.ts, true, true, nil
}

// lookup returns the key's entry, linking it to the key's cache entry the
// first time the round sees the key (reading the database if the cache
// cannot answer).
func (t *Txn) lookup(store string, key []byte) (*txnEntry, error) {
	return t.find(store, key, true)
}

// find is lookup; without read, a key the cache cannot answer gets no
// entry (nil, nil).
func (t *Txn) find(store string, key []byte, read bool) (*txnEntry, error) {
	if e := t.last; e != nil && e.store == store && len(e.dk) == 2+len(store)+len(key) &&
		e.dk[2+len(store):] == string(key) {
		return e, nil
	}
	t.kbuf = dataKey(t.kbuf[:0], store, key)
	c := &t.d.cache
	ce, ok := c.entries[string(t.kbuf)]
	if ok && ce.txn != nil {
		if ce.txn.owner != t {
			return nil, ErrConcurrentTxn
		}
		t.last = ce.txn
		return ce.txn, nil
	}
	if !ok {
		var v []byte
		var ts int64
		var found bool
		if !c.complete {
			if !read {
				return nil, nil
			}
			c.misses++
			var err error
			if v, ts, found, err = t.d.getData(store, key, t.kbuf); err != nil {
				return nil, err
			}
		}
		ce = c.insertClean(string(t.kbuf), v, ts, found)
	}
	return t.link(store, ce, !ok), nil
}

// link links the key's cache entry ce to the round (inserted: the round's
// lookup created it) and makes it the latest lookup's.
func (t *Txn) link(store string, ce *cacheEntry, inserted bool) *txnEntry {
	// The committed value is never modified in place (a commit replaces
	// it, Put replaces e.value), so the entry may share it.
	e := t.alloc()
	*e = txnEntry{owner: t, ce: ce, dk: ce.dk, store: store, value: ce.value, ts: ce.ts, rec: t.rec,
		deleted: !ce.found, inserted: inserted}
	ce.txn = e
	t.d.active = t
	t.last = e
	return e
}

// alloc returns a zeroed entry from the slabs; slabs are reused after
// Commit or Discard (when no entry is referenced any more).
func (t *Txn) alloc() *txnEntry {
	if t.slab < len(t.slabs) && t.used == len(t.slabs[t.slab]) {
		t.slab++
		t.used = 0
	}
	if t.slab == len(t.slabs) {
		t.slabs = append(t.slabs, make([]txnEntry, slabSize))
	}
	e := &t.slabs[t.slab][t.used]
	t.used++
	return e
}

// save records e's state before a write of the current record, unless the
// record linked e itself (Rollback resets those from the cache entry).
func (t *Txn) save(e *txnEntry) {
	if e.rec == t.rec {
		return
	}
	t.undo = append(t.undo, undoEntry{e: e, value: e.value, ts: e.ts, deleted: e.deleted, written: e.written})
}

// Put sets key in store to value. The key's update time becomes the larger
// of ts (ms) and its previous update time, so an out-of-order record does not
// make a key look older; Put returns that update time. value is retained
// (after the round commits, by the DB's cache): the caller must not modify
// it afterwards.
func (t *Txn) Put(store string, key, value []byte, ts int64) (int64, error) {
	e, err := t.lookup(store, key)
	if err != nil {
		return 0, err
	}
	if !e.deleted && e.ts > ts {
		ts = e.ts
	}
	t.save(e)
	e.value, e.ts, e.deleted, e.written, e.cold = value, ts, false, true, false
	return ts, nil
}

// PutAt is Put with update time ts exactly, also below the key's: the
// keys of a store whose derived entries follow their time
// (DerivedIndex.ByTime).
func (t *Txn) PutAt(store string, key, value []byte, ts int64) error {
	e, err := t.lookup(store, key)
	if err != nil {
		return err
	}
	t.save(e)
	e.value, e.ts, e.deleted, e.written, e.cold = value, ts, false, true, false
	return nil
}

// Delete removes key from store.
func (t *Txn) Delete(store string, key []byte) error {
	e, err := t.lookup(store, key)
	if err != nil {
		return err
	}
	t.save(e)
	e.value, e.ts, e.deleted, e.written, e.cold = nil, 0, true, true, false
	return nil
}

// Note returns the caller's note on key of store: a number kept on the
// key's cache entry, for the caller to read and set (the collapsed
// changelog keeps there the key's slot, sparing a map of its own keyed by
// the same bytes). It links the key to the round as Get does (no database
// read for a key the round touched); the pointer is valid until the round
// ends. A note is a hint, not a fact: it is zero when the entry is created
// and lost with it — when the cache evicts the entry, drops a deleted key
// (a complete cache), or, disabled, at every commit — and nothing else
// changes it.
func (t *Txn) Note(store string, key []byte) (*uint32, error) {
	e, err := t.lookup(store, key)
	if err != nil {
		return nil, err
	}
	return &e.ce.note, nil
}

// Epoch identifies the Txn's open round: it changes whenever the round's
// writes are committed or discarded, so a caller keeping notes about the
// open round's writes (written keys a database scan cannot see yet) knows
// when they stop being pending. Compare it together with the Txn's identity
// (Begin may hand out another Txn).
func (t *Txn) Epoch() uint64 { return t.epoch }

// Discards counts the rounds the Txn discarded: a round that ended without
// changing it was committed.
func (t *Txn) Discards() uint64 { return t.discards }

// Commits counts the rounds the Txn committed (Commit, CommitThrough). A
// caller that discards the Txn right after committing it (a task does, at
// the end of each round) reads the round's fate here: committed if Commits
// moved since the round began, whatever Discards did (a Discard after a
// Commit drops an empty round).
func (t *Txn) Commits() uint64 { return t.commits }

// Apply moves the record-level writes to the round.
func (t *Txn) Apply() error {
	t.nextRecord()
	return nil
}

// Rollback drops the record-level writes not yet applied.
func (t *Txn) Rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := t.undo[i]
		u.e.value, u.e.ts, u.e.deleted, u.e.written = u.value, u.ts, u.deleted, u.written
	}
	// The record's own entries were the committed state before it.
	t.eachFrom(t.recSlab, t.recUsed, func(e *txnEntry) {
		ce := e.ce
		e.value, e.ts, e.deleted, e.written = ce.value, ce.ts, !ce.found, false
	})
	t.nextRecord()
}

// nextRecord starts a new record: the entries linked so far belong to
// earlier records.
func (t *Txn) nextRecord() {
	if len(t.undo) > 0 {
		clear(t.undo)
		t.undo = t.undo[:0]
	}
	t.rec++
	t.recSlab, t.recUsed = t.slab, t.used
}

// Commit applies pending record-level writes and commits the round: its
// writes go to the DB's cache as dirty entries (written to Pebble by a later
// flush, see stateCache), or, with the cache disabled, straight to Pebble in
// one atomic, unsynced batch. DB.WriteCheckpoint makes them durable. The Txn
// stays usable.
func (t *Txn) Commit() error {
	if err := t.Apply(); err != nil {
		return err
	}
	if t.slab == 0 && t.used == 0 {
		t.commits++
		return nil
	}
	c := &t.d.cache
	if !c.enabled() {
		return t.CommitThrough()
	}
	t.commits++
	t.each(func(e *txnEntry) {
		ce := e.ce
		ce.txn = nil
		if e.written {
			c.commitDirty(ce, e.value, e.ts, !e.deleted)
		} else {
			c.dropAbsent(ce)
		}
		c.setCold(ce, e.dk, e.cold)
	})
	t.reset()
	return t.d.fitCache()
}

// CommitThrough is Commit writing the round straight to Pebble in one
// sorted batch (after flushing the cache's dirty entries) and recording it in
// the cache as clean. It suits bulk loads such as a restore, where a key is
// rarely written in two rounds and holding writes dirty saves nothing.
func (t *Txn) CommitThrough() error {
	if err := t.Apply(); err != nil {
		return err
	}
	if t.slab == 0 && t.used == 0 {
		t.commits++
		return nil
	}
	d := t.d
	// Once flushed, every cache entry is clean: its committed state is
	// Pebble's, the state the batch replaces.
	if err := d.flushDirty(); err != nil {
		return err
	}
	ws := d.writes[:0]
	t.each(func(e *txnEntry) {
		if e.written {
			ws = append(ws, write{dk: e.dk, value: e.value, ts: e.ts, found: !e.deleted,
				dbTS: e.ce.ts, dbFound: e.ce.found})
		}
	})
	err := d.writeBatch(ws)
	clear(ws)
	d.writes = ws[:0]
	if err != nil {
		return err
	}
	t.commits++
	c := &d.cache
	t.each(func(e *txnEntry) {
		ce := e.ce
		ce.txn = nil
		switch {
		case !c.enabled():
			c.remove(ce)
		case e.written:
			c.commitClean(ce, e.value, e.ts, !e.deleted)
			c.setCold(ce, e.dk, e.cold)
		default:
			c.dropAbsent(ce)
			c.setCold(ce, e.dk, e.cold)
		}
	})
	t.reset()
	return d.fitCache()
}

// Discard drops every write not committed and ends the transaction: t must
// not be used afterwards (Begin may hand it out again). The cache is left as
// it was before the round (entries the round added are removed: within its
// budget).
func (t *Txn) Discard() {
	t.discards++
	c := &t.d.cache
	t.each(func(e *txnEntry) {
		ce := e.ce
		ce.txn = nil
		if e.inserted {
			c.remove(ce)
		}
	})
	t.reset()
	if t.d.active == t {
		t.d.active = nil
	}
	t.d.freeTxn = t
}

// forget drops the round's entries without touching the cache entries
// (after the cache was emptied: Wipe).
func (t *Txn) forget() {
	t.reset()
}

// each calls f for every entry of the round, in allocation order.
func (t *Txn) each(f func(e *txnEntry)) { t.eachFrom(0, 0, f) }

// eachFrom calls f for every entry from position used of slabs[slab] on,
// in allocation order.
func (t *Txn) eachFrom(slab, used int, f func(e *txnEntry)) {
	for i := slab; i <= t.slab && i < len(t.slabs); i++ {
		n := len(t.slabs[i])
		if i == t.slab {
			n = t.used
		}
		j := 0
		if i == slab {
			j = used
		}
		for ; j < n; j++ {
			f(&t.slabs[i][j])
		}
	}
}

// reset forgets every entry and the record-level state; the slabs are
// zeroed for reuse.
func (t *Txn) reset() {
	t.epoch++
	t.last = nil
	for i := 0; i <= t.slab && i < len(t.slabs); i++ {
		clear(t.slabs[i])
	}
	t.slab, t.used = 0, 0
	t.nextRecord()
}
