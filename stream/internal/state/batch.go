package state

import (
	"bytes"
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
}

// batchRecordOverhead bounds the bytes a Pebble batch adds to a record
// besides its key and value (kind and two varint lengths).
const batchRecordOverhead = 11

// indexOp is one TTL index write of a batch: the key is idxBuf[start:end].
type indexOp struct {
	start, end int
	del        bool
}

// writeBatch writes ws to Pebble in one atomic, unsynced batch (sorting ws
// unless it is sorted already).
//
// The batch holds the data keys in key order, then the index keys in key
// order: Pebble inserts a batch into its memtable skiplist with a splice
// remembered from the previous key, so ordered keys are found near it
// instead of by a descent from the top.
func (d *DB) writeBatch(ws []write) error {
	if len(ws) == 0 {
		return nil
	}
	cmp := func(a, b write) int { return strings.Compare(a.dk, b.dk) }
	if !slices.IsSortedFunc(ws, cmp) {
		slices.SortFunc(ws, cmp)
	}
	// Size the batch up front: data key, ts and value, and up to two
	// index keys (the data key plus a ts) per write, each with its record
	// header; growing a large batch by doubling copies it each time.
	size := 0
	for _, w := range ws {
		size += 3*len(w.dk) + len(w.value) + 4*8 + 3*batchRecordOverhead
	}
	b := d.db.NewBatchWithSize(size)
	defer b.Close()
	d.index = d.index[:0]
	d.idxBuf = d.idxBuf[:0]
	addIndex := func(dk string, ts int64, del bool) {
		start := len(d.idxBuf)
		d.idxBuf = appendIndexKeyOf(d.idxBuf, dk, ts)
		d.index = append(d.index, indexOp{start: start, end: len(d.idxBuf), del: del})
	}
	for _, w := range ws {
		// An index entry at an unchanged ts is left as it is.
		unchanged := w.dbFound && w.found && w.dbTS == w.ts
		if w.dbFound && !unchanged {
			addIndex(w.dk, w.dbTS, true)
		}
		d.keyBuf = append(d.keyBuf[:0], w.dk...)
		if !w.found {
			if err := b.Delete(d.keyBuf, nil); err != nil {
				return err
			}
			continue
		}
		d.valBuf = binary.BigEndian.AppendUint64(d.valBuf[:0], encodeTS(w.ts))
		d.valBuf = append(d.valBuf, w.value...)
		if err := b.Set(d.keyBuf, d.valBuf, nil); err != nil {
			return err
		}
		if !unchanged {
			addIndex(w.dk, w.ts, false)
		}
	}
	// Index keys are distinct: a key's old and new entries differ in ts,
	// and keys differ.
	slices.SortFunc(d.index, func(a, b indexOp) int {
		return bytes.Compare(d.idxBuf[a.start:a.end], d.idxBuf[b.start:b.end])
	})
	for _, op := range d.index {
		k := d.idxBuf[op.start:op.end]
		var err error
		if op.del {
			err = b.Delete(k, nil)
		} else {
			err = b.Set(k, nil, nil)
		}
		if err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("state commit %s: %w", d.dir, err)
	}
	return nil
}

// appendIndexKeyOf appends the index key of the data key dk at ts to dst.
func appendIndexKeyOf(dst []byte, dk string, ts int64) []byte {
	n := int(dk[1])
	dst = append(dst, prefixIndex)
	dst = append(dst, dk[1:2+n]...)
	dst = binary.BigEndian.AppendUint64(dst, encodeTS(ts))
	return append(dst, dk[2+n:]...)
}
