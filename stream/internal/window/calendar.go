package window

import (
	"math"
	"time"
)

// Calendar windows. With a Location, windows are laid on the zone's wall
// clock: the window [a, b) of wall-clock times (a = Offset + k*Advance
// since local midnight of 1970-01-01, b = a + Size) spans, in real time, from
// the first instant the zone's clock shows a or later to the first instant it
// shows b or later. So:
//
//   - a daily window runs from local midnight to local midnight: 23 hours on
//     the spring-forward day, 25 on the fall-back day (and a zone that skips
//     midnight starts the day when the clock jumps past it);
//   - an hourly window in spring lasts one real hour even when a clock hour
//     is skipped (01:00-03:00 CEST is one real hour: the skipped 02:00-03:00
//     has no window);
//   - in autumn, when the clock repeats an hour, the repeated readings belong
//     to the window the clock had already reached: hourly, the 02:00 window
//     of Europe/Berlin's fall-back night lasts two real hours (02:00 CEST to
//     03:00 CET). Windows never overlap more than hopping makes them and
//     never go back in time.
//
// Formally, with wall(t) the zone's clock reading at instant t and
// clock(t) = max over t' <= t of wall(t') (the clock "as far as it got"), a
// record at t belongs to the wall-clock windows holding clock(t), each mapped
// to real time by first(x) = min{t : wall(t) >= x}. Both are computed from
// the zone's transitions around t (time.Time.ZoneBounds).

// maxOffsetSpan bounds how far apart an instant and its wall-clock reading
// can be (every zone offset is within ±14h; LMT offsets within ±16h), so
// wall(t') < wall(t) for every t' more than 2*maxOffsetSpan before t.
const maxOffsetSpan = 16 * int64(time.Hour/time.Millisecond)

// calendarLimit bounds the times handled on a wall clock; beyond it (year
// ±140000, far outside any zone's rules) windows are laid with the fixed
// offset the zone has at the limit.
const calendarLimit = int64(1) << 52

func (w TimeWindows) assignCalendar(dst []Window, ts, size, adv, off int64) []Window {
	loc := w.Location
	if ts > calendarLimit || ts < -calendarLimit {
		// Far outside any zone's rules: a fixed offset, that of the limit.
		// A wall-clock start off + k*adv is the instant off - o + k*adv.
		o, _, _ := offsetMs(loc, max(min(ts, calendarLimit), -calendarLimit))
		return assignPlain(dst, ts, size, adv, floorMod(off-floorMod(o, adv), adv))
	}
	// Fast path: inside one zone period [ps, pe) of offset o, far enough from
	// its start, the clock is ts + o and first(x) is x - o (no earlier
	// instant can have read x). Else walk the transitions.
	o, ps, pe := offsetMs(loc, ts)
	c := ts + o
	if ps > ts-2*maxOffsetSpan {
		c = clockAt(loc, ts)
	}
	first := func(x int64) int64 {
		if ps <= x-maxOffsetSpan && x-o < pe {
			return x - o
		}
		return firstAt(loc, x)
	}
	n := len(dst)
	dst = assignPlain(dst, c, size, adv, off)
	for i := n; i < len(dst); i++ {
		dst[i] = Window{Start: first(dst[i].Start), End: first(dst[i].End)}
	}
	return dst
}

// offsetMs returns the zone's offset at instant ms and the period [start,
// end) of instants sharing it (start math.MinInt64 / end math.MaxInt64 when
// unbounded).
func offsetMs(loc *time.Location, ms int64) (off, start, end int64) {
	t := time.UnixMilli(ms).In(loc)
	_, o := t.Zone()
	s, e := t.ZoneBounds()
	start, end = math.MinInt64, math.MaxInt64
	if !s.IsZero() {
		start = s.UnixMilli()
	}
	if !e.IsZero() {
		end = e.UnixMilli()
	}
	return int64(o) * 1000, start, end
}

// wallAt returns the wall-clock reading at instant ms, as milliseconds of a
// UTC clock.
func wallAt(loc *time.Location, ms int64) int64 {
	o, _, _ := offsetMs(loc, ms)
	return ms + o
}

// clockAt returns clock(ms): the largest wall-clock reading at or before ms.
// Only transitions within 2*maxOffsetSpan before ms can have shown more.
func clockAt(loc *time.Location, ms int64) int64 {
	o, start, _ := offsetMs(loc, ms)
	c := ms + o
	floor := ms - 2*maxOffsetSpan
	for start > floor && start != math.MinInt64 {
		// The last instant of the previous period.
		prev := start - 1
		var po int64
		po, start, _ = offsetMs(loc, prev)
		c = max(c, prev+po)
	}
	return c
}

// firstAt returns first(x): the first instant whose wall-clock reading is at
// least x. Instants before x - maxOffsetSpan read less than x, so the walk
// over the zone's periods starts there.
func firstAt(loc *time.Location, x int64) int64 {
	t := x - maxOffsetSpan
	for {
		o, start, end := offsetMs(loc, t)
		// The period's wall clock runs from start+o to end+o (exclusive).
		if end == math.MaxInt64 || end+o > x {
			return max(start, x-o, t)
		}
		t = end
	}
}
