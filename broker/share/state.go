package share

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Durable share state: the records of the compacted internal topic
// __share_group_state (one partition). Every record's key names what it
// describes, so compaction keeps the latest record of each; a record with
// a nil value (tombstone) deletes it. The coordinator replays the whole
// partition at start, the latest record of a key winning.
//
// Key, all integers big-endian:
//
//	+---------+---------------------------------------------------+
//	| int16   | key version: 0 share-partition state, 1 group conf |
//	+---------+---------------------------------------------------+
//	| v0: string group | [16]byte topic ID | int32 partition       |
//	| v1: string group                                             |
//	+--------------------------------------------------------------+
//
// string is an int16 length then the bytes.
//
// Share-partition state value (version 0), a whole snapshot of the
// partition: its start offset, its end offset, then runs of consecutive
// in-flight records with one state and delivery count:
//
//	+-------+-------------+-----------+-------------+---------------------------------------+
//	| int16 | int64 start | int64 end | int32 nruns | nruns × (int64 first, int64 last,     |
//	| = 0   |             |           |             |          int8 state, int16 count)     |
//	+-------+-------------+-----------+-------------+---------------------------------------+
//
// An acquired record is written as available with its delivery count
// (locks do not survive a restart; the count does, so a record is never
// delivered beyond the limit). The runs cover [start, end) exactly, in
// order. Group config value (version 0): int16 0 then a JSON object of
// config names to values.
//
// The version numbers and layouts are part of the format: never change
// them, add a version.

const (
	keyPartition int16 = 0
	keyGroupConf int16 = 1
)

// ErrCorruptState wraps every decoding error of a state record.
var ErrCorruptState = errors.New("share: corrupt state record")

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readStr(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

func partitionKey(k partKey) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(keyPartition))
	b = appendStr(b, k.group)
	b = append(b, k.topicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.part))
}

func groupConfKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(keyGroupConf))
	return appendStr(b, group)
}

// decodedKey is a decoded state key.
type decodedKey struct {
	kind  int16
	group string
	part  partKey // kind keyPartition
}

func decodeKey(b []byte) (decodedKey, error) {
	var k decodedKey
	if len(b) < 2 {
		return k, fmt.Errorf("%w: key of %d bytes", ErrCorruptState, len(b))
	}
	k.kind = int16(binary.BigEndian.Uint16(b))
	g, rest, ok := readStr(b[2:])
	if !ok {
		return k, fmt.Errorf("%w: key group", ErrCorruptState)
	}
	k.group = g
	switch k.kind {
	case keyPartition:
		if len(rest) != 20 {
			return k, fmt.Errorf("%w: partition key tail of %d bytes", ErrCorruptState, len(rest))
		}
		k.part.group = g
		copy(k.part.topicID[:], rest)
		k.part.part = int32(binary.BigEndian.Uint32(rest[16:]))
	case keyGroupConf:
		if len(rest) != 0 {
			return k, fmt.Errorf("%w: group config key has %d trailing bytes", ErrCorruptState, len(rest))
		}
	default:
		return k, fmt.Errorf("%w: key version %d", ErrCorruptState, k.kind)
	}
	return k, nil
}

const runSize = 8 + 8 + 1 + 2

// encodePartition is p's snapshot value.
func encodePartition(p *sharePartition) []byte {
	type run struct {
		first, last int64
		state       deliveryState
		count       int16
	}
	var runs []run
	for i, r := range p.recs {
		st := r.state
		if st == stAcquired {
			st = stAvailable
		}
		o := p.start + int64(i)
		if n := len(runs); n > 0 && runs[n-1].state == st && runs[n-1].count == r.count {
			runs[n-1].last = o
			continue
		}
		runs = append(runs, run{o, o, st, r.count})
	}
	b := make([]byte, 0, 2+8+8+4+len(runs)*runSize)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(p.start))
	b = binary.BigEndian.AppendUint64(b, uint64(p.end()))
	b = binary.BigEndian.AppendUint32(b, uint32(len(runs)))
	for _, r := range runs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.first))
		b = binary.BigEndian.AppendUint64(b, uint64(r.last))
		b = append(b, byte(r.state))
		b = binary.BigEndian.AppendUint16(b, uint16(r.count))
	}
	return b
}

// decodePartition restores a snapshot into p (start and recs). maxWindow
// bounds the in-flight window a record may claim, so a corrupt value
// cannot make the decoder allocate without bound.
func decodePartition(v []byte, p *sharePartition, maxWindow int64) error {
	if len(v) < 2+8+8+4 {
		return fmt.Errorf("%w: partition value of %d bytes", ErrCorruptState, len(v))
	}
	if ver := binary.BigEndian.Uint16(v); ver != 0 {
		return fmt.Errorf("%w: partition value version %d", ErrCorruptState, ver)
	}
	start := int64(binary.BigEndian.Uint64(v[2:]))
	end := int64(binary.BigEndian.Uint64(v[10:]))
	nruns := binary.BigEndian.Uint32(v[18:])
	v = v[22:]
	if start < 0 || end < start || end-start > maxWindow {
		return fmt.Errorf("%w: in-flight window %d-%d", ErrCorruptState, start, end)
	}
	if uint64(len(v)) != uint64(nruns)*runSize {
		return fmt.Errorf("%w: %d runs in %d bytes", ErrCorruptState, nruns, len(v))
	}
	recs := make([]inflight, 0, end-start)
	next := start
	for i := uint32(0); i < nruns; i++ {
		first := int64(binary.BigEndian.Uint64(v))
		last := int64(binary.BigEndian.Uint64(v[8:]))
		st := deliveryState(v[16])
		count := int16(binary.BigEndian.Uint16(v[17:]))
		v = v[runSize:]
		if first != next || last < first || last >= end {
			return fmt.Errorf("%w: run %d-%d does not follow %d within %d-%d", ErrCorruptState, first, last, next, start, end)
		}
		if st == stAcquired || st > stArchived || count < 0 {
			return fmt.Errorf("%w: run %d-%d state %d count %d", ErrCorruptState, first, last, st, count)
		}
		for o := first; o <= last; o++ {
			recs = append(recs, inflight{state: st, count: count})
		}
		next = last + 1
	}
	if next != end {
		return fmt.Errorf("%w: runs end at %d, window ends at %d", ErrCorruptState, next, end)
	}
	p.start, p.recs = start, recs
	return nil
}

func encodeGroupConf(m map[string]string) []byte {
	j, _ := json.Marshal(m) // a map of strings always marshals
	return append(binary.BigEndian.AppendUint16(nil, 0), j...)
}

func decodeGroupConf(v []byte) (map[string]string, error) {
	if len(v) < 2 || binary.BigEndian.Uint16(v) != 0 {
		return nil, fmt.Errorf("%w: group config value", ErrCorruptState)
	}
	m := map[string]string{}
	if err := json.Unmarshal(v[2:], &m); err != nil {
		return nil, fmt.Errorf("%w: group config value: %v", ErrCorruptState, err)
	}
	return m, nil
}
