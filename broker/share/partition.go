package share

import (
	"errors"
	"fmt"
	"time"
)

// The share-partition: the delivery state of one topic-partition for one
// share group (KIP-932 "share-partition").
//
//	        start (SPSO)                      end (SPEO)
//	            |                                |
//	... done ...| A  Q  K  A  X  Q  Q  A  ...    | never acquired ...
//	            |<------ in flight: recs -------->|
//
// Invariants (checked by check, which the tests call after every step):
//   - Every record below start is acknowledged or archived: it is never
//     delivered again.
//   - recs[i] is the state of offset start+i; len(recs) = end - start and
//     never exceeds the group's max record locks (the in-flight window).
//   - Every record at or beyond end has never been acquired (available,
//     delivery count 0).
//   - recs[0], if any, is not acknowledged or archived (settle moves start
//     past them).
//   - A record is acquired by exactly one member until it is acknowledged,
//     released, its lock expires, or its member's share session closes; its
//     delivery count is the number of times it was acquired and never
//     exceeds the delivery count limit.

// deliveryState is a record's state within the in-flight window.
type deliveryState uint8

const (
	stAvailable    deliveryState = iota // may be acquired
	stAcquired                          // locked to one member
	stAcknowledged                      // accepted: done
	stArchived                          // rejected, gap, or delivery count limit reached: done
)

func (s deliveryState) String() string {
	switch s {
	case stAvailable:
		return "available"
	case stAcquired:
		return "acquired"
	case stAcknowledged:
		return "acknowledged"
	case stArchived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Acknowledge types of ShareFetch and ShareAcknowledge (KIP-932; 4 is
// KIP-1222's renew).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// inflight is one record's state.
type inflight struct {
	state    deliveryState
	count    int16     // times acquired
	member   string    // holder while acquired
	deadline time.Time // acquisition lock expiry while acquired
}

// partKey names a share-partition.
type partKey struct {
	group   string
	topicID [16]byte
	part    int32
}

// sharePartition is the delivery state of one share-partition. It is
// guarded by its Coordinator's mutex.
type sharePartition struct {
	key   partKey
	topic string // name, for metrics and admin answers
	start int64  // share-partition start offset (SPSO)
	recs  []inflight
}

func (p *sharePartition) end() int64 { return p.start + int64(len(p.recs)) }

// at returns the state of offset o, which must be in [start, end).
func (p *sharePartition) at(o int64) *inflight { return &p.recs[o-p.start] }

// settle moves start past the leading acknowledged and archived records.
// It reports whether start moved.
func (p *sharePartition) settle() bool {
	n := 0
	for n < len(p.recs) && (p.recs[n].state == stAcknowledged || p.recs[n].state == stArchived) {
		n++
	}
	if n == 0 {
		return false
	}
	p.start += int64(n)
	p.recs = append(p.recs[:0], p.recs[n:]...)
	return true
}

// moveStart makes offset o the start when o is above it (the log's start
// moved past records by retention or DeleteRecords, or an admin set it):
// records below o are gone, whatever their state. It reports a change.
func (p *sharePartition) moveStart(o int64) bool {
	if o <= p.start {
		return false
	}
	if o >= p.end() {
		p.recs = p.recs[:0]
	} else {
		p.recs = append(p.recs[:0], p.recs[o-p.start:]...)
	}
	p.start = o
	p.settle()
	return true
}

// releaseOne returns an acquired record to the available records, or
// archives it when its delivery count reached limit.
func releaseOne(r *inflight, limit int16) {
	r.member, r.deadline = "", time.Time{}
	if r.count >= limit {
		r.state = stArchived
		return
	}
	r.state = stAvailable
}

// expire releases the records whose lock expired by now. It returns how
// many were released (or archived).
func (p *sharePartition) expire(now time.Time, limit int16) int {
	n := 0
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == stAcquired && !now.Before(r.deadline) {
			releaseOne(r, limit)
			n++
		}
	}
	if n > 0 {
		p.settle()
	}
	return n
}

// releaseMember releases every record member holds (its share session
// closed or it left the group). It returns how many.
func (p *sharePartition) releaseMember(member string, limit int16) int {
	n := 0
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == stAcquired && r.member == member {
			releaseOne(r, limit)
			n++
		}
	}
	if n > 0 {
		p.settle()
	}
	return n
}

// acquired counts the records currently acquired.
func (p *sharePartition) acquired() int {
	n := 0
	for i := range p.recs {
		if p.recs[i].state == stAcquired {
			n++
		}
	}
	return n
}

// AckBatch is one acknowledgement batch of a request: Types holds one type
// for the whole range, or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// errInvalidRecordState is the acknowledgement of a record the member does
// not hold (INVALID_RECORD_STATE on the wire).
var errInvalidRecordState = errors.New("invalid record state")

// errInvalidAck is a malformed acknowledgement batch (INVALID_REQUEST).
var errInvalidAck = errors.New("invalid acknowledgement")

// typeAt is the acknowledge type of offset o of batch b.
func (b *AckBatch) typeAt(o int64) int8 {
	if len(b.Types) == 1 {
		return b.Types[0]
	}
	return b.Types[o-b.First]
}

// validateAcks checks batches' shape: ordered, non-overlapping ranges, one
// type or one per offset, known types (renew only when allowed).
func validateAcks(batches []AckBatch, renewOK bool) error {
	prev := int64(-1)
	for i := range batches {
		b := &batches[i]
		if b.First < 0 || b.Last < b.First || b.First <= prev {
			return fmt.Errorf("%w: batch %d-%d out of order or empty", errInvalidAck, b.First, b.Last)
		}
		if n := b.Last - b.First + 1; len(b.Types) != 1 && int64(len(b.Types)) != n {
			return fmt.Errorf("%w: batch %d-%d has %d acknowledge types", errInvalidAck, b.First, b.Last, len(b.Types))
		}
		for _, t := range b.Types {
			if t < AckGap || t > AckRenew || (t == AckRenew && !renewOK) {
				return fmt.Errorf("%w: acknowledge type %d", errInvalidAck, t)
			}
		}
		prev = b.Last
	}
	return nil
}

// ack applies member's acknowledgements: all of them or, if any names a
// record member does not hold, none (errInvalidRecordState). A renew
// extends the lock to renewUntil. It reports how many records each type
// settled, indexed by type.
func (p *sharePartition) ack(member string, batches []AckBatch, limit int16, renewUntil time.Time) (counts [5]int, err error) {
	for i := range batches {
		b := &batches[i]
		for o := b.First; o <= b.Last; o++ {
			if o < p.start || o >= p.end() {
				return counts, fmt.Errorf("%w: offset %d is not in flight (in flight: %d-%d)", errInvalidRecordState, o, p.start, p.end())
			}
			if r := p.at(o); r.state != stAcquired || r.member != member {
				return counts, fmt.Errorf("%w: offset %d is %s, not acquired by this member", errInvalidRecordState, o, r.state)
			}
		}
	}
	for i := range batches {
		b := &batches[i]
		for o := b.First; o <= b.Last; o++ {
			r := p.at(o)
			t := b.typeAt(o)
			counts[t]++
			switch t {
			case AckAccept:
				r.state, r.member, r.deadline = stAcknowledged, "", time.Time{}
			case AckRelease:
				releaseOne(r, limit)
			case AckReject, AckGap:
				r.state, r.member, r.deadline = stArchived, "", time.Time{}
			case AckRenew:
				r.deadline = renewUntil
			}
		}
	}
	p.settle()
	return counts, nil
}

// check verifies the invariants above; tests call it after every step.
func (p *sharePartition) check(limit int16, maxLocks int) error {
	if len(p.recs) > maxLocks {
		return fmt.Errorf("%d records in flight, window is %d", len(p.recs), maxLocks)
	}
	if len(p.recs) > 0 && (p.recs[0].state == stAcknowledged || p.recs[0].state == stArchived) {
		return fmt.Errorf("start %d is %s: not settled", p.start, p.recs[0].state)
	}
	for i, r := range p.recs {
		if r.count > limit {
			return fmt.Errorf("offset %d delivered %d times, limit %d", p.start+int64(i), r.count, limit)
		}
		if (r.state == stAcquired) != (r.member != "") {
			return fmt.Errorf("offset %d is %s with holder %q", p.start+int64(i), r.state, r.member)
		}
		if r.state == stAcquired && r.count < 1 {
			return fmt.Errorf("offset %d acquired with delivery count %d", p.start+int64(i), r.count)
		}
	}
	return nil
}
