package watermark

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// MarkerHeader is the reserved header that makes a record a watermark
// marker. A marker has a null key and a null value and exactly this header;
// every consumer must treat a record carrying it as a marker, never as data
// (the stream library folds it into the partition's watermark; `weir
// consume` shows it as a marker). The name is part of the format
// (docs/format/watermark.md).
const MarkerHeader = "weir.wm"

// Marker is the content of a watermark marker: upstream task Writer (of
// Writers tasks of the upstream sub-topology, 0 <= Writer < Writers) has
// watermark Watermark (ms) for the partition the marker was written to; Idle
// says all of the writer's own inputs are idle, so it holds no partition back
// until its next non-idle marker.
type Marker struct {
	Writer, Writers uint32
	Watermark       int64
	Idle            bool
}

// The header value:
//
//	version u8 (=1) | flags u8 | writer u32 BE | writers u32 BE | watermark int64 BE
//
//	flags: bit 0 = idle; the other bits are 0 in version 1
//
// 18 bytes. The watermark is two's complement milliseconds since the Unix
// epoch (not order-encoded: a header is read, not sorted).
const (
	markerVersion = 1
	markerSize    = 18
	markerIdle    = 1 << 0
)

// ErrMarker is wrapped by every error decoding a marker.
var ErrMarker = errors.New("watermark: malformed marker")

// AppendMarker appends the header value of m.
func AppendMarker(dst []byte, m Marker) []byte {
	var flags byte
	if m.Idle {
		flags |= markerIdle
	}
	dst = append(dst, markerVersion, flags)
	dst = binary.BigEndian.AppendUint32(dst, m.Writer)
	dst = binary.BigEndian.AppendUint32(dst, m.Writers)
	return binary.BigEndian.AppendUint64(dst, uint64(m.Watermark))
}

// DecodeMarker decodes a marker header value.
func DecodeMarker(b []byte) (Marker, error) {
	if len(b) != markerSize {
		return Marker{}, fmt.Errorf("%w: %d bytes, want %d", ErrMarker, len(b), markerSize)
	}
	if b[0] != markerVersion {
		return Marker{}, fmt.Errorf("%w: version %d", ErrMarker, b[0])
	}
	if b[1]&^markerIdle != 0 {
		return Marker{}, fmt.Errorf("%w: unknown flags 0x%02x", ErrMarker, b[1])
	}
	m := Marker{
		Idle:      b[1]&markerIdle != 0,
		Writer:    binary.BigEndian.Uint32(b[2:]),
		Writers:   binary.BigEndian.Uint32(b[6:]),
		Watermark: int64(binary.BigEndian.Uint64(b[10:])),
	}
	if m.Writer >= m.Writers {
		return Marker{}, fmt.Errorf("%w: writer %d of %d", ErrMarker, m.Writer, m.Writers)
	}
	return m, nil
}

// IsMarker reports whether r is a watermark marker (carries MarkerHeader).
func IsMarker(r *kgo.Record) bool {
	for i := range r.Headers {
		if r.Headers[i].Key == MarkerHeader {
			return true
		}
	}
	return false
}

// MarkerOf returns the marker r carries; ok is false if r is not a marker.
// A marker whose header does not decode is an error (ok true): the caller
// skips it, never decodes it as data.
func MarkerOf(r *kgo.Record) (m Marker, ok bool, err error) {
	for i := range r.Headers {
		if r.Headers[i].Key == MarkerHeader {
			m, err = DecodeMarker(r.Headers[i].Value)
			return m, true, err
		}
	}
	return Marker{}, false, nil
}

// MarkerRecord returns the marker record of m for one partition of a
// repartition topic (a writer sends one to every partition of each
// repartition topic it writes). Key and value are null; the producer sets the
// record timestamp.
func MarkerRecord(topic string, partition int32, m Marker) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: partition,
		Headers:   []kgo.RecordHeader{{Key: MarkerHeader, Value: AppendMarker(make([]byte, 0, markerSize), m)}},
	}
}
