package state

// Txn batches writes in two levels, both reading their own writes:
//
//   - record level: Put and Delete take effect at once, and each first
//     saves the entry's previous state in an undo log; Apply forgets the
//     undo log (the writes join the round) and Rollback replays it
//     backwards — a task applies a record's writes only if the whole record
//     succeeded, so a retried or dead-lettered record leaves no trace;
//   - round level: Commit hands the round's writes to the DB's cache (dirty,
//     written to Pebble later in one batch; see stateCache), CommitThrough
//     writes them to Pebble at once in one atomic, unsynced batch;
//     DB.WriteCheckpoint syncs. Either way all of a round's writes, or
//     none (Discard), become the DB's state.
//
// One map keyed by the encoded data key holds every key the round touched
// (read or written), so the per-record cost is one map probe (none when a
// Put follows a Get of the same key, the read-modify-write of every
// aggregate) plus, for a key the DB's cache cannot answer, one database read
// per round. Entries come from chunked slabs and the data key is built in a
// reused buffer (or shared with the cache): a key seen before costs no
// allocation. A Txn is not safe for concurrent use.
type Txn struct {
	d       *DB
	entries map[string]*txnEntry
	undo    []undoEntry
	last    *txnEntry // the entry of the latest lookup (nil after Commit/Discard)
	kbuf    []byte    // scratch: data key of the current lookup
	slabs   [][]txnEntry
	slab    int // current slab
	used    int // entries used in slabs[slab]
}

// txnEntry is a key's state as seen by the transaction, and its state in the
// database when the round began (prevTS/prevFound, for the TTL index).
type txnEntry struct {
	dk      string // encoded data key: 'd' | len(store) | store | key
	store   string
	value   []byte
	ts      int64
	deleted bool
	written bool // false: a read remembered so a later write needs no lookup

	prevTS    int64
	prevFound bool
	// cached: the database state (prevTS, prevFound, and the value read)
	// came from, and so is already in, the DB's read cache.
	cached bool
}

func (e *txnEntry) key() string { return e.dk[2+len(e.store):] }

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
// it out again, with its map, slabs and buffers: a task begins one per
// round.
func (d *DB) Begin() *Txn {
	if t := d.freeTxn; t != nil {
		d.freeTxn = nil
		return t
	}
	return &Txn{d: d, entries: map[string]*txnEntry{}}
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

// lookup returns the key's entry, reading it from the database (and
// remembering it) the first time the round sees the key.
func (t *Txn) lookup(store string, key []byte) (*txnEntry, error) {
	if e := t.last; e != nil && e.store == store && len(e.dk) == 2+len(store)+len(key) &&
		e.dk[2+len(store):] == string(key) {
		return e, nil
	}
	t.kbuf = dataKey(t.kbuf[:0], store, key)
	if e, ok := t.entries[string(t.kbuf)]; ok {
		t.last = e
		return e, nil
	}
	var v []byte
	var ts int64
	var found bool
	c, cached := t.d.cache.get(t.kbuf)
	dk := c.dk // set on a cache hit: no allocation for the key
	if cached {
		// A cached value is never modified in place (Commit replaces
		// it, Put replaces e.value), so the entry may share it.
		v, ts, found = c.value, c.ts, c.found
	} else {
		var err error
		if v, ts, found, err = t.get(store, key, t.kbuf); err != nil {
			return nil, err
		}
	}
	if dk == "" {
		dk = string(t.kbuf)
	}
	e := t.alloc()
	*e = txnEntry{dk: dk, store: store, value: v, ts: ts, deleted: !found, prevTS: ts, prevFound: found,
		cached: cached}
	t.entries[e.dk] = e
	t.last = e
	return e, nil
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

func (t *Txn) get(store string, key, dk []byte) (value []byte, ts int64, found bool, err error) {
	t.d.cache.misses++
	return t.d.getData(store, key, dk)
}

func (t *Txn) save(e *txnEntry) {
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
	e.value, e.ts, e.deleted, e.written = value, ts, false, true
	return ts, nil
}

// Delete removes key from store.
func (t *Txn) Delete(store string, key []byte) error {
	e, err := t.lookup(store, key)
	if err != nil {
		return err
	}
	t.save(e)
	e.value, e.ts, e.deleted, e.written = nil, 0, true, true
	return nil
}

// Apply moves the record-level writes to the round.
func (t *Txn) Apply() error {
	clear(t.undo)
	t.undo = t.undo[:0]
	return nil
}

// Rollback drops the record-level writes not yet applied.
func (t *Txn) Rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := t.undo[i]
		u.e.value, u.e.ts, u.e.deleted, u.e.written = u.value, u.ts, u.deleted, u.written
	}
	clear(t.undo)
	t.undo = t.undo[:0]
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
	if len(t.entries) == 0 {
		return nil
	}
	c := &t.d.cache
	if !c.enabled() {
		return t.CommitThrough()
	}
	for _, e := range t.entries {
		switch {
		case e.written:
			c.setDirty(e.dk, e.value, e.ts, !e.deleted, e.prevTS, e.prevFound)
		case !e.cached:
			// A read of Pebble: remember it for later rounds.
			c.setClean(e.dk, e.value, e.ts, !e.deleted)
		}
	}
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
	if len(t.entries) == 0 {
		return nil
	}
	d := t.d
	// Once flushed, Pebble holds every key's state before this round:
	// the entries' prev state.
	if err := d.flushDirty(); err != nil {
		return err
	}
	ws := d.writes[:0]
	for _, e := range t.entries {
		if e.written {
			ws = append(ws, write{dk: e.dk, value: e.value, ts: e.ts, found: !e.deleted,
				dbTS: e.prevTS, dbFound: e.prevFound})
		}
	}
	err := d.writeBatch(ws)
	clear(ws)
	d.writes = ws[:0]
	if err != nil {
		return err
	}
	for _, e := range t.entries {
		switch {
		case e.written:
			d.cache.setWritten(e.dk, e.value, e.ts, !e.deleted)
		case !e.cached:
			d.cache.setClean(e.dk, e.value, e.ts, !e.deleted)
		}
	}
	t.reset()
	return d.fitCache()
}

// Discard drops every write not committed and ends the transaction: t must
// not be used afterwards (Begin may hand it out again).
func (t *Txn) Discard() {
	clear(t.undo)
	t.undo = t.undo[:0]
	t.reset()
	t.d.freeTxn = t
}

// reset forgets every entry; the slabs are zeroed for reuse.
func (t *Txn) reset() {
	clear(t.entries)
	t.last = nil
	for i := 0; i <= t.slab && i < len(t.slabs); i++ {
		clear(t.slabs[i])
	}
	t.slab, t.used = 0, 0
}
