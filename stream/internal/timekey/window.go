package timekey

import (
	"bytes"
	"fmt"
	"math"
)

// Window store keys. A window store holds, per (key, window), the window's
// aggregate, and a close index naming every window by its end:
//
//	window:  'w' | key (escaped) | end | start   -> the window's value
//	index:   'c' | end | key (escaped) | start   -> (empty)
//
// One key's windows are one contiguous range ordered by end, then start:
//   - tumbling, hopping, sliding and calendar windows: a later start has a
//     later end, so this is start order too;
//   - sessions of one key never overlap, so end order is start order; the
//     sessions a record at t may merge with (end >= t-gap, start <= t+gap)
//     are one forward scan from end = t-gap that stops at the first start
//     past t+gap (Kafka's SessionKeySchema orders key | end | start for the
//     same reason).
//
// The index orders every window of the store by end, then key: the windows
// a watermark closes (end + allowed lateness <= watermark, the rule of
// stream/internal/window) are the index range up to an end, one scan from
// the start of the index, and each index key names its window entry. The
// index holds the same fields as the window keys, so it can be rebuilt from
// them (after a restore that did not carry it).
const (
	TagWindow = 'w'
	TagIndex  = 'c'
)

// WindowKey appends the window entry key of (key, [start, end]).
func WindowKey(dst, key []byte, start, end int64) []byte {
	dst = append(dst, TagWindow)
	dst = AppendKey(dst, key)
	dst = AppendTime(dst, end)
	return AppendTime(dst, start)
}

// ParseWindowKey decodes a window entry key. key is a new slice.
func ParseWindowKey(b []byte) (key []byte, start, end int64, err error) {
	if len(b) == 0 || b[0] != TagWindow {
		return nil, 0, 0, fmt.Errorf("%w: not a window key", ErrMalformed)
	}
	key, rest, err := ReadKey(b[1:])
	if err != nil {
		return nil, 0, 0, err
	}
	if len(rest) != 2*TimeSize {
		return nil, 0, 0, fmt.Errorf("%w: window key has %d bytes of times, want %d", ErrMalformed, len(rest), 2*TimeSize)
	}
	end, start = readTime(rest), readTime(rest[TimeSize:])
	if end < start {
		return nil, 0, 0, fmt.Errorf("%w: window ends (%d) before it starts (%d)", ErrMalformed, end, start)
	}
	return key, start, end, nil
}

// WindowEntries narrows the key range [from, to) (nil: unbounded) to the
// window entries, leaving out the close index and every other entry of
// the store: a window store's contents as its readers see them.
func WindowEntries(from, to []byte) (lo, hi []byte) {
	lo, hi = from, to
	if first := []byte{TagWindow}; lo == nil || bytes.Compare(lo, first) < 0 {
		lo = first
	}
	if past := []byte{TagWindow + 1}; hi == nil || bytes.Compare(hi, past) > 0 {
		hi = past
	}
	return lo, hi
}

// IndexKey appends the close index key of (key, [start, end]).
func IndexKey(dst, key []byte, start, end int64) []byte {
	dst = append(dst, TagIndex)
	dst = AppendTime(dst, end)
	dst = AppendKey(dst, key)
	return AppendTime(dst, start)
}

// ParseIndexKey decodes a close index key. key is a new slice.
func ParseIndexKey(b []byte) (key []byte, start, end int64, err error) {
	if len(b) < 1+TimeSize || b[0] != TagIndex {
		return nil, 0, 0, fmt.Errorf("%w: not a window index key", ErrMalformed)
	}
	end = readTime(b[1:])
	key, rest, err := ReadKey(b[1+TimeSize:])
	if err != nil {
		return nil, 0, 0, err
	}
	if len(rest) != TimeSize {
		return nil, 0, 0, fmt.Errorf("%w: window index key has %d bytes after its key, want %d", ErrMalformed, len(rest), TimeSize)
	}
	start = readTime(rest)
	if end < start {
		return nil, 0, 0, fmt.Errorf("%w: window ends (%d) before it starts (%d)", ErrMalformed, end, start)
	}
	return key, start, end, nil
}

// KeyWindows returns the scan bounds [from, to) of key's windows whose end
// is at least minEnd, in end order (math.MinInt64: all of key's windows).
func KeyWindows(key []byte, minEnd int64) (from, to []byte) {
	from = make([]byte, 0, 1+escapedLen(key)+TimeSize)
	from = append(from, TagWindow)
	from = AppendKey(from, key)
	// The escaped key ends 0x00 0x01: every window key of key is below the
	// same bytes ending 0x00 0x02, and no other key's are.
	to = append([]byte(nil), from...)
	to[len(to)-1] = escFinal + 1
	return AppendTime(from, minEnd), to
}

// EndingBy returns the scan bounds [from, to) of the close index entries of
// the windows whose end is at most maxEnd, in end order.
func EndingBy(maxEnd int64) (from, to []byte) {
	from = []byte{TagIndex}
	if maxEnd == math.MaxInt64 {
		return from, []byte{TagIndex + 1}
	}
	return from, AppendTime([]byte{TagIndex}, maxEnd+1)
}
