// Package window assigns records to event-time windows and says when a
// window closes. It is pure: times are int64 milliseconds, the watermark is
// given (stream/internal/watermark), no clock is read.
//
// # Kinds
//
//   - Time windows (TimeWindows): tumbling (Advance = Size) and hopping.
//     A window holds Start <= t < End (end exclusive, as Kafka Streams'
//     TimeWindows and Flink). Windows are aligned to the Unix epoch, shifted
//     by Offset; with a Location they follow that zone's wall clock, so a daily
//     window runs from local midnight to local midnight (23 or 25 hours on DST
//     days, see calendar.go).
//   - Sliding windows (Sliding): Kafka Streams' SlidingWindows (KIP-450): a
//     window [Start, End] (both inclusive, End = Start + TimeDifference) is
//     created each time a record enters or leaves the span, see sliding.go.
//   - Session windows (Sessions): [Start, End] inclusive, the times of the
//     session's first and last record; a record within Gap (inclusive) of a
//     session joins it, and one that bridges two sessions merges them, see
//     session.go.
//
// # When a window closes
//
// A watermark W claims that no record with event time < W is still expected
// (stream/internal/watermark). With allowed lateness L (Kafka Streams' grace):
//
//   - a time window closes when W >= End + L (End exclusive): Kafka Streams'
//     rule (closed once stream time - grace >= window end); Flink's
//     (watermark >= End - 1 + L with its "<= W" watermark) is the same
//     record;
//   - a sliding window closes when W >= End + 1 + L (End inclusive; Kafka's
//     "closed when stream-time > window-end + grace-period");
//   - a session closes when W >= End + Gap + 1 + L: until then a record may
//     still extend it.
//
// A closed window takes no more records; its final result may be emitted and
// its state deleted. A record is late when every window it would update is
// closed: a time-window record when all its windows are closed; a sliding or
// session record when W >= t + 1 + L (then every window it could touch is
// closed; for sessions this is what keeps a record from extending a session
// already closed). Late records go to the operation's declared late policy.
package window

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Window is a window's bounds in milliseconds. End is exclusive for time
// windows, inclusive for sliding and session windows (see the package doc).
type Window struct{ Start, End int64 }

// TimeWindows are tumbling or hopping windows. The zero Advance means
// tumbling (Advance = Size).
type TimeWindows struct {
	// Size is the length of a window, Advance the distance between the
	// starts of consecutive windows (0 < Advance <= Size). Whole
	// milliseconds.
	Size, Advance time.Duration
	// Offset shifts the windows: they start at Offset + k*Advance after the
	// epoch (or after local midnight of 1970-01-01 in Location). Any whole
	// number of milliseconds; only its value modulo Advance matters.
	Offset time.Duration
	// Location, when set, aligns windows to its wall clock (calendar
	// windows): Size, Advance and Offset are measured on the zone's clock,
	// and a window spans from the first instant the clock shows its start
	// to the first instant it shows its end. nil: the epoch in UTC, plain
	// milliseconds.
	Location *time.Location
}

// MaxWindowsPerRecord bounds the hopping windows one record belongs to
// (Size/Advance, rounded up): each is a store write per record.
const MaxWindowsPerRecord = 1 << 12

// Tumbling returns tumbling windows of size.
func Tumbling(size time.Duration) TimeWindows { return TimeWindows{Size: size, Advance: size} }

// Hopping returns windows of size starting every advance.
func Hopping(size, advance time.Duration) TimeWindows {
	return TimeWindows{Size: size, Advance: advance}
}

// ErrConfig is wrapped by every configuration error of this package.
var ErrConfig = errors.New("window: invalid configuration")

func wholeMs(d time.Duration) bool { return d%time.Millisecond == 0 }

// Validate reports a configuration the windows cannot use.
func (w TimeWindows) Validate() error {
	adv := w.advance()
	switch {
	case w.Size <= 0 || !wholeMs(w.Size):
		return fmt.Errorf("%w: size %v is not a positive whole number of milliseconds", ErrConfig, w.Size)
	case adv <= 0 || adv > w.Size || !wholeMs(adv):
		return fmt.Errorf("%w: advance %v is not a whole number of milliseconds in (0, size %v]", ErrConfig, adv, w.Size)
	case !wholeMs(w.Offset):
		return fmt.Errorf("%w: offset %v is not a whole number of milliseconds", ErrConfig, w.Offset)
	case (w.Size+adv-1)/adv > MaxWindowsPerRecord:
		return fmt.Errorf("%w: size %v / advance %v puts a record in more than %d windows", ErrConfig, w.Size, adv, MaxWindowsPerRecord)
	}
	return nil
}

func (w TimeWindows) advance() time.Duration {
	if w.Advance == 0 {
		return w.Size
	}
	return w.Advance
}

// AssignTo appends the windows holding a record at ts to dst, in start
// order, and returns it: one window when tumbling, Size/Advance (rounded up
// or down) when hopping. w must be valid (Validate). Near the ends of the
// int64 range, a window that would start before the smallest time is left
// out and an end past the largest is cut to it.
func (w TimeWindows) AssignTo(dst []Window, ts int64) []Window {
	size, adv := w.Size.Milliseconds(), w.advance().Milliseconds()
	off := floorMod(w.Offset.Milliseconds(), adv)
	if w.Location == nil {
		return assignPlain(dst, ts, size, adv, off)
	}
	return w.assignCalendar(dst, ts, size, adv, off)
}

// assignPlain appends the windows [s, s+size) with s = off + k*adv that hold
// ts, in start order.
func assignPlain(dst []Window, ts, size, adv, off int64) []Window {
	// d is the distance from the last window start to ts: in [0, adv).
	d := floorMod(ts, adv)
	if off != 0 {
		d = floorMod(d-off, adv)
	}
	// The windows start at ts - d - i*adv for i = n-1 .. 0, where n counts
	// the distances d + i*adv below size (1 when tumbling).
	n := int64(1)
	if size != adv {
		n = (size - d + adv - 1) / adv
	}
	for i := n - 1; i >= 0; i-- {
		dist := d + i*adv // < size + adv: no overflow
		if ts < math.MinInt64+dist {
			continue // starts before the smallest time
		}
		start := ts - dist
		dst = append(dst, Window{Start: start, End: satAdd(start, size)})
	}
	return dst
}

// CloseAt returns the smallest watermark at which the time window win is
// closed, given allowed lateness: End + lateness (saturated).
func (w TimeWindows) CloseAt(win Window, lateness time.Duration) int64 {
	return satAdd(win.End, lateness.Milliseconds())
}

func floorMod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// satAdd returns a + b saturated to the int64 range.
func satAdd(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return math.MaxInt64
	}
	if b < 0 && s > a {
		return math.MinInt64
	}
	return s
}

// PaneWidth returns the width in milliseconds of the panes of plain
// (no Location) time windows w: gcd(Size, Advance). Every window is the
// union of Size/PaneWidth consecutive panes, and every pane lies in
// Size/PaneWidth windows (fewer near the ends of the int64 range), so a
// windowed operation can keep one partial aggregate per pane instead of
// one per window (window slicing). w must be valid (Validate).
func (w TimeWindows) PaneWidth() int64 {
	a, b := w.Size.Milliseconds(), w.advance().Milliseconds()
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// PaneOf returns the pane holding ts: [s, s+PaneWidth) with s = Offset +
// k*PaneWidth (End saturated to the largest time), the panes window starts
// are aligned to. w must be valid and have no Location.
func (w TimeWindows) PaneOf(ts int64) Window {
	g := w.PaneWidth()
	d := floorMod(ts, g)
	if off := floorMod(w.Offset.Milliseconds(), g); off != 0 {
		d = floorMod(d-off, g)
	}
	start := ts - d // a window holding ts starts at or before it: no underflow when ts has a window
	return Window{Start: start, End: satAdd(start, g)}
}
