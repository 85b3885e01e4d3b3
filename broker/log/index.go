package log

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Index files. Both start with a 16-byte header and hold fixed-size
// big-endian entries. The layout and these constants are part of the on-disk
// format and must not change (bump indexVersion instead).
//
//	header (16 bytes)
//	+-------+---------+----------+-------------+
//	| magic | version | reserved | base offset |
//	|  4 B  |   1 B   |   3 B    |   int64     |
//	+-------+---------+----------+-------------+
//	.index entries (8 bytes):      relative offset uint32 | position uint32
//	.timeindex entries (12 bytes): timestamp int64        | relative offset uint32
//
// Offset index: entry i says the batch whose base offset is base+rel starts
// at byte position pos of the .log file. Both fields strictly increase.
// Position 0 (the first batch) is implied and never stored.
//
// Time index: entry i says every record in the batches up to and including
// the batch with base offset base+rel has a timestamp <= ts, and ts is the
// largest such timestamp seen when the entry was written. Timestamps
// strictly increase, relative offsets do not decrease. A closed segment's
// last entry carries the segment's largest timestamp.
const (
	indexHeaderSize  = 16
	offsetEntrySize  = 8
	timeEntrySize    = 12
	offsetIndexMagic = "WOIX"
	timeIndexMagic   = "WTIX"
	indexVersion     = 1
)

// indexHeader returns the header of an index file.
func indexHeader(magic string, base int64) []byte {
	h := make([]byte, indexHeaderSize)
	copy(h, magic)
	h[4] = indexVersion
	binary.BigEndian.PutUint64(h[8:], uint64(base))
	return h
}

// offsetIndex is the entries of an offset index (file bytes after the
// header), kept in the file's encoding: 8 bytes per entry in memory.
type offsetIndex struct{ b []byte }

func (x *offsetIndex) len() int { return len(x.b) / offsetEntrySize }

func (x *offsetIndex) entry(i int) (rel, pos uint32) {
	e := x.b[i*offsetEntrySize:]
	return binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])
}

func (x *offsetIndex) add(rel, pos uint32) {
	x.b = binary.BigEndian.AppendUint32(x.b, rel)
	x.b = binary.BigEndian.AppendUint32(x.b, pos)
}

// lookup returns the position of the last indexed batch whose relative base
// offset is <= rel, or 0 (the segment's first batch).
func (x *offsetIndex) lookup(rel uint32) int64 {
	n := x.len()
	i := sort.Search(n, func(i int) bool { r, _ := x.entry(i); return r > rel })
	if i == 0 {
		return 0
	}
	_, pos := x.entry(i - 1)
	return int64(pos)
}

// truncatePos drops the entries at or after byte position pos.
func (x *offsetIndex) truncatePos(pos int64) {
	n := x.len()
	i := sort.Search(n, func(i int) bool { _, p := x.entry(i); return int64(p) >= pos })
	x.b = x.b[:i*offsetEntrySize]
}

// lastPos is the position of the last entry, or 0.
func (x *offsetIndex) lastPos() int64 {
	if x.len() == 0 {
		return 0
	}
	_, p := x.entry(x.len() - 1)
	return int64(p)
}

// timeIndex is the entries of a time index, 12 bytes per entry in memory.
type timeIndex struct{ b []byte }

func (x *timeIndex) len() int { return len(x.b) / timeEntrySize }

func (x *timeIndex) entry(i int) (ts int64, rel uint32) {
	e := x.b[i*timeEntrySize:]
	return int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
}

func (x *timeIndex) add(ts int64, rel uint32) {
	x.b = binary.BigEndian.AppendUint64(x.b, uint64(ts))
	x.b = binary.BigEndian.AppendUint32(x.b, rel)
}

// last returns the last entry, ok false if there is none.
func (x *timeIndex) last() (ts int64, rel uint32, ok bool) {
	if x.len() == 0 {
		return -1, 0, false
	}
	ts, rel = x.entry(x.len() - 1)
	return ts, rel, true
}

// before returns the relative offset of the last entry with a timestamp
// strictly below ts: every record up to that batch is older than ts. ok is
// false if there is none (search from the segment's start).
func (x *timeIndex) before(ts int64) (rel uint32, ok bool) {
	n := x.len()
	i := sort.Search(n, func(i int) bool { t, _ := x.entry(i); return t >= ts })
	if i == 0 {
		return 0, false
	}
	_, rel = x.entry(i - 1)
	return rel, true
}

// truncateRel drops the entries whose relative offset is >= rel.
func (x *timeIndex) truncateRel(rel uint32) {
	n := x.len()
	i := sort.Search(n, func(i int) bool { _, r := x.entry(i); return r >= rel })
	x.b = x.b[:i*timeEntrySize]
}

// parseOffsetIndex decodes an offset index file. A trailing partial entry
// (a torn append) is ignored. Entries must strictly increase in both fields
// and lie below segSize (if segSize >= 0). The error describes the first
// problem found; the caller rebuilds the index from the log.
func parseOffsetIndex(file []byte, base int64, segSize int64) (offsetIndex, error) {
	entries, err := checkIndexHeader(file, offsetIndexMagic, base, offsetEntrySize)
	if err != nil {
		return offsetIndex{}, err
	}
	x := offsetIndex{b: entries}
	var prevRel, prevPos uint32
	for i := 0; i < x.len(); i++ {
		rel, pos := x.entry(i)
		if pos == 0 || (i > 0 && (rel <= prevRel || pos <= prevPos)) {
			return offsetIndex{}, fmt.Errorf("entry %d (%d, %d) out of order", i, rel, pos)
		}
		if segSize >= 0 && int64(pos) >= segSize {
			return offsetIndex{}, fmt.Errorf("entry %d position %d beyond segment size %d", i, pos, segSize)
		}
		prevRel, prevPos = rel, pos
	}
	return x, nil
}

// parseTimeIndex decodes a time index file; see parseOffsetIndex.
func parseTimeIndex(file []byte, base int64) (timeIndex, error) {
	entries, err := checkIndexHeader(file, timeIndexMagic, base, timeEntrySize)
	if err != nil {
		return timeIndex{}, err
	}
	x := timeIndex{b: entries}
	var prevTs int64
	var prevRel uint32
	for i := 0; i < x.len(); i++ {
		ts, rel := x.entry(i)
		if ts < 0 || (i > 0 && (ts <= prevTs || rel < prevRel)) {
			return timeIndex{}, fmt.Errorf("entry %d (%d, %d) out of order", i, ts, rel)
		}
		prevTs, prevRel = ts, rel
	}
	return x, nil
}

// checkIndexHeader validates the header and returns the whole entries (a
// copy, so the caller may append).
func checkIndexHeader(file []byte, magic string, base int64, entrySize int) ([]byte, error) {
	if len(file) < indexHeaderSize {
		return nil, fmt.Errorf("file of %d bytes has no header", len(file))
	}
	if string(file[:4]) != magic {
		return nil, fmt.Errorf("bad magic %q", file[:4])
	}
	if file[4] != indexVersion {
		return nil, fmt.Errorf("unsupported version %d", file[4])
	}
	if b := int64(binary.BigEndian.Uint64(file[8:])); b != base {
		return nil, fmt.Errorf("header base offset %d, file name says %d", b, base)
	}
	body := file[indexHeaderSize:]
	body = body[:len(body)/entrySize*entrySize]
	out := make([]byte, len(body), len(body)+64*entrySize)
	copy(out, body)
	return out, nil
}
