package broker

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch responses are written without copying record bytes in user space:
// the response is encoded by kmsg with a 16-byte marker in place of each
// large RecordBatches field, then written with writev as
//
//	encoded[..marker 0 length prefix] | prefix(len 0) | records 0 |
//	encoded[after marker 0 .. marker 1 prefix] | prefix(len 1) | records 1 | ... | rest
//
// The length prefix of a bytes field is an int32 (non-flexible versions)
// or a uvarint of length+1 (flexible versions); the marker's own prefix is
// checked before splicing, and any surprise falls back to the plain
// encoding (one copy). TestSpliceMatchesEncoding compares both byte for
// byte.

const (
	spliceMin    = 4 << 10 // smaller record sets are cheaper to copy
	markerLen    = 16
	markerPrefix = markerLen - 4
)

// spliceWriter holds a connection's per-process random marker prefix and
// reusable scratch space. Used only by the connection's write loop.
type spliceWriter struct {
	marker  [markerPrefix]byte
	bufs    net.Buffers
	pending []splicePart
	prefix  []byte
}

type splicePart struct {
	p    *kmsg.FetchResponseTopicPartition
	data []byte
}

func newSpliceWriter() *spliceWriter {
	sw := &spliceWriter{}
	_, _ = rand.Read(sw.marker[:])
	return sw
}

// spliceFetch is the vectored write of Fetch responses (its registration,
// 01_fetch.go).
func spliceFetch(sw *spliceWriter, buf []byte, corr int32, resp kmsg.Response) (net.Buffers, []byte, bool) {
	return sw.frame(buf, corr, resp.(*kmsg.FetchResponse))
}

// frame returns the frame of resp as buffers to write with writev, or ok
// false if the response has nothing worth splicing (or the splice check
// failed): the caller then encodes it plainly. buf is scratch space for the
// encoded (record-less) response; the returned buffers reference it.
func (sw *spliceWriter) frame(buf []byte, corr int32, resp *kmsg.FetchResponse) (net.Buffers, []byte, bool) {
	sw.pending = sw.pending[:0]
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			if len(p.RecordBatches) >= spliceMin {
				sw.pending = append(sw.pending, splicePart{p: p, data: p.RecordBatches})
			}
		}
	}
	if len(sw.pending) == 0 {
		return nil, buf, false
	}
	markers := make([]byte, markerLen*len(sw.pending))
	for i, sp := range sw.pending {
		m := markers[i*markerLen : (i+1)*markerLen]
		copy(m, sw.marker[:])
		binary.BigEndian.PutUint32(m[markerPrefix:], uint32(i))
		sp.p.RecordBatches = m
	}
	buf = appendResponse(buf[:0], corr, resp)
	for _, sp := range sw.pending {
		sp.p.RecordBatches = sp.data
	}

	flexible := resp.IsFlexible()
	sw.bufs = sw.bufs[:0]
	sw.prefix = sw.prefix[:0]
	total := 0
	pos := 0
	for i, sp := range sw.pending {
		m := markers[i*markerLen : (i+1)*markerLen]
		at := bytes.Index(buf[pos:], m)
		if at < 0 {
			return nil, buf, false
		}
		at += pos
		var oldPrefix int
		if flexible {
			// uvarint(markerLen+1) is one byte.
			if at < 1 || buf[at-1] != markerLen+1 {
				return nil, buf, false
			}
			oldPrefix = 1
		} else {
			if at < 4 || binary.BigEndian.Uint32(buf[at-4:]) != markerLen {
				return nil, buf, false
			}
			oldPrefix = 4
		}
		head := buf[pos : at-oldPrefix]
		start := len(sw.prefix)
		if flexible {
			sw.prefix = binary.AppendUvarint(sw.prefix, uint64(len(sp.data))+1)
		} else {
			sw.prefix = binary.BigEndian.AppendUint32(sw.prefix, uint32(len(sp.data)))
		}
		sw.bufs = append(sw.bufs, head, nil, sp.data) // nil: prefix, set below
		total += len(head) + (len(sw.prefix) - start) + len(sp.data)
		pos = at + markerLen
	}
	sw.bufs = append(sw.bufs, buf[pos:])
	total += len(buf) - pos
	// sw.prefix may have grown (reallocated) while appending: slice the
	// prefixes out only now.
	off := 0
	for i, sp := range sw.pending {
		n := 4
		if flexible {
			n = uvarintLen(uint64(len(sp.data)) + 1)
		}
		sw.bufs[i*3+1] = sw.prefix[off : off+n]
		off += n
	}
	binary.BigEndian.PutUint32(buf[:4], uint32(total-4))
	return sw.bufs, buf, true
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
