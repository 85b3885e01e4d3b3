package window

import (
	"fmt"
	"time"
)

// Sliding are Kafka Streams' sliding windows (SlidingWindows, KIP-450) with
// a time difference D: two records are in a common window when their times
// differ by at most D. For a key whose records have the set of times X, the
// windows are exactly
//
//	left(x)  = [x-D, x]          for every x in X (made when x enters)
//	right(x) = [x+1, x+1+D]      for every x in X with a record in it (made when x leaves)
//
// both ends inclusive, each holding the records of X within it; equal
// windows are one. (Kafka's example, D = 5 s, records at 8 s, 9.2 s, 12.4 s:
// [3;8], [4.2;9.2], [7.4;12.4], [8.001;13.001], [9.201;14.201].)
//
// The store keeps, with each window's state, the times of its first and
// last record (SlidingWindow.First, Last; Kafka keeps the last). That is
// enough to add a record incrementally, in or out of order: Add returns the
// existing windows the record joins and the (at most three) windows it
// creates — left(t), right(t) and right of the record before t — each seeded
// from an existing window holding exactly the records the new window holds
// before t. (Such a window always exists: slide the new window's span
// towards the past until a record enters or leaves; where it stops is a
// left or a right window with the same records.)
type Sliding struct {
	TimeDifference time.Duration // >= 0, whole milliseconds
}

// Validate reports a configuration the windows cannot use.
func (s Sliding) Validate() error {
	if s.TimeDifference < 0 || !wholeMs(s.TimeDifference) {
		return fmt.Errorf("%w: time difference %v is not a non-negative whole number of milliseconds", ErrConfig, s.TimeDifference)
	}
	return nil
}

// SlidingWindow is a stored sliding window and the times of its first and
// last record.
type SlidingWindow struct {
	Window
	First, Last int64
}

// SlidingCreate is a window a record creates.
type SlidingCreate struct {
	// Window is the new window; First and Last include the record if
	// Holds.
	Window SlidingWindow
	// Seed is the index of the existing window holding exactly the records
	// the new window holds besides this one: its state is the new window's
	// starting state. -1: none (start from the initializer).
	Seed int
	// Holds says the new window holds the record (add it to the seed).
	Holds bool
}

// SlidingAdd says what a record does to its key's sliding windows.
type SlidingAdd struct {
	// Update lists (as indexes into the windows given to Add) the existing
	// windows holding the record: add it, and widen First/Last.
	Update []int
	// Create lists the new windows, in start order.
	Create []SlidingCreate
}

// SearchFrom returns the smallest window End Add needs to see for a record
// at ts: the key's scan (timekey.KeyWindows, End order) starts there and
// may stop at the first window starting after SearchTo(ts).
func (s Sliding) SearchFrom(ts int64) int64 { return satAdd(ts, -s.TimeDifference.Milliseconds()-1) }

// SearchTo returns the largest window Start Add needs to see.
func (s Sliding) SearchTo(ts int64) int64 { return satAdd(ts, s.TimeDifference.Milliseconds()+1) }

// Add returns what a record at ts does to a key's sliding windows, given
// every existing window of the key with End >= SearchFrom(ts) and Start <=
// SearchTo(ts) (more may be given): a record that is not late (Late), whose
// windows are all open, or a late one while the store still holds every
// window in that range (closed ones included). Windows that
// are not of this size, or whose First/Last are not inside them, are an
// error, and so is a store missing the window a new one must be seeded from
// (the store lost part of its state).
func (s Sliding) Add(ts int64, existing []SlidingWindow) (SlidingAdd, error) {
	d := s.TimeDifference.Milliseconds()
	lo, hi := s.SearchFrom(ts), s.SearchTo(ts)
	var out SlidingAdd
	// prev is the latest record before ts (in the search range); after
	// whether a record follows ts within D+1.
	prev, hasPrev, after := int64(0), false, false
	for i, w := range existing {
		if w.End-w.Start != d || w.First > w.Last || w.First < w.Start || w.Last > w.End {
			return SlidingAdd{}, fmt.Errorf("window: not a sliding window of %d ms: %+v", d, w)
		}
		if w.Start <= ts && ts <= w.End {
			out.Update = append(out.Update, i)
		}
		for _, x := range [2]int64{w.First, w.Last} {
			if x < lo || x > hi {
				continue
			}
			if x < ts && (!hasPrev || x > prev) {
				prev, hasPrev = x, true
			}
			if x > ts && x <= satAdd(ts, d+1) {
				after = true
			}
		}
	}

	// In start order: left(ts) starts at ts-D <= prev+1.
	cands := [3]Window{{Start: satAdd(ts, -d), End: ts}}
	n := 1
	if hasPrev && ts <= satAdd(prev, d+1) {
		if rp := (Window{Start: prev + 1, End: satAdd(prev+1, d)}); rp != cands[0] {
			cands[n] = rp
			n++
		}
	}
	if after {
		cands[n] = Window{Start: satAdd(ts, 1), End: satAdd(ts, d+1)}
		n++
	}
	for _, c := range cands[:n] {
		if indexOf(existing, c) >= 0 {
			continue
		}
		cr, err := s.create(ts, c, existing, lo, hi)
		if err != nil {
			return SlidingAdd{}, err
		}
		out.Create = append(out.Create, cr)
	}
	return out, nil
}

// create returns the creation of window c by a record at ts: the records
// before ts within c are those of the existing windows' First/Last times in
// c (every record in the search range is the Last of its left window).
func (s Sliding) create(ts int64, c Window, existing []SlidingWindow, lo, hi int64) (SlidingCreate, error) {
	first, last, found := int64(0), int64(0), false
	for _, w := range existing {
		for _, x := range [2]int64{w.First, w.Last} {
			if x < lo || x > hi || x < c.Start || x > c.End {
				continue
			}
			if !found || x < first {
				first = x
			}
			if !found || x > last {
				last = x
			}
			found = true
		}
	}
	cr := SlidingCreate{Window: SlidingWindow{Window: c}, Seed: -1, Holds: c.Start <= ts && ts <= c.End}
	if found {
		for i, w := range existing {
			if w.First == first && w.Last == last {
				cr.Seed = i
				break
			}
		}
		if cr.Seed < 0 {
			return SlidingCreate{}, fmt.Errorf("window: no stored sliding window holds exactly the records %d..%d of new window %+v", first, last, c)
		}
	}
	switch {
	case found && cr.Holds:
		cr.Window.First, cr.Window.Last = min(first, ts), max(last, ts)
	case found:
		cr.Window.First, cr.Window.Last = first, last
	default:
		cr.Window.First, cr.Window.Last = ts, ts
	}
	return cr, nil
}

func indexOf(ws []SlidingWindow, w Window) int {
	for i := range ws {
		if ws[i].Window == w {
			return i
		}
	}
	return -1
}

// CloseAt returns the smallest watermark at which sliding window w is
// closed, given allowed lateness: End + 1 + lateness (saturated).
func (s Sliding) CloseAt(w Window, lateness time.Duration) int64 {
	return satAdd(satAdd(w.End, 1), lateness.Milliseconds())
}
