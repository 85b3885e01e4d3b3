package timekey

import (
	"fmt"
	"math"
)

// Timer keys. A timer is keyed state: it belongs to a key, fires at a time
// in one time domain, and carries a name (the operator's own tag for it,
// possibly empty) so one key may hold several timers at the same time:
//
//	timer:  domain u8 | fire time | key (escaped) | name   -> (empty, or the operator's payload)
//
//	domain: 'e' event time (fires when the task's watermark reaches it)
//	        'p' processing time (fires when the task's clock reaches it)
//
// Timers of one domain are ordered by fire time, then key, then name: the
// timers a watermark or clock reading W fires are one ordered scan from the
// start of the domain to W (FiringBy), in the order they fire. Setting a
// timer twice (same domain, time, key and name) is one timer. Deleting one
// needs its time, as in Flink (deleteEventTimeTimer(time)).

// Domain is the time domain of a timer.
type Domain byte

const (
	EventTime      Domain = 'e'
	ProcessingTime Domain = 'p'
)

func (d Domain) valid() bool { return d == EventTime || d == ProcessingTime }

// String returns "event-time" or "processing-time".
func (d Domain) String() string {
	switch d {
	case EventTime:
		return "event-time"
	case ProcessingTime:
		return "processing-time"
	}
	return fmt.Sprintf("domain(0x%02x)", byte(d))
}

// Timer is one timer.
type Timer struct {
	Domain Domain
	Fire   int64 // milliseconds: event time or processing (Unix) time
	Key    []byte
	Name   []byte
}

// TimerKey appends the key of timer t. It panics on an invalid domain, a
// programming error.
func TimerKey(dst []byte, t Timer) []byte {
	if !t.Domain.valid() {
		panic("timekey: invalid timer domain " + t.Domain.String())
	}
	dst = append(dst, byte(t.Domain))
	dst = AppendTime(dst, t.Fire)
	dst = AppendKey(dst, t.Key)
	return append(dst, t.Name...)
}

// ParseTimerKey decodes a timer key. Key and Name are new slices.
func ParseTimerKey(b []byte) (Timer, error) {
	if len(b) < 1+TimeSize || !Domain(b[0]).valid() {
		return Timer{}, fmt.Errorf("%w: not a timer key", ErrMalformed)
	}
	t := Timer{Domain: Domain(b[0]), Fire: readTime(b[1:])}
	key, rest, err := ReadKey(b[1+TimeSize:])
	if err != nil {
		return Timer{}, err
	}
	t.Key = key
	t.Name = append([]byte{}, rest...)
	return t, nil
}

// FiringBy returns the scan bounds [from, to) of the timers of domain d
// that fire at or before w, in firing order.
func FiringBy(d Domain, w int64) (from, to []byte) {
	from = []byte{byte(d)}
	if w == math.MaxInt64 {
		return from, []byte{byte(d) + 1}
	}
	return from, AppendTime([]byte{byte(d)}, w+1)
}
