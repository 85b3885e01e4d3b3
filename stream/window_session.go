package stream

import (
	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/window"
)

// processSession adds a record to its key's sessions: it joins the session
// within the gap, starts a new one, or merges the sessions it bridges (their
// aggregates combined in start order by the merge function, then the record
// added; the absorbed sessions are deleted). Under EmitUpdates the merged
// session is emitted; the sessions it absorbed are not retracted downstream.
func (o *windowOp[K, V, A]) processSession(r Record[K, V], kb []byte, ts int64) error {
	grace := o.d.grace
	if window.Late(ts, o.wm, msDuration(grace)) {
		// A session the record could join may be closed.
		return o.late(r, kb, window.Window{Start: ts, End: ts}, satAddMs(ts, 1+grace))
	}
	ss := o.d.ss
	existing, err := o.keyWindows(kb, ss.SearchFrom(ts), ss.SearchTo(ts))
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
		return o.store(r, kb, e.wk, e.w, o.windowTime(e.w), s, false)
	}
	var s windowState[A]
	found := false
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
		// The window before its index entry (see update).
		ts := o.windowTime(e.w)
		if err := o.del(e.wk, ts); err != nil {
			return err
		}
		if err := o.del(indexKey(kb, e.w, false), ts); err != nil {
			return err
		}
	}
	if s.agg, err = o.fns.add(r, s.agg, found); err != nil {
		return err
	}
	s.pending++
	w := m.Session
	wk := timekey.WindowKey(nil, kb, w.Start, w.End)
	if err := o.addWindow(kb, w, o.windowTime(w), false); err != nil {
		return err
	}
	return o.store(r, kb, wk, w, o.windowTime(w), s, false)
}
