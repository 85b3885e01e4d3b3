package stream

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/window"
)

// The pane layout of a windowed store (window slicing, as Flink's sliced
// windows and Scotty): hopping windows keep one partial aggregate per key
// and pane, not one aggregate per key and window.
//
// A pane is [s, s+g) with g = gcd(size, advance), aligned like the window
// starts (offset + k*g); a window is the union of its size/g panes. A
// record updates the one pane holding it.
//
// The layout has two forms. With at most paneRowMax panes a window (every
// hopping window of common shapes: 10 s every 2 s is 5), a key's panes are
// one entry, its row, and its close index one entry: window_pane_row.go.
// Beyond it, one entry per key and pane, below (a row would be rewritten
// whole by every record and changelog flush). The store keeps:
//
//	'w' | key | pane end | pane start -> the pane: uvarint 0 | partial aggregate
//	'c' | end | key | start           -> 0x01: hop window [start, end) is open
//	'm'                               -> the watermark (as in window_agg.go)
//
// A store is in pane layout, and in which form, by its declaration
// (windowDecl.paneWidth, windowDecl.rows):
// hopping windows without a Location, advance != size, gcd(size, advance)
// >= advance/2, a merge function (WindowedCount, WindowedReduce,
// WindowedAggregate given merge), EmitFinal without early firing, and
// Retain 0. Every other declaration keeps one entry per window. The layout
// is part of the store's persisted format: changing a declaration between
// the two needs a new store name (as any change of the window kind does).
//
// Invariants (besides window_agg.go's):
//   - a pane exists only if the last window holding it (the greatest start
//     <= the pane's start) is open: a record is written only when that
//     window is open (else every window holding the record is closed: it is
//     late), and that window's close deletes the panes it alone holds
//     ([start, start+advance)). So a pane inside an open window is never
//     deleted before that window closes;
//   - an open window has a 'c' entry iff the key has a pane inside it: the
//     record that creates a pane creates the 'c' entries of its open windows
//     that have none (those holding neither the key's nearest pane before
//     it nor the nearest after it, both found by point reads the fresh
//     filter mostly skips), and a pane that exists already had its open
//     windows' entries created with it (windows only close);
//   - a window's result is its panes' partials combined with merge in pane
//     (time) order, so WindowedReduce's function must be associative and
//     commutative, and WindowedAggregate's merge must combine two partial
//     aggregates of disjoint record sets as the aggregator would have;
//   - reads of panes go through the round's transaction (cache first), the
//     fresh filter (window_fresh.go) keyed by pane end: a pane with end past
//     the filter's floor exists only if this operator created it (its
//     last window's 'c' entry, whose end is at least the pane's, bounds the
//     floor after a restore).

// paneWidth returns the width in ms of the panes of a declaration in pane
// layout, or 0: one entry per window (see the layout's conditions).
func (d *windowDecl) paneWidth(hasMerge bool) int64 {
	size, adv := d.tw.Size.Milliseconds(), d.tw.Advance.Milliseconds()
	if d.kind != "time" || d.tw.Location != nil || !hasMerge || adv == 0 || adv == size {
		return 0
	}
	if !d.emit.final || d.emit.earlyEvery > 0 || d.emit.earlyEach > 0 || d.lateRetain > 0 || d.retain > 0 {
		return 0
	}
	if g := d.tw.PaneWidth(); 2*g >= adv {
		return g
	}
	return 0
}

// paneChangelogPhase is windowChangelogPhase with a pane's deletion after
// the index entries' (with the mark): a crash that keeps a prefix of a
// flush may leave a pane whose windows all closed (never read again: no
// open window holds it), never the index entry of a closed window without
// the panes it alone held (closed again after a restore, it would emit a
// result without them).
func paneChangelogPhase(key []byte, deleted bool) int {
	if deleted && len(key) > 0 && key[0] == timekey.TagWindow {
		return changelogPhases - 1
	}
	return windowChangelogPhase(key, deleted)
}

// paneKey is the store key of key kb's pane p.
func paneKey(kb []byte, p window.Window) []byte { return timekey.WindowKey(nil, kb, p.Start, p.End) }

// assignPane sets o.wins to the windows of a record of a store in pane
// layout and returns the index of the first open one (windows close in
// start order: the open ones are a suffix). done: nothing more to do — no
// representable window, or every window closed and the record took the
// late path.
func (o *windowOp[K, V, A]) assignPane(r Record[K, V], kb []byte, ts int64) (first int, done bool, err error) {
	o.wins = o.d.tw.AssignTo(o.wins[:0], ts)
	if len(o.wins) == 0 {
		return 0, true, nil // outside the representable times
	}
	for first < len(o.wins) && satAddMs(o.wins[first].End, o.d.grace) <= o.wm {
		first++
	}
	if first == len(o.wins) {
		w := o.wins[len(o.wins)-1]
		return first, true, o.late(r, kb, w, satAddMs(w.End, o.d.grace))
	}
	if first > 0 {
		o.partialCount.Add(float64(first))
	}
	return first, false, nil
}

// processPanes updates the pane of a record of a store in pane layout.
func (o *windowOp[K, V, A]) processPanes(r Record[K, V], kb []byte, ts int64) error {
	first, done, err := o.assignPane(r, kb, ts)
	if done || err != nil {
		return err
	}
	if first > 0 {
		// The record's pane is in those windows too: a close a burst left
		// pending runs first, without it (window_burst.go).
		if _, err := o.closeTouched(kb, o.paneTouched(kb, o.wins[:first])); err != nil {
			return err
		}
	}
	open := o.wins[first:]
	o.kh = hashKey(o.fresh, kb)
	if o.hints == nil {
		o.hints = &paneHints{node: o.n.id, latest: map[string]int64{}, pruneAt: 1024}
		o.t.addFlusher(o.hints)
	}
	p := o.d.tw.PaneOf(ts)
	pk := paneKey(kb, p)
	s, found, err := o.readState(pk, o.paneAbsent(p, o.kh))
	if err != nil {
		return err
	}
	if !found {
		// A new pane: closed before the next flush, it needs no changelog
		// record.
		o.cl.write(pk, nil, ts, true)
		o.hints.staged = append(o.hints.staged, paneHint{key: string(kb), start: p.Start})
		// The index entries first (see update).
		prev, next, err := o.paneNeighbours(kb, p, open[0].Start, open[len(open)-1].End)
		if err != nil {
			return err
		}
		for _, w := range open {
			if (prev >= w.Start && prev < p.Start) || (next > p.Start && next < w.End) {
				continue // the window holds another pane of the key: it has its entry
			}
			if err := o.addWindow(kb, pk, w, w.End-1, false); err != nil {
				return err
			}
		}
		o.fresh.created(p.End, o.kh)
	}
	if s.agg, err = o.fns.add(r, s.agg, found); err != nil {
		return err
	}
	v, err := o.encodeWindow(s)
	if err != nil {
		return err
	}
	// The pane's time is its last window's: the close that deletes it.
	return o.put(pk, v, open[len(open)-1].End-1)
}

// paneNeighbours returns the starts of key kb's nearest panes before pane p
// and after it, within [lo, hi) (p.Start if there is none on that side).
func (o *windowOp[K, V, A]) paneNeighbours(kb []byte, p window.Window, lo, hi int64) (prev, next int64, err error) {
	g := p.End - p.Start
	prev, next = p.Start, p.Start
	hinted, ok := o.hints.latest[string(kb)]
	hinted = max(hinted, lo-g) // a pane before lo is none of the windows'
	ok = ok && hinted < p.Start
	for s := p.Start; uint64(s-lo) >= uint64(g); {
		s -= g
		if ok && s == hinted {
			return s, next, o.nextPane(kb, p, hi, &next)
		}
		if ok, err := o.paneExists(kb, s, g); err != nil || ok {
			prev = s
			return prev, next, err
		}
	}
	return prev, next, o.nextPane(kb, p, hi, &next)
}

func (o *windowOp[K, V, A]) nextPane(kb []byte, p window.Window, hi int64, next *int64) error {
	g := p.End - p.Start
	// uint64 differences: hi may be the largest time.
	for s := p.Start; uint64(hi-s) > uint64(g); {
		s += g
		ok, err := o.paneExists(kb, s, g)
		if err != nil {
			return err
		}
		if ok {
			*next = s
			return nil
		}
	}
	return nil
}

// paneHints remembers each key's latest pane this operator created (the
// greatest start), so that a record's new pane finds the key's previous
// pane without reading it (a database read once the panes outgrow the
// store cache). A hint is a pane that exists while it is inside an open
// window (the layout's invariants); one whose last window closed is
// pruned. It is one of the task's flushers, as a store's collapsed
// changelog is: a record's hint counts only once the record succeeded
// (commitStaged; a failed record's writes are rolled back), and an aborted
// transaction drops them all (drop: its panes are gone). A new operator
// instance (a restart, a restore) starts without hints.
type paneHints struct {
	node    int
	latest  map[string]int64
	staged  []paneHint
	pruneAt int // prune once latest holds twice as many keys
}

type paneHint struct {
	key   string
	start int64
}

func (h *paneHints) nodeID() int       { return h.node }
func (h *paneHints) storeName() string { return "" } // no store's changelog (tableFor)
func (h *paneHints) pending() int64    { return 0 }
func (h *paneHints) flush() error      { return nil }

func (h *paneHints) expired([]byte, []byte, time.Time) error { return nil } // a window store has no TTL

func (h *paneHints) commitStaged() {
	for _, s := range h.staged {
		if cur, ok := h.latest[s.key]; !ok || s.start > cur {
			h.latest[s.key] = s.start
		}
	}
	h.dropStaged()
}

func (h *paneHints) dropStaged() {
	clear(h.staged)
	h.staged = h.staged[:0]
}

func (h *paneHints) drop() {
	h.dropStaged()
	clear(h.latest)
}

// prune forgets the hints of panes that start at or before gone (their
// last window closed: they were deleted), once the keys doubled.
func (h *paneHints) prune(gone int64) {
	if h == nil || len(h.latest) < 2*h.pruneAt {
		return
	}
	for k, s := range h.latest {
		if s <= gone {
			delete(h.latest, k)
		}
	}
	h.pruneAt = max(1024, len(h.latest))
}

// paneExists reports whether key kb (hashed to o.kh) has the pane starting
// at s (width g).
func (o *windowOp[K, V, A]) paneExists(kb []byte, s, g int64) (bool, error) {
	p := window.Window{Start: s, End: satAddMs(s, g)}
	if o.paneAbsent(p, o.kh) {
		return false, nil
	}
	_, found, err := o.get(paneKey(kb, p))
	return found, err
}

// paneAbsent reports whether the pane p of the key hashed to h is known not
// to exist: its last window closed (its start is at least size before the
// close scans' end: that close deleted it, in this transaction or a
// committed one; an abort takes scanned back with the deletions), or the
// fresh filter of its end does not hold the key.
func (o *windowOp[K, V, A]) paneAbsent(p window.Window, h uint64) bool {
	if o.scanned[0] != math.MinInt64 && p.Start <= satAddMs(o.scanned[0], -o.d.tw.Size.Milliseconds()) {
		return true
	}
	return o.fresh.absent(p.End, h)
}

// panesClosed drops the fresh filters of the panes the committed close
// scans deleted for good: those whose last window ended by committedScan
// (pane end <= committedScan - size + g). A pane of a window the open
// transaction closed keeps its filter until the transaction commits (an
// abort brings the pane back; the operator then rebuilds its filters from
// the store anyway, load). Windows only close, so no record writes those
// panes again (it would be late for the committed mark).
func (o *windowOp[K, V, A]) panesClosed() {
	if o.committedScan[0] == math.MinInt64 {
		return
	}
	o.hints.prune(satAddMs(o.committedScan[0], -o.d.tw.Size.Milliseconds()))
	o.fresh.dropPanes(satAddMs(o.committedScan[0], o.d.pane-o.d.tw.Size.Milliseconds()))
}

// hashKey is the fresh filter's hash of an encoded key (0 without a
// filter).
func hashKey(f *freshEnds, kb []byte) uint64 {
	if f == nil {
		return 0
	}
	return f.hash(kb)
}

// paneWindow reads the panes of key's window w through the transaction and
// returns the window's value (as a per-window store holds it: uvarint 0 |
// the combined aggregate; found false if it has no pane) and the keys of
// the panes only w holds, which its close deletes.
func (o *windowOp[K, V, A]) paneWindow(key []byte, w window.Window) (v []byte, found bool, dels [][]byte, err error) {
	g, adv := o.d.pane, o.d.tw.Advance.Milliseconds()
	h := hashKey(o.fresh, key)
	var acc A
	for s := w.Start; s < w.End; s += g {
		p := window.Window{Start: s, End: satAddMs(s, g)}
		var pv []byte
		ok := false
		if !o.paneAbsent(p, h) {
			pk := paneKey(key, p)
			if pv, ok, err = o.get(pk); err != nil {
				return nil, false, nil, err
			}
		}
		if !ok {
			if uint64(w.End-s) <= uint64(g) {
				break
			}
			continue
		}
		ps, err := o.decodeWindow(pv)
		if err != nil {
			return nil, false, nil, err
		}
		if !found {
			acc = ps.agg
		} else if acc, err = o.fns.merge(acc, ps.agg); err != nil {
			return nil, false, nil, fmt.Errorf("store %s: merge panes: %w", o.name, err)
		}
		found = true
		if s-w.Start < adv {
			dels = append(dels, paneKey(key, p))
		}
		if uint64(w.End-s) <= uint64(g) {
			break // the last pane (w.End may be the largest time)
		}
	}
	if !found {
		return nil, false, nil, nil
	}
	v, err = o.encodeWindow(windowState[A]{agg: acc})
	return v, true, dels, err
}

// paneKeysOf appends to dst the keys of key's panes of window w that may
// exist.
func (o *windowOp[K, V, A]) paneKeysOf(dst [][]byte, key []byte, w window.Window) [][]byte {
	g := o.d.pane
	h := hashKey(o.fresh, key)
	for s := w.Start; s < w.End; s += g {
		if p := (window.Window{Start: s, End: satAddMs(s, g)}); !o.paneAbsent(p, h) {
			dst = append(dst, paneKey(key, p))
		}
		if uint64(w.End-s) <= uint64(g) {
			break
		}
	}
	return dst
}

// paneCombiner returns the function combining stored pane values into a
// window value for queries (decl.combine).
func paneCombiner[A any](c Codec[A], merge func(a, b A) (A, error)) func(vals [][]byte) ([]byte, error) {
	return func(vals [][]byte) ([]byte, error) {
		var acc A
		for i, v := range vals {
			a, err := decodeWindowAgg(c, false, v)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				acc = a
			} else if acc, err = merge(acc, a); err != nil {
				return nil, err
			}
		}
		ab, err := c.Encode(acc)
		if err != nil {
			return nil, err
		}
		return append([]byte{0}, ab...), nil // uvarint 0: no records pending
	}
}

// rangePanes is rangeLocal for a store in pane layout: the entries are its
// open hop windows (key order: key, end, start), each its panes combined,
// not the panes. [from, to) bounds the window keys as for a store holding
// one entry per window.
func (a *App) rangePanes(spec *storeSpec, p int32, from, to []byte, limit int, stale bool) ([]StoreEntry, error) {
	d := spec.win
	size, g, adv := d.tw.Size.Milliseconds(), d.pane, d.tw.Advance.Milliseconds()
	from, to = timekey.WindowEntries(from, to)
	// A window ending at or after E holds panes ending at or after
	// E - size + g; one ending before a key's bound may hold a pane past it.
	scanFrom, scanTo := from, to
	if key, rest, err := timekey.ReadKey(from[1:]); err == nil && from[0] == timekey.TagWindow && len(rest) >= timekey.TimeSize {
		lo, _ := timekey.KeyWindows(key, satAddMs(timekey.ReadTime(rest), g-size))
		scanFrom = lo
	}
	if key, _, err := timekey.ReadKey(to[1:]); err == nil && to[0] == timekey.TagWindow {
		_, hi := timekey.KeyWindows(key, 0)
		scanTo = hi
	}
	off := d.tw.Offset.Milliseconds()
	var out []StoreEntry
	err := a.readLocal(spec, p, stale, func(db *state.DB, standby bool) error {
		out = out[:0]
		mark, err := storeMark(db, spec.name)
		if err != nil {
			return err
		}
		var group []paneEntry // one key's panes, in end order
		var groupKey []byte
		flush := func() error {
			if len(group) == 0 {
				return nil
			}
			es, err := paneWindows(db, spec.name, d, groupKey, group, size, g, adv, off, mark)
			if err != nil {
				return err
			}
			for _, e := range es {
				if bytes.Compare(e.Key, from) < 0 || bytes.Compare(e.Key, to) >= 0 {
					continue
				}
				e.Partition, e.Stale = p, standby
				out = append(out, e)
			}
			group = group[:0]
			return nil
		}
		err = db.ReadScan(spec.name, scanFrom, scanTo, func(k, v []byte, _ int64) error {
			key, s, e, err := timekey.ParseWindowKey(k)
			if err != nil {
				return err
			}
			if !bytes.Equal(key, groupKey) {
				if err := flush(); err != nil {
					return err
				}
				if len(out) >= limit {
					return errStopScan
				}
				groupKey = key
			}
			group = append(group, paneEntry{w: window.Window{Start: s, End: e}, v: slices.Clone(v)})
			return nil
		})
		if err != nil && !errors.Is(err, errStopScan) {
			return err
		}
		if err == nil {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(out) > limit {
			out = out[:limit]
		}
		return nil
	})
	return out, err
}

type paneEntry struct {
	w window.Window
	v []byte
}

// paneWindows returns the open windows (those with a 'c' entry) holding a
// key's panes ps (in end order), each as the entry a per-window store
// would hold, in window key order.
func paneWindows(db *state.DB, store string, d *windowDecl, key []byte, ps []paneEntry, size, g, adv, off, mark int64) ([]StoreEntry, error) {
	var starts []int64
	for _, pe := range ps {
		// The windows holding the pane start at the window grid's points in
		// (pane end - size, pane start].
		last := pe.w.Start - floorModMs(pe.w.Start-off, adv)
		for s := last; pe.w.Start-s < size-g+1 && s <= pe.w.Start; s -= adv {
			starts = append(starts, s)
			if s-adv > s {
				break
			}
		}
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)
	var out []StoreEntry
	var vals [][]byte
	for _, s := range starts {
		end := satAddMs(s, size)
		if d.gone(end, mark) {
			continue // closed; a burst's close pending (window_burst.go)
		}
		if _, _, open, err := db.Get(store, timekey.IndexKey(nil, key, s, end)); err != nil || !open {
			if err != nil {
				return nil, err
			}
			continue
		}
		vals = vals[:0]
		for _, pe := range ps {
			if pe.w.Start >= s && pe.w.Start < end {
				vals = append(vals, pe.v)
			}
		}
		if len(vals) == 0 {
			continue
		}
		v, err := d.combine(vals)
		if err != nil {
			return nil, fmt.Errorf("store %s: combine panes: %w", store, err)
		}
		out = append(out, StoreEntry{Key: timekey.WindowKey(nil, key, s, end), Value: v, Timestamp: time.UnixMilli(end - 1)})
	}
	// Window key order: end, then start; one size for all, so start order.
	return out, nil
}

// floorModMs is a mod m in [0, m).
func floorModMs(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// getPaneWindow is getLocal for a window key wk of a store in pane layout:
// the open window's panes combined, as the entry a store with one entry
// per window would hold (found false if the window is not open or holds no
// pane, or wk is no window key).
func getPaneWindow(db *state.DB, spec *storeSpec, wk []byte) (StoreEntry, bool, error) {
	if spec.win.rows {
		return getRowWindow(db, spec, wk)
	}
	key, start, end, err := timekey.ParseWindowKey(wk)
	if err != nil {
		return StoreEntry{}, false, nil
	}
	if _, _, open, err := db.Get(spec.name, timekey.IndexKey(nil, key, start, end)); err != nil || !open {
		return StoreEntry{}, false, err
	}
	g := spec.win.pane
	var vals [][]byte
	for s := start; s < end; s += g {
		v, _, ok, err := db.Get(spec.name, paneKey(key, window.Window{Start: s, End: satAddMs(s, g)}))
		if err != nil {
			return StoreEntry{}, false, err
		}
		if ok {
			vals = append(vals, v)
		}
		if uint64(end-s) <= uint64(g) {
			break // the last pane (end may be the largest time)
		}
	}
	if len(vals) == 0 {
		return StoreEntry{}, false, nil
	}
	v, err := spec.win.combine(vals)
	if err != nil {
		return StoreEntry{}, false, fmt.Errorf("store %s: combine panes: %w", spec.name, err)
	}
	return StoreEntry{Key: slices.Clone(wk), Value: v, Timestamp: time.UnixMilli(end - 1)}, true, nil
}
