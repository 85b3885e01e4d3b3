package log

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
)

// offsetMap is the cleaner's key -> latest offset map (Kafka's
// SkimpyOffsetMap): bounded memory, open addressing over 128-bit key hashes
// (two independent 64-bit maphash values), 24 bytes per slot. Keys are
// never stored: a collision of both 64-bit hashes (probability ~2^-128 per
// pair) would make the cleaner drop an older key's records, the same
// trade-off Kafka makes with MD5. It holds at most maxLoad of its largest
// table's slots so probes stay short; put reports errMapFull beyond that.
//
// The table starts small and doubles (rehashing the stored hashes) up to
// the size the memory bound allows: a log with few keys neither allocates
// and faults in the whole bound nor spreads its probes over it (the pass
// shares the CPU caches and the cores with the appenders).
type offsetMap struct {
	s1, s2 maphash.Seed
	slots  []uint64 // 3 words per slot: h1, h2, offset+1 (0: empty)
	n      int      // used slots
	grow   int      // used slots at which the table doubles (limit at full size)
	limit  int      // max used slots (maxLoad of maxSlots)
	mask   uint64
	// maxSlots is the slot count of the largest table (a power of two).
	maxSlots uint64
}

const (
	offsetMapSlotBytes = 24
	offsetMapMaxLoad   = 0.9
	// offsetMapMinSlots is the first table's slot count (1.5 MiB) when
	// the bound allows more.
	offsetMapMinSlots = 1 << 16
	// DefaultCleanerMapBytes is the offset map memory per clean (Kafka's
	// log.cleaner.dedupe.buffer.size is 128 MiB over all cleaner threads).
	DefaultCleanerMapBytes = 32 << 20
)

var errMapFull = errors.New("cleaner offset map full")

// newOffsetMap returns a map of at most about bytes bytes (rounded down to a
// power of two slots, at least 1024).
func newOffsetMap(bytes int) *offsetMap {
	n := uint64(1024)
	for n*2*offsetMapSlotBytes <= uint64(max(bytes, 0)) {
		n *= 2
	}
	m := &offsetMap{s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), maxSlots: n, limit: int(float64(n) * offsetMapMaxLoad)}
	m.alloc(min(n, offsetMapMinSlots))
	return m
}

// alloc replaces the table by an empty one of n slots.
func (m *offsetMap) alloc(n uint64) {
	m.slots = make([]uint64, 3*n)
	m.mask = n - 1
	m.grow = int(float64(n) * offsetMapMaxLoad)
}

// double moves the entries to a table twice as large.
func (m *offsetMap) double() {
	old := m.slots
	m.alloc(2 * (m.mask + 1))
	for i := 0; i < len(old); i += 3 {
		if old[i+2] == 0 {
			continue
		}
		j := old[i] & m.mask
		for m.slots[3*j+2] != 0 {
			j = (j + 1) & m.mask
		}
		copy(m.slots[3*j:3*j+3], old[i:i+3])
	}
}

func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.s1, key), maphash.Bytes(m.s2, key)
}

// put records offset as the latest offset of key (offsets arrive in
// increasing order, so the last put wins).
func (m *offsetMap) put(key []byte, offset int64) error {
	h1, h2 := m.hash(key)
	for i := h1 & m.mask; ; i = (i + 1) & m.mask {
		s := m.slots[3*i : 3*i+3]
		if s[2] == 0 {
			if m.n >= m.limit {
				return errMapFull
			}
			if m.n >= m.grow {
				m.double()
				return m.put(key, offset)
			}
			s[0], s[1], s[2] = h1, h2, uint64(offset)+1
			m.n++
			return nil
		}
		if s[0] == h1 && s[1] == h2 {
			s[2] = uint64(offset) + 1
			return nil
		}
	}
}

// get returns the latest offset of key, or -1 if the key is not in the map.
func (m *offsetMap) get(key []byte) int64 {
	h1, h2 := m.hash(key)
	for i := h1 & m.mask; ; i = (i + 1) & m.mask {
		s := m.slots[3*i : 3*i+3]
		if s[2] == 0 {
			return -1
		}
		if s[0] == h1 && s[1] == h2 {
			return int64(s[2] - 1)
		}
	}
}

// full reports whether the map reached its load limit.
func (m *offsetMap) full() bool { return m.n >= m.limit }

// record is one parsed record of a batch (slices alias the batch or the
// decompression buffer).
type record struct {
	tsDelta, offDelta int64
	key               []byte // nil if null
	valueNull         bool
}

// parseRecordBody decodes the fields of a record body (after its length
// varint) the cleaner needs. ok is false if the framing is bad.
func parseRecordBody(rec []byte) (r record, ok bool) {
	if len(rec) < 1 {
		return r, false
	}
	i := 1
	next := func() (int64, bool) {
		v, m := varint(rec[i:])
		if m <= 0 {
			return 0, false
		}
		i += m
		return v, true
	}
	var k, vl int64
	if r.tsDelta, ok = next(); !ok {
		return r, false
	}
	if r.offDelta, ok = next(); !ok {
		return r, false
	}
	if k, ok = next(); !ok || k < -1 || k > int64(len(rec)-i) {
		return r, false
	}
	if k >= 0 {
		r.key = rec[i : i+int(k) : i+int(k)]
		i += int(k)
	}
	if vl, ok = next(); !ok || vl < -1 || vl > int64(len(rec)-i) {
		return r, false
	}
	r.valueNull = vl < 0
	return r, true
}

// forEachRecord calls fn with each record body of the batch b (header h),
// decompressing if needed. A body is valid only during the call.
func forEachRecord(b []byte, h batchHeader, c *codecs, fn func(body []byte) error) error {
	if h.Compression() != codecNone {
		br, release, err := c.records(h.Compression(), b[batchHeaderSize:])
		if err != nil {
			return batchErr("decompress: %v", err)
		}
		defer release()
		return walkRecordStream(br, h.NumRecords, func(_ int32, rec []byte) error { return fn(rec) })
	}
	p := b[batchHeaderSize:]
	for n := int32(0); n < h.NumRecords; n++ {
		length, m := varint(p)
		if m <= 0 || length < 1 || length > int64(len(p)-m) {
			return batchErr("record %d: bad length", n)
		}
		if err := fn(p[m : m+int(length)]); err != nil {
			return err
		}
		p = p[m+int(length):]
	}
	return nil
}

// checkKeys rejects batches with a keyless data record (Kafka: a compacted
// topic refuses them with INVALID_RECORD, CORRUPT_MESSAGE before Produce
// v8) with a *RecordError naming the first one. Control batches are exempt.
func checkKeys(batches []byte, vs []validated, c *codecs) error {
	pos := 0
	index := int32(0)
	for i := range vs {
		h := vs[i].hdr
		b := batches[pos : pos+int(h.Size())]
		pos += len(b)
		if h.Attributes&attrControl != 0 {
			continue
		}
		err := forEachRecord(b, h, c, func(body []byte) error {
			r, ok := parseRecordBody(body)
			if !ok {
				return batchErr("bad record framing")
			}
			if r.key == nil {
				return &RecordError{Index: index, Message: "Compacted topic cannot accept message without key"}
			}
			index++
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// appendVarint appends a zig-zag varint.
func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }
