package stream

import (
	"fmt"

	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/window"
)

// processSliding adds a record to its key's sliding windows: every window
// holding its time takes it, and the (at most three) windows it creates
// start from the state of the stored window holding the same earlier
// records (window.Sliding.Add).
//
// A late record (one that may touch a closed window) is taken only under
// LateUpdates and while lateTaken holds: every window Add reads is then
// still in the store. Each window it updates or creates that is closed is
// retained ('r' entry) and its result emitted as a correction — for a
// created one, its first result.
func (o *windowOp[K, V, A]) processSliding(r Record[K, V], kb []byte, ts int64) error {
	grace := msDuration(o.d.grace)
	sl := o.d.sl
	if window.Late(ts, o.wm, grace) && !o.lateTaken(ts) {
		w := window.Window{Start: satAddMs(ts, -sl.TimeDifference.Milliseconds()), End: ts}
		return o.late(r, kb, w, sl.CloseAt(w, grace))
	}
	existing, err := o.keyWindows(kb, sl.SearchFrom(ts), sl.SearchTo(ts))
	if err == nil && o.lateTaken(ts) {
		// A pending close of a burst runs first (window_burst.go).
		existing, err = o.closeTouchedOf(kb, existing, sl.SearchFrom(ts), sl.SearchTo(ts))
	}
	if err != nil {
		return err
	}
	states := make([]windowState[A], len(existing))
	sws := make([]window.SlidingWindow, len(existing))
	for i, e := range existing {
		if states[i], err = o.decodeWindow(e.val); err != nil {
			return err
		}
		sws[i] = window.SlidingWindow{Window: e.w, First: states[i].first, Last: states[i].last}
	}
	add, err := sl.Add(ts, sws)
	if err != nil {
		return &fatalError{fmt.Errorf("store %s: %w", o.name, err)}
	}
	// New windows first: they are seeded from the stored states before the
	// record updates them.
	for _, c := range add.Create {
		var s windowState[A]
		found := c.Seed >= 0
		if found {
			s = states[c.Seed]
			s.pending = 0
		}
		if c.Holds {
			if s.agg, err = o.fns.add(r, s.agg, found); err != nil {
				return err
			}
			s.pending++
		}
		s.first, s.last = c.Window.First, c.Window.Last
		w := c.Window.Window
		wk := timekey.WindowKey(nil, kb, w.Start, w.End)
		closed := o.closedWindow(w)
		if err := o.addWindow(kb, wk, w, o.windowTime(w), closed); err != nil {
			return err
		}
		if err := o.store(r, kb, wk, w, o.windowTime(w), s, closed); err != nil {
			return err
		}
	}
	for _, i := range add.Update {
		s := states[i]
		if s.agg, err = o.fns.add(r, s.agg, true); err != nil {
			return err
		}
		s.pending++
		s.first, s.last = min(s.first, ts), max(s.last, ts)
		e := existing[i]
		if err := o.store(r, kb, e.wk, e.w, o.windowTime(e.w), s, o.closedWindow(e.w)); err != nil {
			return err
		}
	}
	return nil
}
