package state

import (
	"slices"
	"unsafe"
)

// deriveSpan is one derived write of a batch: its data key is
// deriveBuf[start:end], derived from the write ws[w] of store ix.
type deriveSpan struct {
	start, end int
	w          int
	ix         *DerivedIndex
}

// isDerived reports whether the data key dk is a derived entry of a store
// declared with Derived.
func (d *DB) isDerived(dk []byte) bool {
	if len(d.derived) == 0 || len(dk) < 2 || len(dk) < 2+int(dk[1]) {
		return false
	}
	n := int(dk[1])
	ix := d.derived[string(dk[2:2+n])]
	return ix != nil && ix.Holds(dk[2+n:])
}

// deriveWrites appends to ws the writes of the derived entries of its
// writes (see DerivedIndex): a key written where Pebble did not hold it
// sets its entry, a deleted key deletes it. The appended writes' keys live
// in d.deriveBuf until the next call.
func (d *DB) deriveWrites(ws []write) []write {
	if len(d.derived) == 0 {
		return ws
	}
	buf, spans := d.deriveBuf[:0], d.deriveSpans[:0]
	var store string
	var ix *DerivedIndex
	for i := range ws {
		w := &ws[i]
		if w.found && w.dbFound {
			continue // Pebble holds the key, so its entry too
		}
		n := int(w.dk[1])
		if s := w.dk[2 : 2+n]; s != store || i == 0 {
			store, ix = s, d.derived[s]
		}
		if ix == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, w.dk[:2+n]...)
		key := w.dk[2+n:]
		if len(key) == 0 {
			buf = buf[:start]
			continue
		}
		buf = ix.Of(buf, unsafe.Slice(unsafe.StringData(key), len(key)))
		if len(buf) == start+2+n {
			buf = buf[:start]
			continue
		}
		spans = append(spans, deriveSpan{start: start, end: len(buf), w: i, ix: ix})
	}
	ws = slices.Grow(ws, len(spans)) // the caller leaves room: see flushDirty
	for _, s := range spans {
		w := ws[s.w]
		ws = append(ws, write{dk: unsafe.String(&buf[s.start], s.end-s.start), value: s.ix.Value, ts: w.ts,
			found: w.found, dbTS: w.dbTS, dbFound: w.dbFound, derived: true})
	}
	clear(spans)
	d.deriveBuf, d.deriveSpans = buf, spans[:0]
	return ws
}
