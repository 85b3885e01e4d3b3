package watermark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// The persisted state of a Tracker, written with the task's checkpoint (and
// changelog) so the watermark never goes backwards across restarts,
// rebalances and restores:
//
//	version u8 (=1)
//	watermark varint
//	inputs uvarint
//	{ len(topic) uvarint | topic | partition varint | maxEvent varint
//	  | writers uvarint | { watermark varint | flags u8 } * writers } * inputs
//	crc32c u32 BE                  (Castagnoli, over every preceding byte)
//
//	varint: Go's zigzag varint (encoding/binary.AppendVarint); flags bit 0: the
//	writer's last marker said idle, other bits 0.
//
// A source input has writers = 0. Processing times are not persisted: after
// Restore every idle timeout starts again at the restore.
const stateVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrState is wrapped by every error decoding a persisted tracker state.
var ErrState = errors.New("watermark: malformed tracker state")

// AppendState appends the tracker's persisted state.
func (t *Tracker) AppendState(dst []byte) []byte {
	return t.appendState(dst, 0, len(t.inputs), true)
}

// AppendInputState appends a persisted state (the same format, restored by
// Restore) holding the task's watermark and input in alone: what one input
// partition's committed offset carries. Without writers, a repartition
// input's writers are left out (stored as a source's: none), which Restore
// takes as a changed writer count — the watermarks survive, the writers'
// are heard again. It bounds the size whatever the upstream's task count.
func (t *Tracker) AppendInputState(dst []byte, in Input, writers bool) []byte {
	return t.appendState(dst, int(in), int(in)+1, writers)
}

// appendState appends the state of the inputs [from, to).
func (t *Tracker) appendState(dst []byte, from, to int, writers bool) []byte {
	start := len(dst)
	dst = append(dst, stateVersion)
	dst = binary.AppendVarint(dst, t.wm)
	dst = binary.AppendUvarint(dst, uint64(to-from))
	for i := from; i < to; i++ {
		p := &t.inputs[i]
		dst = binary.AppendUvarint(dst, uint64(len(p.topic)))
		dst = append(dst, p.topic...)
		dst = binary.AppendVarint(dst, int64(p.partition))
		dst = binary.AppendVarint(dst, p.maxEvent)
		if !writers {
			dst = binary.AppendUvarint(dst, 0)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(p.writers)))
		for _, w := range p.writers {
			dst = binary.AppendVarint(dst, w.wm)
			var flags byte
			if w.saidIdle {
				flags = 1
			}
			dst = append(dst, flags)
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// savedInput is one input of a decoded state.
type savedInput struct {
	topic     string
	partition int32
	maxEvent  int64
	writers   []writer
}

// decodeState decodes a persisted state.
func decodeState(b []byte) (wm int64, inputs []savedInput, err error) {
	if len(b) < 1+4 {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrState, len(b))
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return 0, nil, fmt.Errorf("%w: crc 0x%08x, want 0x%08x", ErrState, got, want)
	}
	if body[0] != stateVersion {
		return 0, nil, fmt.Errorf("%w: version %d", ErrState, body[0])
	}
	r := reader{b: body[1:]}
	wm = r.varint()
	n := r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		var in savedInput
		in.topic = string(r.bytes(r.uvarint()))
		part := r.varint()
		if part < -1<<31 || part > 1<<31-1 {
			r.fail("partition out of range")
		}
		in.partition = int32(part)
		in.maxEvent = r.varint()
		nw := r.uvarint()
		if nw > uint64(len(r.b)) { // each writer takes at least 2 bytes
			r.fail("writer count exceeds the data")
		}
		for j := uint64(0); j < nw && r.err == nil; j++ {
			w := writer{wm: r.varint()}
			switch f := r.byte(); f {
			case 0:
			case 1:
				w.saidIdle = true
			default:
				r.fail(fmt.Sprintf("writer flags 0x%02x", f))
			}
			in.writers = append(in.writers, w)
		}
		inputs = append(inputs, in)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	if r.err != nil {
		return 0, nil, r.err
	}
	return wm, inputs, nil
}

// InputState is a decoded state of one input (AppendInputState's), for
// tools reading a task's committed offsets from outside it.
type InputState struct {
	Watermark int64 // the task's
	Topic     string
	Partition int32
	MaxEvent  int64 // the input's largest event time (math.MinInt64: none)
	Writers   int   // upstream writers whose watermarks it holds (0: a source, or left out)
}

// DecodeInputState decodes a state holding exactly one input. Errors wrap
// ErrState.
func DecodeInputState(b []byte) (InputState, error) {
	wm, inputs, err := decodeState(b)
	if err != nil {
		return InputState{}, err
	}
	if len(inputs) != 1 {
		return InputState{}, fmt.Errorf("%w: %d inputs, want 1", ErrState, len(inputs))
	}
	in := inputs[0]
	return InputState{Watermark: wm, Topic: in.topic, Partition: in.partition, MaxEvent: in.maxEvent, Writers: len(in.writers)}, nil
}

// Restore merges a state written by AppendState into t, at processing time
// now: the watermark, every input's largest event time and every writer's
// watermark become the larger of the saved and the current value, so nothing
// goes backwards. Saved inputs the tracker does not have are ignored; the
// writers of a repartition input whose writer count changed (the upstream
// sub-topology was resized) are not restored, so they hold that input until
// they are heard from or idle — the task's watermark itself never goes back.
// Every input's and writer's idle timeout starts again at now.
func (t *Tracker) Restore(b []byte, now time.Time) error {
	wm, saved, err := decodeState(b)
	if err != nil {
		return err
	}
	t.wm = max(t.wm, wm)
	for _, s := range saved {
		for i := range t.inputs {
			p := &t.inputs[i]
			if p.topic != s.topic || p.partition != s.partition {
				continue
			}
			p.maxEvent = max(p.maxEvent, s.maxEvent)
			p.lastActive = now
			if len(s.writers) == len(p.writers) {
				for j := range p.writers {
					w := &p.writers[j]
					w.wm = max(w.wm, s.writers[j].wm)
					w.saidIdle = s.writers[j].saidIdle
					w.lastMarker = now
				}
			}
		}
	}
	return nil
}

// reader decodes the state body; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(reason string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrState, reason)
	}
	r.b = nil
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail("string exceeds the data")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}
