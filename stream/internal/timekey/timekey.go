// Package timekey lays out the keys of time-ordered state: window stores and
// timers. The keys are the store keys a task writes into its local state
// (stream/internal/state) and its changelogs, so byte order is the order of a
// Pebble scan. The layouts are a persisted format (docs/format/state.md,
// "Window and timer keys"): change them only with a new state FormatVersion.
//
// Two building blocks, both order-preserving:
//
//   - a time (int64 milliseconds) is 8 big-endian bytes with the sign bit
//     flipped, so byte order is numeric order, negative times included (the
//     encoding of stream/internal/state's timestamps);
//   - a user key is escaped and terminated: every 0x00 byte is written as
//     0x00 0xFF and the key ends with 0x00 0x01. Escaped keys compare as the
//     raw keys do, and no escaped key is a prefix of another's, so the
//     entries of one key are one contiguous range even when another key
//     extends it ("a" and "a\x00"). The cost is two bytes per key plus one
//     per 0x00 byte in it.
package timekey

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// TimeSize is the encoded size of a time.
const TimeSize = 8

// ErrMalformed is wrapped by every decode error of this package.
var ErrMalformed = errors.New("timekey: malformed key")

const (
	escByte  = 0x00
	escZero  = 0xFF // 0x00 0xFF is a 0x00 byte of the key
	escFinal = 0x01 // 0x00 0x01 ends the key
)

// AppendTime appends ms in order-preserving form.
func AppendTime(dst []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ms)^(1<<63))
}

// ReadTime decodes a time from the first TimeSize bytes of b.
func ReadTime(b []byte) int64 { return readTime(b) }

// readTime decodes a time from the first TimeSize bytes of b.
func readTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// AppendKey appends key escaped and terminated (see the package doc).
func AppendKey(dst, key []byte) []byte {
	for {
		i := bytes.IndexByte(key, escByte)
		if i < 0 {
			break
		}
		dst = append(dst, key[:i+1]...)
		dst = append(dst, escZero)
		key = key[i+1:]
	}
	dst = append(dst, key...)
	return append(dst, escByte, escFinal)
}

// escapedLen is the length of key once escaped and terminated.
func escapedLen(key []byte) int { return len(key) + bytes.Count(key, []byte{escByte}) + 2 }

// ReadKey decodes an escaped key at the start of b: the raw key and the
// bytes after its terminator. The key is a new slice.
func ReadKey(b []byte) (key, rest []byte, err error) {
	key = make([]byte, 0, len(b))
	for {
		i := bytes.IndexByte(b, escByte)
		if i < 0 || i+1 >= len(b) {
			return nil, nil, fmt.Errorf("%w: unterminated key", ErrMalformed)
		}
		key = append(key, b[:i]...)
		switch b[i+1] {
		case escZero:
			key = append(key, escByte)
			b = b[i+2:]
		case escFinal:
			return key, b[i+2:], nil
		default:
			return nil, nil, fmt.Errorf("%w: escape byte 0x00 followed by 0x%02x", ErrMalformed, b[i+1])
		}
	}
}
