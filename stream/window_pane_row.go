package stream

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/window"
)

// The row form of the pane layout (window_pane.go): when a window holds at
// most paneRowMax panes, a key's live panes are one store entry, its row,
// and its close index is one entry, the key's next window to close (as
// Flink's slicing window operator registers the next window's timer when
// one fires). A record reads and writes one entry; a close reads one entry,
// combines the window's panes, drops the panes only it held and writes the
// row back with its next window. One close scan emits a key's windows
// together, in end order (a scan reaching several ends emits key by key,
// not every key's first window first).
//
//	'p' | key                -> the row, at update time next - 1: 0x01 (format)
//	                            | next (8 bytes BE, int64: the end of the key's
//	                            next window to close)
//	                            | per pane, in start order: start (8 bytes BE, int64)
//	                            | uvarint length | partial aggregate (its codec's bytes)
//	'c' | end | key | start  -> 0x01: derived by the database from a row at time
//	                            end - 1 (rowCloseIndex); never in the store cache
//	'm'                      -> the watermark (as in window_agg.go)
//
// ('p' is a tag no earlier layout wrote: a changelog holding the per-pane
// entries of state format 3 for a store now in row form is refused with an
// error naming the store, applyRowChangelog.)
//
// Invariants (besides window_agg.go's; windows close in end order):
//   - a row holds a pane only while the pane's last window (the greatest
//     start <= the pane's start) is open: a record writes its pane only if
//     one of its windows is open, and the close of a window drops the panes
//     starting before its start + advance (it was their last window). A row
//     without panes is deleted;
//   - a row's next is the end of the first window, among the open ones,
//     that holds one of its panes: a record lowers it to its first open
//     window's end; a close of the window ending at next closes every
//     window of the row the close scan reaches (end <= its bound) and moves
//     next to the first later window holding a remaining pane. Every window
//     holding a pane, between next and the last pane, is open;
//   - a row's update time is next - 1 (Txn.PutAt, also when next moves
//     back), and the database derives the row's 'c' entry from it
//     (state.DerivedIndex.ByTime, storeSpec.indexedByDB): the batch that
//     writes the row to Pebble at another time moves the entry, the one
//     that deletes the row deletes it. So the store cache holds rows only,
//     and Pebble holds for every row it holds exactly the entry of the next
//     it holds. A row whose next moved since Pebble last got it is found by
//     the scans in the notes (createdRows, pendingRows: the entry at its
//     new next, noted when it moved, kept until a flush); the entry Pebble
//     still holds for it is stale (its end is below the row's next) and the
//     close skips it. A close re-notes the row past the scan's bound (so
//     o.scanned's invariant holds);
//   - the changelog holds no 'c' entry: a restore writes a row at its
//     next - 1, read from the row (applyRowChangelog), and the database
//     derives the entry, so every prefix of the changelog gives each row
//     its entry;
//   - a close logs a row only when it deletes it (a tombstone): the row it
//     writes back differs from the row before by closed windows only, which
//     the mark 'm' the close writes covers (logged after the rows of its
//     flush, window_agg.go). So the changelog holds, per row, a state the
//     row had, possibly with windows the mark covers: a close of such a
//     window (end + closeDelta <= closedBy, the mark load read) drops its
//     panes without emitting it, and queries skip it (rowWindows). In the
//     store itself every row is current;
//   - a window's result is its panes' partials combined with merge in pane
//     (time) order (see window_pane.go for what that asks of the merge
//     function).
//
// The bound: a row holds a key's live panes, about size/gcd + 1 of them in
// order, and a record rewrites the row (its bytes, not its aggregates: only
// the record's pane is decoded), and every changelog flush writes each
// updated row whole. With paneRowMax panes a window of 16-byte partials is
// a row of under 1 KiB; beyond it, the per-pane entries of window_pane.go
// write less per record.

const (
	tagRow     = 'p'
	rowFormat  = 1
	paneRowMax = 32
	rowHeader  = 1 + 8
)

// rowKey appends the row key of encoded key kb.
func rowKey(dst, kb []byte) []byte {
	return timekey.AppendKey(append(dst, tagRow), kb)
}

// rowPane is one pane of a decoded row; agg shares the row's bytes.
type rowPane struct {
	start int64
	agg   []byte
}

// decodeRow appends v's panes to dst and returns the row's next. It
// accepts only what encodeRow writes: panes in increasing start order,
// lengths in their shortest uvarint.
func decodeRow(dst []rowPane, v []byte) (int64, []rowPane, error) {
	if len(v) < rowHeader || v[0] != rowFormat {
		return 0, dst, errors.New("pane row without its header")
	}
	next := int64(binary.BigEndian.Uint64(v[1:]))
	first := len(dst)
	for b := v[rowHeader:]; len(b) > 0; {
		if len(b) < 8 {
			return 0, dst, errors.New("pane row: truncated pane")
		}
		start := int64(binary.BigEndian.Uint64(b))
		if len(dst) > first && start <= dst[len(dst)-1].start {
			return 0, dst, errors.New("pane row: panes out of order")
		}
		n, w := binary.Uvarint(b[8:])
		if w <= 0 || uint64(len(b)-8-w) < n || w != uvarintSize(n) {
			return 0, dst, errors.New("pane row: truncated pane")
		}
		b = b[8+w:]
		dst = append(dst, rowPane{start: start, agg: b[:n:n]})
		b = b[n:]
	}
	return next, dst, nil
}

// encodeRow returns a row's value, sized exactly (the cache keeps it).
func encodeRow(next int64, panes []rowPane) []byte {
	n := rowHeader
	for _, p := range panes {
		n += 8 + uvarintSize(uint64(len(p.agg))) + len(p.agg)
	}
	v := make([]byte, 0, n)
	v = append(v, rowFormat)
	v = binary.BigEndian.AppendUint64(v, uint64(next))
	for _, p := range panes {
		v = binary.BigEndian.AppendUint64(v, uint64(p.start))
		v = binary.AppendUvarint(v, uint64(len(p.agg)))
		v = append(v, p.agg...)
	}
	return v
}

// uvarintSize is uvarintLen without its allocation.
func uvarintSize(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// rowCorrupt is the error of a row that does not decode.
func (o *windowOp[K, V, A]) rowCorrupt(rk []byte, err error) error {
	return &fatalError{&state.CorruptionError{Store: o.name, Key: slices.Clone(rk), Reason: err.Error()}}
}

// nextWindowEnd is the end of the first window holding the pane starting
// at p0 that ends after closed (d: time windows in pane layout).
func (d *windowDecl) nextWindowEnd(p0, closed int64) int64 {
	size, adv := d.tw.Size.Milliseconds(), d.tw.Advance.Milliseconds()
	lo := satAddMs(max(p0, closed), 1)
	// Window ends lie on the grid offset + size + k*advance.
	return satAddMs(lo, floorModMs(d.tw.Offset.Milliseconds()+size-lo, adv))
}

// rowIndexKey is the 'c' entry of the window of a row ending at next.
func (o *windowOp[K, V, A]) rowIndexKey(kb []byte, next int64) []byte {
	return timekey.IndexKey(nil, kb, satAddMs(next, -o.d.tw.Size.Milliseconds()), next)
}

// processRow folds a record into its pane of its key's row.
func (o *windowOp[K, V, A]) processRow(r Record[K, V], kb []byte, ts int64) error {
	first, done, err := o.assignPane(r, kb, ts)
	if done || err != nil {
		return err
	}
	if first > 0 {
		// The record's pane is in those windows too: a close a burst left
		// pending runs first, without it (window_burst.go).
		if err := o.rowCloseTouched(kb, o.wins[first-1]); err != nil {
			return err
		}
	}
	open := o.wins[first:]
	p := o.d.tw.PaneOf(ts)
	rk := rowKey(nil, kb)
	v, found, err := o.get(rk)
	if err != nil {
		return err
	}
	next := int64(math.MaxInt64)
	panes := o.rowPanes[:0]
	defer func() { clear(panes); o.rowPanes = panes[:0] }()
	if found {
		if next, panes, err = decodeRow(panes, v); err != nil {
			return o.rowCorrupt(rk, err)
		}
	}
	i, have := slices.BinarySearchFunc(panes, p.Start, func(rp rowPane, s int64) int { return cmp.Compare(rp.start, s) })
	var agg A
	if have {
		if agg, err = o.agg.Decode(panes[i].agg); err != nil {
			return fmt.Errorf("store %s: decode stored aggregate: %w", o.name, err)
		}
	}
	if agg, err = o.fns.add(r, agg, have); err != nil {
		return err
	}
	ab, err := o.agg.Encode(agg)
	if err != nil {
		return fmt.Errorf("store %s: encode aggregate: %w", o.name, err)
	}
	if have {
		panes[i].agg = ab
	} else {
		panes = slices.Insert(panes, i, rowPane{start: p.Start, agg: ab})
	}
	if first := open[0].End; first < next {
		// The row's close entry moves with it (rowCloseIndex); until the
		// row reaches Pebble, the scans find it in the notes.
		next = first
		o.createdRows = append(o.createdRows, o.rowIndexKey(kb, next))
		o.nextEnd[0] = min(o.nextEnd[0], next)
	}
	if !found {
		// A new row: deleted before the next flush, it needs no
		// changelog record.
		o.cl.write(rk, nil, next-1, true)
	}
	v = encodeRow(next, panes)
	if err := o.t.txn.PutAt(o.name, rk, v, next-1); err != nil {
		return &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
	}
	o.cl.write(rk, v, next-1, false)
	return nil
}

// rowResult is a window a row close emits.
type rowResult[A any] struct {
	w   window.Window
	agg A
}

// closeRow handles the close entry of key's row for window w, found by a
// close scan (in the database or the notes) or, rec, by a record
// (rowCloseTouched, window_burst.go: the close is part of the record being
// processed, as in closeWindow). It closes every window of the row ending
// by the scan's bound (o.closeTo), emitting their results, and writes the
// row back with its next window, or deletes it when no pane is left. An
// entry of a row whose next is past w is stale (the database moves a
// row's entry when it writes the row: until then the entry of the next it
// held stays) and is skipped.
func (o *windowOp[K, V, A]) closeRow(key []byte, w window.Window, rec bool) (bool, error) {
	t := o.t
	ts := o.windowTime(w)
	rk := rowKey(nil, key)
	v, found, err := o.get(rk)
	if err != nil || !found {
		return false, unfatal(err)
	}
	panes := o.rowPanes[:0]
	defer func() { clear(panes); o.rowPanes = panes[:0] }()
	next, panes, err := decodeRow(panes, v)
	if err != nil {
		return false, unfatal(o.rowCorrupt(rk, err))
	}
	if next > w.End {
		return false, nil // stale
	}
	size, adv := o.d.tw.Size.Milliseconds(), o.d.tw.Advance.Milliseconds()
	res := o.rowOut[:0]
	defer func() { clear(res); o.rowOut = res[:0] }()
	for next <= o.closeTo && len(panes) > 0 {
		start := satAddMs(next, -size)
		var acc A
		have, drop := false, 0
		for _, rp := range panes {
			if rp.start >= next {
				break
			}
			if rp.start < satAddMs(start, adv) {
				drop++ // w is its last window
			}
			if rp.start < start {
				continue // not w's (no such pane: see the invariants)
			}
			a, err := o.agg.Decode(rp.agg)
			if err != nil {
				return false, fmt.Errorf("store %s: decode stored aggregate: %w", o.name, err)
			}
			if !have {
				acc = a
			} else if acc, err = o.fns.merge(acc, a); err != nil {
				return false, fmt.Errorf("store %s: merge panes: %w", o.name, err)
			}
			have = true
		}
		// A window the store's mark covers was emitted before the row
		// was last logged (see the invariants).
		if have && !o.rowClosedBefore(key, next) {
			res = append(res, rowResult[A]{w: window.Window{Start: start, End: next}, agg: acc})
		}
		panes = panes[drop:]
		if len(panes) == 0 {
			break
		}
		n := o.d.nextWindowEnd(panes[0].start, next)
		if n <= next {
			break // the end of the representable times
		}
		next = n
	}
	if len(panes) == 0 {
		if err := t.txn.DeleteCold(o.name, rk); err != nil {
			return false, fmt.Errorf("store %s: %w", o.name, err)
		}
		o.clWrite(rec, rk, nil, ts, false)
	} else {
		nv := encodeRow(next, panes)
		if err := t.txn.PutAt(o.name, rk, nv, next-1); err != nil {
			return false, fmt.Errorf("store %s: %w", o.name, err)
		}
		// Not logged: the mark the close writes covers it — but in a
		// burst, whose mark covers only the windows up to its cursor
		// (window_burst.go), and for a record, which writes it anyway.
		if rec || o.burstScan {
			o.clWrite(rec, rk, nv, next-1, false)
		}
		o.createdRows = append(o.createdRows, o.rowIndexKey(key, next))
		o.closeNext = min(o.closeNext, next)
		if rec {
			o.nextEnd[0] = min(o.nextEnd[0], next)
		}
	}
	if !rec {
		if err := t.txn.Apply(); err != nil {
			return false, err
		}
	}
	if len(res) == 0 || o.next == nil {
		return true, nil
	}
	k, err := o.key.Decode(key)
	if err != nil {
		return true, fmt.Errorf("store %s: decode stored key: %w", o.name, err)
	}
	for _, rr := range res {
		wts := o.windowTime(rr.w)
		out := Record[Windowed[K], A]{Key: o.windowedKey(k, rr.w), Value: rr.agg, Timestamp: time.UnixMilli(wts)}
		if rec {
			if err := o.next(out); err != nil {
				return true, err
			}
			continue
		}
		// The dead-letter origin (the window as a per-window store would
		// hold it) is built only if the emission fails.
		err := o.emitResultOf(out, func() (*kgo.Record, error) {
			wv, err := o.encodeWindow(windowState[A]{agg: rr.agg})
			if err != nil {
				return nil, unfatal(err)
			}
			return o.origin(timekey.WindowKey(nil, key, rr.w.Start, rr.w.End), wv, wts), nil
		})
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

// applyRowChangelog is applyStoreChangelog for a store in row form: a row
// is written at time next - 1, its next read from the row itself (not the
// record's timestamp), so the database derives its close entry at next
// (rowCloseIndex). A record of another layout's window entries is refused.
func applyRowChangelog(txn *state.Txn, spec *storeSpec, r *kgo.Record) error {
	if len(r.Key) == 0 {
		return applyChangelog(txn, spec.name, r)
	}
	switch r.Key[0] {
	case timekey.TagWindow:
		return fmt.Errorf("store %s: the changelog holds a pane entry of the per-pane layout (state format 3), "+
			"which this version keeps in one row per key: give the store a new name (or delete its changelog "+
			"topic) to rebuild it: %w", spec.name,
			&state.CorruptionError{Store: spec.name, Key: slices.Clone(r.Key), Reason: "per-pane entry in a row store"})
	case timekey.TagIndex:
		return nil // derived by the database; no changelog holds one
	case tagRow:
		if r.Value == nil {
			return txn.Delete(spec.name, r.Key)
		}
		if len(r.Value) < rowHeader || r.Value[0] != rowFormat {
			return &state.CorruptionError{Store: spec.name, Key: slices.Clone(r.Key), Reason: "pane row without its header"}
		}
		next := int64(binary.BigEndian.Uint64(r.Value[1:]))
		// Copied out of the fetch buffer, as applyChangelog does.
		return txn.PutAt(spec.name, r.Key, append([]byte{}, r.Value...), next-1)
	}
	return applyChangelog(txn, spec.name, r)
}

// rowCloseIndex is the close index of a store in row form (window size
// size, ms), derived by its database (state.Derived): row 'p' | key at
// time next - 1 has the entry 'c' | next | key | next - size, the key's
// next window to close.
func rowCloseIndex(size int64) state.DerivedIndex {
	return state.DerivedIndex{
		Of: func(dst, rk []byte, ts int64) []byte {
			if len(rk) < 2 || rk[0] != tagRow {
				return dst // not a row (the mark)
			}
			end := ts + 1
			dst = append(dst, timekey.TagIndex)
			dst = timekey.AppendTime(dst, end)
			dst = append(dst, rk[1:]...)
			return timekey.AppendTime(dst, satAddMs(end, -size))
		},
		ByTime: true,
		Holds:  func(key []byte) bool { return len(key) > 0 && key[0] == timekey.TagIndex },
		Value:  indexValue,
	}
}

// rowWindows appends to dst the open windows of a row (key kb, value v),
// each as the entry a store with one entry per window would hold
// (uvarint 0 | the combined aggregate), in window key order (end, then
// start: one size, so end order). A window the store's mark closedBy
// covers is closed (a row restored from the changelog may still hold it).
func rowWindows(dst []StoreEntry, d *windowDecl, store string, kb, v []byte, closedBy int64) ([]StoreEntry, error) {
	next, panes, err := decodeRow(nil, v)
	if err != nil {
		return dst, &state.CorruptionError{Store: store, Key: rowKey(nil, kb), Reason: err.Error()}
	}
	if len(panes) == 0 {
		return dst, nil
	}
	size, delta := d.tw.Size.Milliseconds(), d.closeDelta()
	last := panes[len(panes)-1].start
	var vals [][]byte
	for end := next; ; {
		start := satAddMs(end, -size)
		if start > last {
			break
		}
		vals = vals[:0]
		for _, p := range panes {
			if p.start >= start && p.start < end {
				vals = append(vals, append([]byte{0}, p.agg...))
			}
		}
		if len(vals) > 0 && satAddMs(end, delta) > closedBy {
			wv, err := d.combine(vals)
			if err != nil {
				return dst, fmt.Errorf("store %s: combine panes: %w", store, err)
			}
			dst = append(dst, StoreEntry{Key: timekey.WindowKey(nil, kb, start, end), Value: wv,
				Timestamp: time.UnixMilli(end - 1)})
		}
		n := satAddMs(end, d.tw.Advance.Milliseconds())
		if n <= end {
			break
		}
		end = n
	}
	return dst, nil
}

// rangeRows is rangeLocal for a store in row form: the entries are its
// open hop windows (key order: key, end, start), each its panes combined.
// [from, to) bounds the window keys as for a store holding one entry per
// window.
func (a *App) rangeRows(spec *storeSpec, p int32, from, to []byte, limit int, stale bool) ([]StoreEntry, error) {
	from, to = timekey.WindowEntries(from, to)
	// The rows of the keys of [from, to): from's key up to past to's.
	scanFrom, scanTo := []byte{tagRow}, []byte{tagRow + 1}
	if key, _, err := timekey.ReadKey(from[1:]); err == nil && from[0] == timekey.TagWindow {
		scanFrom = rowKey(nil, key)
	}
	if key, _, err := timekey.ReadKey(to[1:]); err == nil && to[0] == timekey.TagWindow {
		scanTo = rowKey(nil, key)
		scanTo[len(scanTo)-1]++ // past every row key with key as prefix of its escape
	}
	var out []StoreEntry
	err := a.readLocal(spec, p, stale, func(db *state.DB, standby bool) error {
		out = out[:0]
		var es []StoreEntry
		closedBy, err := storeMark(db, spec.name)
		if err != nil {
			return err
		}
		err = db.ReadScan(spec.name, scanFrom, scanTo, func(k, v []byte, _ int64) error {
			key, _, err := timekey.ReadKey(k[1:])
			if err != nil {
				return &state.CorruptionError{Store: spec.name, Key: slices.Clone(k), Reason: err.Error()}
			}
			if es, err = rowWindows(es[:0], spec.win, spec.name, key, v, closedBy); err != nil {
				return err
			}
			for _, e := range es {
				if bytes.Compare(e.Key, from) < 0 || bytes.Compare(e.Key, to) >= 0 {
					continue
				}
				if len(out) >= limit {
					return errStopScan
				}
				e.Partition, e.Stale = p, standby
				out = append(out, e)
			}
			return nil
		})
		if errors.Is(err, errStopScan) {
			return nil
		}
		return err
	})
	return out, err
}

// getRowWindow is getLocal for a window key wk of a store in row form: the
// window's panes combined, if it is open and holds one.
func getRowWindow(db *state.DB, spec *storeSpec, wk []byte) (StoreEntry, bool, error) {
	key, _, _, err := timekey.ParseWindowKey(wk)
	if err != nil {
		return StoreEntry{}, false, nil // no such window entry
	}
	v, _, found, err := db.Get(spec.name, rowKey(nil, key))
	if err != nil || !found {
		return StoreEntry{}, false, err
	}
	closedBy, err := storeMark(db, spec.name)
	if err != nil {
		return StoreEntry{}, false, err
	}
	es, err := rowWindows(nil, spec.win, spec.name, key, v, closedBy)
	if err != nil {
		return StoreEntry{}, false, err
	}
	for _, e := range es {
		if bytes.Equal(e.Key, wk) {
			return e, true, nil
		}
	}
	return StoreEntry{}, false, nil
}
