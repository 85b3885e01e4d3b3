package state

import (
	"bytes"
	"slices"
	"unsafe"
)

// deriveSpan is one derived write of a batch: its data key is
// deriveBuf[start:end], derived from the write ws[w] of store ix; found:
// the entry is set (else deleted).
type deriveSpan struct {
	start, end int
	w          int
	ix         *DerivedIndex
	found      bool
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
// sets its entry, a deleted key deletes it, and (ByTime) a key written at
// another time than Pebble held moves it. The appended writes' keys live
// in d.deriveBuf until the next call.
func (d *DB) deriveWrites(ws []write) []write {
	if len(d.derived) == 0 {
		return ws
	}
	buf, spans := d.deriveBuf[:0], d.deriveSpans[:0]
	var store string
	var ix *DerivedIndex
	// entry appends the entry of key at ts (if it has one) as a write of
	// ws[i]; it reports whether it did.
	entry := func(i int, prefix, key string, ts int64, found bool) bool {
		start := len(buf)
		buf = append(buf, prefix...)
		buf = ix.Of(buf, unsafe.Slice(unsafe.StringData(key), len(key)), ts)
		if len(buf) == start+len(prefix) {
			buf = buf[:start]
			return false
		}
		spans = append(spans, deriveSpan{start: start, end: len(buf), w: i, ix: ix, found: found})
		return true
	}
	for i := range ws {
		w := &ws[i]
		n := int(w.dk[1])
		if s := w.dk[2 : 2+n]; s != store || i == 0 {
			store, ix = s, d.derived[s]
		}
		if ix == nil || w.found && w.dbFound && (!ix.ByTime || w.ts == w.dbTS) {
			continue // no entries, or Pebble holds the key's entry
		}
		prefix, key := w.dk[:2+n], w.dk[2+n:]
		if len(key) == 0 {
			continue
		}
		if !ix.ByTime {
			entry(i, prefix, key, w.ts, w.found)
			continue
		}
		// ByTime: delete the entry of the time Pebble held, set the new
		// one; an entry both derive is left as it is.
		del := w.dbFound && entry(i, prefix, key, w.dbTS, false)
		if w.found && entry(i, prefix, key, w.ts, true) && del {
			o, nw := spans[len(spans)-2], spans[len(spans)-1]
			if bytes.Equal(buf[o.start:o.end], buf[nw.start:nw.end]) {
				buf, spans = buf[:o.start], spans[:len(spans)-2]
			}
		}
	}
	ws = slices.Grow(ws, len(spans)) // the caller leaves room: see flushDirty
	for _, s := range spans {
		w := ws[s.w]
		ws = append(ws, write{dk: unsafe.String(&buf[s.start], s.end-s.start), value: s.ix.Value, ts: w.ts,
			found: s.found, dbTS: w.dbTS, dbFound: w.dbFound, derived: true})
	}
	clear(spans)
	d.deriveBuf, d.deriveSpans = buf, spans[:0]
	return ws
}
