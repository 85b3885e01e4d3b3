package stream

import (
	"time"

	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/window"
)

// processSession adds a record to its key's sessions: it joins the session
// within the gap, starts a new one, or merges the sessions it bridges (their
// aggregates combined in start order by the merge function, then the record
// added; the absorbed sessions are deleted, and retracted downstream when
// their result was emitted: see SessionWindows).
//
// A late record (one that may reach a closed session) is taken only under
// LateUpdates and while lateTaken holds: every session it can join is then
// still in the store, open or retained. The session it ends in is open or
// closed by its own close time: a closed one is retained ('r') and its
// result emitted as a correction.
func (o *windowOp[K, V, A]) processSession(r Record[K, V], kb []byte, ts int64) error {
	grace := o.d.grace
	if window.Late(ts, o.wm, msDuration(grace)) && !o.lateTaken(ts) {
		// A session the record could join may be closed.
		return o.late(r, kb, window.Window{Start: ts, End: ts}, satAddMs(ts, 1+grace))
	}
	ss := o.d.ss
	existing, err := o.keyWindows(kb, ss.SearchFrom(ts), ss.SearchTo(ts))
	if err == nil && o.lateTaken(ts) {
		// A pending close of a burst runs first (window_burst.go).
		existing, err = o.closeTouchedOf(kb, existing, ss.SearchFrom(ts), ss.SearchTo(ts))
	}
	if err != nil {
		return err
	}
	wins := o.wins[:0]
	for _, e := range existing {
		wins = append(wins, e.w)
	}
	o.wins = wins
	m, err := ss.Merge(ts, wins, o.absorbed)
	if err != nil {
		return &fatalError{err}
	}
	o.absorbed = m.Absorbed
	if m.Unchanged {
		e := existing[m.Absorbed[0]]
		s, err := o.decodeWindow(e.val)
		if err != nil {
			return err
		}
		if s.agg, err = o.fns.add(r, s.agg, true); err != nil {
			return err
		}
		s.pending++
		return o.store(r, kb, e.wk, e.w, o.windowTime(e.w), s, o.closedWindow(e.w))
	}
	var s windowState[A]
	found := false
	var retract []window.Window // rare: merges only
	for _, i := range m.Absorbed {
		e := existing[i]
		es, err := o.decodeWindow(e.val)
		if err != nil {
			return err
		}
		if !found {
			s, found = es, true
		} else {
			if s.agg, err = o.fns.merge(s.agg, es.agg); err != nil {
				return err
			}
			s.pending += es.pending
		}
		// Only a late record reaches a closed session (retained: its
		// index entry is 'r'). The window before its index entry (see
		// update).
		closed := o.closedWindow(e.w)
		ts := o.windowTime(e.w)
		if err := o.del(e.wk, ts); err != nil {
			return err
		}
		if err := o.del(indexKey(kb, e.w, closed), ts); err != nil {
			return err
		}
		if closed || o.emitsOpen() {
			retract = append(retract, e.w)
		}
	}
	if s.agg, err = o.fns.add(r, s.agg, found); err != nil {
		return err
	}
	s.pending++
	w := m.Session
	wk := timekey.WindowKey(nil, kb, w.Start, w.End)
	closed := o.closedWindow(w)
	if err := o.addWindow(kb, wk, w, o.windowTime(w), closed); err != nil {
		return err
	}
	if o.next != nil {
		for _, old := range retract {
			if err := o.next(Record[Windowed[K], A]{Key: o.windowedKey(r.Key, old), Tombstone: true,
				Timestamp: time.UnixMilli(o.windowTime(old)), Headers: r.Headers, Origin: r.Origin}); err != nil {
				return err
			}
		}
	}
	return o.store(r, kb, wk, w, o.windowTime(w), s, closed)
}

// lateTaken reports whether a late sliding or session record at ts is
// still taken (LateUpdates): while the watermark is below ts + 1 + Grace +
// Retain. Then every window the record can touch is still stored: such a
// window ends at or after ts - gap (sessions) or ts - timeDifference - 1
// (sliding), and is deleted only once the watermark passes its end +
// closeDelta + retain, which is at least that.
func (o *windowOp[K, V, A]) lateTaken(ts int64) bool {
	return o.d.late.kind == lateUpdates && o.wm < satAddMs(satAddMs(ts, 1+o.d.grace), o.d.lateRetain)
}

// closedWindow reports whether the watermark closed window w (sliding and
// session windows): a closed window the store holds is retained.
func (o *windowOp[K, V, A]) closedWindow(w window.Window) bool {
	return satAddMs(w.End, o.d.closeDelta()) <= o.wm
}

// emitsOpen reports whether the emission may have sent an open window's
// result downstream: every update, or early firings.
func (o *windowOp[K, V, A]) emitsOpen() bool {
	e := o.d.emit
	return !e.final || e.earlyEvery > 0 || e.earlyEach > 0
}
