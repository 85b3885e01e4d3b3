package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Windowed is the key of a windowed aggregate's result: the grouping key and
// the window the result belongs to.
//
// Times are whole milliseconds (Kafka's resolution) in UTC. For a time window
// (tumbling, hopping, calendar) End is exclusive: the window holds records
// with Start <= t < End. For a sliding or session window End is inclusive,
// as in Kafka Streams: a session's End is the time of its last record, a
// sliding window holds Start <= t <= End.
type Windowed[K any] struct {
	Key        K
	Start, End time.Time
}

// The windowed key formats are Kafka Streams' (TimeWindowedSerializer,
// SessionWindowedSerializer; org.apache.kafka.streams.state.internals
// WindowKeySchema.toBinary and SessionKeySchema.toBinary), so a Java
// consumer with Kafka's windowed serdes reads weir's windowed output and the
// reverse:
//
//	time window:     key bytes | start int64 BE (ms)
//	session window:  key bytes | end int64 BE (ms) | start int64 BE (ms)
//
// The key bytes are the key codec's, unframed: the window times are the
// fixed-size suffix. A time window's end is not written; the reader derives
// it from the window size (Kafka: start + size, saturated at MaxInt64).
//
// The bytes are the same both ways; what each side accepts differs at the
// edges. Kafka's Window rejects a negative start and its TimeWindow an end
// equal to the start, so a Java consumer throws on a pre-1970 window weir
// wrote, and on a window of Sliding(0); and Kafka's deserializers return
// null for empty bytes, where Decode returns an error. Kafka saturates a
// time window's end when start + size is negative, weir when it overflows:
// the same for every start Kafka accepts.
const windowTimeSize = 8

// errWindowedShort is returned when windowed key bytes are shorter than the
// window suffix.
var errWindowedShort = errors.New("windowed key shorter than its window suffix")

// errSessionOrder is returned for a session key whose end is before its start.
var errSessionOrder = errors.New("session window ends before it starts")

// TimeWindowed returns the codec of time-windowed keys (tumbling, hopping,
// sliding) in Kafka Streams' TimeWindowedSerializer format: the key's bytes
// by key, then the window start as 8 big-endian bytes of milliseconds. size
// is the window size: Decode sets End = Start + size (saturated at the
// largest time, like Kafka's TimeWindowedDeserializer), so it must be the size
// of the windows that were written. For calendar windows (whose length
// varies with the zone's DST) use TimeWindowedEnd.
func TimeWindowed[K any](key Codec[K], size time.Duration) Codec[Windowed[K]] {
	sizeMs := size.Milliseconds()
	return timeWindowedCodec[K]{key: key, end: func(startMs int64) int64 {
		end := startMs + sizeMs
		if end < startMs {
			return math.MaxInt64
		}
		return end
	}}
}

// TimeWindowedEnd is TimeWindowed for windows whose end is not a fixed size
// after their start (calendar windows in a time zone): Decode sets End =
// end(Start). The bytes are the same as TimeWindowed's.
func TimeWindowedEnd[K any](key Codec[K], end func(start time.Time) time.Time) Codec[Windowed[K]] {
	return timeWindowedCodec[K]{key: key, end: func(startMs int64) int64 {
		return end(time.UnixMilli(startMs).UTC()).UnixMilli()
	}}
}

type timeWindowedCodec[K any] struct {
	key Codec[K]
	end func(startMs int64) int64
}

func (c timeWindowedCodec[K]) Encode(w Windowed[K]) ([]byte, error) {
	kb, err := c.key.Encode(w.Key)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(kb)+windowTimeSize)
	b = append(b, kb...)
	return binary.BigEndian.AppendUint64(b, uint64(w.Start.UnixMilli())), nil
}

// appender: the windowed key's bytes are appended when the key's are.
func (c timeWindowedCodec[K]) appender() appendEncoder[Windowed[K]] {
	if ka := appenderOf(c.key); ka != nil {
		return timeWindowedAppender[K]{key: ka}
	}
	return nil
}

// timeWindowedAppender appends what timeWindowedCodec.Encode returns.
type timeWindowedAppender[K any] struct{ key appendEncoder[K] }

func (a timeWindowedAppender[K]) encodeSize(w Windowed[K]) int {
	return a.key.encodeSize(w.Key) + windowTimeSize
}

func (a timeWindowedAppender[K]) appendEncode(b []byte, w Windowed[K]) []byte {
	b = a.key.appendEncode(b, w.Key)
	return binary.BigEndian.AppendUint64(b, uint64(w.Start.UnixMilli()))
}

func (c timeWindowedCodec[K]) Decode(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	n := len(b) - windowTimeSize
	if n < 0 {
		return w, fmt.Errorf("%w: %d bytes", errWindowedShort, len(b))
	}
	k, err := c.key.Decode(b[:n:n])
	if err != nil {
		return w, err
	}
	start := int64(binary.BigEndian.Uint64(b[n:]))
	w.Key = k
	w.Start = time.UnixMilli(start).UTC()
	w.End = time.UnixMilli(c.end(start)).UTC()
	return w, nil
}

// SessionWindowed returns the codec of session-windowed keys in Kafka
// Streams' SessionWindowedSerializer format: the key's bytes by key, the
// session's end, then its start, each 8 big-endian bytes of milliseconds
// (both inclusive: the times of the session's first and last record).
// Decode rejects an end before the start.
func SessionWindowed[K any](key Codec[K]) Codec[Windowed[K]] {
	return sessionWindowedCodec[K]{key: key}
}

type sessionWindowedCodec[K any] struct{ key Codec[K] }

func (c sessionWindowedCodec[K]) Encode(w Windowed[K]) ([]byte, error) {
	kb, err := c.key.Encode(w.Key)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(kb)+2*windowTimeSize)
	b = append(b, kb...)
	b = binary.BigEndian.AppendUint64(b, uint64(w.End.UnixMilli()))
	return binary.BigEndian.AppendUint64(b, uint64(w.Start.UnixMilli())), nil
}

// appender: the windowed key's bytes are appended when the key's are.
func (c sessionWindowedCodec[K]) appender() appendEncoder[Windowed[K]] {
	if ka := appenderOf(c.key); ka != nil {
		return sessionWindowedAppender[K]{key: ka}
	}
	return nil
}

// sessionWindowedAppender appends what sessionWindowedCodec.Encode returns.
type sessionWindowedAppender[K any] struct{ key appendEncoder[K] }

func (a sessionWindowedAppender[K]) encodeSize(w Windowed[K]) int {
	return a.key.encodeSize(w.Key) + 2*windowTimeSize
}

func (a sessionWindowedAppender[K]) appendEncode(b []byte, w Windowed[K]) []byte {
	b = a.key.appendEncode(b, w.Key)
	b = binary.BigEndian.AppendUint64(b, uint64(w.End.UnixMilli()))
	return binary.BigEndian.AppendUint64(b, uint64(w.Start.UnixMilli()))
}

func (c sessionWindowedCodec[K]) Decode(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	n := len(b) - 2*windowTimeSize
	if n < 0 {
		return w, fmt.Errorf("%w: %d bytes", errWindowedShort, len(b))
	}
	end := int64(binary.BigEndian.Uint64(b[n:]))
	start := int64(binary.BigEndian.Uint64(b[n+windowTimeSize:]))
	if end < start {
		return w, fmt.Errorf("%w: start %d, end %d", errSessionOrder, start, end)
	}
	k, err := c.key.Decode(b[:n:n])
	if err != nil {
		return w, err
	}
	w.Key = k
	w.Start = time.UnixMilli(start).UTC()
	w.End = time.UnixMilli(end).UTC()
	return w, nil
}
