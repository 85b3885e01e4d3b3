package state

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// write is one key's new state for writeBatch, with the state Pebble holds
// (whose TTL index entry it replaces).
type write struct {
	dk      string // encoded data key
	value   []byte
	ts      int64
	found   bool // false: delete the key
	dbTS    int64
	dbFound bool
	derived bool // a derived entry's write (DerivedIndex)
}

// batchRecordOverhead bounds the bytes a Pebble batch adds to a record
// besides its key and value (kind and two varint lengths).
const batchRecordOverhead = 11

// keyOrder is a write's place in data-key order: the first 16 bytes of its
// data key past the prefix every key of the batch shares, as two big-endian
// integers (zero-padded), so that sorting compares integers held in the
// slice instead of chasing two string pointers per comparison. Keys equal
// in those bytes are compared in full.
type keyOrder struct {
	hi, lo uint64
	w      int32 // index in the writes
}

// indexOp is one TTL index write of a batch. Index keys order by store, then
// bucket end, then key: run numbers the stores in data-key order (the same
// order), pos is the write's rank in data-key order.
type indexOp struct {
	run int32
	pos int32
	end uint64 // bucket end, encoded (encodeTS)
	del bool
}

// writeBatch writes ws to Pebble in one atomic, unsynced batch; ws need not
// be sorted.
//
// The batch holds the data keys in key order, then the index keys in key
// order: Pebble inserts a batch into its memtable skiplist with a splice
// remembered from the previous key, so ordered keys are found near it
// instead of by a descent from the top. Both orders are established by
// sorting fixed-size integer records (keyOrder, indexOp), the flush of a
// large cache being dominated by its sorts otherwise.
func (d *DB) writeBatch(ws []write) error {
	if len(ws) == 0 {
		return nil
	}
	if n := len(ws); len(d.derived) > 0 {
		ws = d.deriveWrites(ws)
		defer clear(ws[n:]) // their keys are d.deriveBuf's
	}
	d.batches++ // a kept scan iterator's view is stale (TaskScan)
	order := d.sortWrites(ws)
	// At most two index writes per key; a flush of new keys makes one each.
	ops := slices.Grow(d.index[:0], len(ws))
	run := int32(0)
	size := 0
	var width int64
	// The store's max time bound (maxts.go) and the run's largest write.
	var bound *maxTSState
	best, bestPos := int64(noMaxTS), 0
	raises := d.raises[:0]
	endRun := func() {
		if bound != nil && bound.trusted && best != noMaxTS && (!bound.present || best > bound.ts) {
			dk := ws[order[bestPos].w].dk
			n := int(dk[1])
			raises = append(raises, maxTSUpdate{st: bound, store: dk[2 : 2+n], ts: best, key: dk[2+n:]})
			size += len(metaMaxTSPrefix) + 2*n + len(dk) + 8 + batchRecordOverhead
		}
		best = noMaxTS
	}
	for pos, o := range order {
		w := &ws[o.w]
		if pos == 0 || !sameStore(ws[order[pos-1].w].dk, w.dk) {
			if pos > 0 {
				run++
				endRun()
			}
			store := w.dk[2 : 2+int(w.dk[1])]
			var err error
			if width, err = d.widthOf(store); err != nil {
				return err
			}
			if bound, err = d.maxTSOf(store); err != nil {
				return err
			}
		}
		size += len(w.dk) + batchRecordOverhead
		if w.found {
			size += 8 + len(w.value)
			if w.ts > best && !w.derived {
				best, bestPos = w.ts, pos
			}
		}
		// An index entry whose bucket is unchanged is left as it is:
		// the write of a key updated within its bucket is the data key
		// alone.
		// A store without an index (NoTTLIndex): the data key alone.
		if width == noIndexWidth {
			continue
		}
		var oldEnd, newEnd int64
		if w.dbFound {
			oldEnd = bucketEnd(w.dbTS, width)
		}
		if w.found {
			newEnd = bucketEnd(w.ts, width)
		}
		unchanged := w.dbFound && w.found && oldEnd == newEnd
		if w.dbFound && !unchanged {
			ops = append(ops, indexOp{run: run, pos: int32(pos), end: encodeTS(oldEnd), del: true})
			size += len(w.dk) + 8 + batchRecordOverhead
		}
		if w.found && !unchanged {
			ops = append(ops, indexOp{run: run, pos: int32(pos), end: encodeTS(newEnd)})
			size += len(w.dk) + 8 + batchRecordOverhead
		}
	}
	endRun()
	// Index keys are distinct: a key's old and new entries differ in
	// bucket, and keys differ. ops is in pos order: a stable sort by
	// (run, end) orders it by (run, end, pos).
	ops = d.sortIndexOps(ops)
	b := d.db.NewBatchWithSize(size)
	defer b.Close()
	for _, o := range order {
		w := &ws[o.w]
		if !w.found {
			op := b.DeleteDeferred(len(w.dk))
			copy(op.Key, w.dk)
			if err := op.Finish(); err != nil {
				return err
			}
			continue
		}
		op := b.SetDeferred(len(w.dk), 8+len(w.value))
		copy(op.Key, w.dk)
		binary.BigEndian.PutUint64(op.Value, encodeTS(w.ts))
		copy(op.Value[8:], w.value)
		if err := op.Finish(); err != nil {
			return err
		}
	}
	for _, x := range ops {
		dk := ws[order[x.pos].w].dk
		var op *pebble.DeferredBatchOp
		if x.del {
			op = b.DeleteDeferred(len(dk) + 8)
		} else {
			op = b.SetDeferred(len(dk)+8, 0)
		}
		putIndexKeyOf(op.Key, dk, x.end)
		if err := op.Finish(); err != nil {
			return err
		}
	}
	for _, r := range raises {
		k := maxTSKey(r.store)
		op := b.SetDeferred(len(k), 8+len(r.key))
		copy(op.Key, k)
		appendMaxTSValue(op.Value[:0], r.ts, r.key)
		if err := op.Finish(); err != nil {
			return err
		}
	}
	n := len(ops)
	clear(ops)
	d.index = ops[:0]
	err := b.Commit(pebble.NoSync)
	if err == nil {
		for _, r := range raises {
			r.st.ts, r.st.key, r.st.present = r.ts, r.key, true
		}
	}
	clear(raises)
	d.raises = raises[:0]
	if err != nil {
		return fmt.Errorf("state commit %s: %w", d.dir, err)
	}
	d.indexWrites += uint64(n)
	return nil
}

// sortWrites returns the writes' order by data key (d.order, reused).
func (d *DB) sortWrites(ws []write) []keyOrder {
	// The prefix every key shares (the store's, and more: "zone-0...").
	first := ws[0].dk
	p := len(first)
	for i := 1; i < len(ws) && p > 0; i++ {
		dk := ws[i].dk
		n := min(p, len(dk))
		j := 0
		for j < n && dk[j] == first[j] {
			j++
		}
		p = j
	}
	order := slices.Grow(d.order[:0], len(ws))
	orHi, andHi, orLo, andLo := uint64(0), ^uint64(0), uint64(0), ^uint64(0)
	for i := range ws {
		hi, lo := keyWords(ws[i].dk[p:])
		order = append(order, keyOrder{hi: hi, lo: lo, w: int32(i)})
		orHi, andHi, orLo, andLo = orHi|hi, andHi&hi, orLo|lo, andLo&lo
	}
	// Radix sort on the 16 bytes, then a comparison sort of each run of
	// keys equal in them (keys longer than 16 bytes past the prefix).
	varying := varyingBytes(orLo^andLo) | varyingBytes(orHi^andHi)<<8
	order, d.orderTmp = radixSortKeys(order, d.orderTmp, varying)
	d.sortEqualRuns(ws, order, p, p+16)
	d.order = order[:0]
	return order
}

// radixRunMin is the smallest run of keys equal in 16 bytes that sortRun
// radix-sorts on their next 16 (a flush's close index entries share their
// end and the start of their key: thousands of them).
const radixRunMin = 256

// sortRun sorts run, keys equal in their bytes from p up to off, by their
// bytes from p on: a radix sort on the 16 bytes from off (then the same for
// each run of keys equal in those), or, for a short run or one holding a
// key that ends before off (zero-padded, its equal words do not mean equal
// bytes), a comparison sort.
func (d *DB) sortRun(ws []write, run []keyOrder, p, off int) {
	radix := len(run) >= radixRunMin
	for k := 0; radix && k < len(run); k++ {
		radix = len(ws[run[k].w].dk) >= off
	}
	if !radix {
		slices.SortFunc(run, func(a, b keyOrder) int {
			return strings.Compare(ws[a.w].dk[p:], ws[b.w].dk[p:])
		})
		return
	}
	orHi, andHi, orLo, andLo := uint64(0), ^uint64(0), uint64(0), ^uint64(0)
	for k := range run {
		hi, lo := keyWords(ws[run[k].w].dk[off:])
		run[k].hi, run[k].lo = hi, lo
		orHi, andHi, orLo, andLo = orHi|hi, andHi&hi, orLo|lo, andLo&lo
	}
	varying := varyingBytes(orLo^andLo) | varyingBytes(orHi^andHi)<<8
	sorted, spare := radixSortKeys(run, d.runTmp, varying)
	if &sorted[0] != &run[0] {
		copy(run, sorted)
		spare = sorted
	}
	d.runTmp = spare[:0]
	d.sortEqualRuns(ws, run, p, off+16)
}

// sortEqualRuns sorts each run of order's keys equal in the 16 bytes order
// was sorted by (keys equal in their bytes from p up to off) by their bytes
// from p on (sortRun).
func (d *DB) sortEqualRuns(ws []write, order []keyOrder, p, off int) {
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && order[j].hi == order[i].hi && order[j].lo == order[i].lo {
			j++
		}
		if j-i > 1 {
			d.sortRun(ws, order[i:j], p, off)
		}
		i = j
	}
}

// sortIndexOps sorts ops, given in pos order, by (run, end, pos): a stable
// sort by (run, end).
func (d *DB) sortIndexOps(ops []indexOp) []indexOp {
	// A flush of keys written within one bucket of one store has one end
	// and one run: nothing to sort.
	orEnd, andEnd, orRun, andRun := uint64(0), ^uint64(0), uint32(0), ^uint32(0)
	for i := range ops {
		orEnd, andEnd = orEnd|ops[i].end, andEnd&ops[i].end
		orRun, andRun = orRun|uint32(ops[i].run), andRun&uint32(ops[i].run)
	}
	varying := varyingBytes(orEnd^andEnd) | varyingBytes(uint64(orRun^andRun))<<8
	ops, d.indexTmp = radixSort(ops, d.indexTmp, 12, varying, func(x *indexOp, i int) byte {
		if i < 8 {
			return byte(x.end >> (8 * i))
		}
		return byte(uint32(x.run) >> (8 * (i - 8)))
	})
	return ops
}

// varyingBytes has bit i set if byte i (the least significant first) of
// diff, the XOR of the OR and the AND of a set of words, is not zero: if
// that byte differs between the words.
func varyingBytes(diff uint64) uint32 {
	var m uint32
	for i := range 8 {
		if byte(diff>>(8*i)) != 0 {
			m |= 1 << i
		}
	}
	return m
}

// keyWords returns the first 16 bytes of s as two big-endian integers,
// zero-padded: comparing them orders keys as bytes.Compare does, except
// that keys equal in them may still differ.
func keyWords(s string) (hi, lo uint64) {
	var buf [16]byte
	copy(buf[:], s)
	return binary.BigEndian.Uint64(buf[:8]), binary.BigEndian.Uint64(buf[8:])
}

// sameStore reports whether two data keys belong to the same store.
func sameStore(a, b string) bool {
	n := int(a[1])
	return len(b) >= 2+n && a[:2+n] == b[:2+n]
}

// putIndexKeyOf writes the index key of the data key dk at the encoded
// bucket end into dst, which has length len(dk)+8.
func putIndexKeyOf(dst []byte, dk string, end uint64) {
	n := int(dk[1])
	dst[0] = prefixIndex
	copy(dst[1:], dk[1:2+n])
	binary.BigEndian.PutUint64(dst[2+n:], end)
	copy(dst[2+n+8:], dk[2+n:])
}
