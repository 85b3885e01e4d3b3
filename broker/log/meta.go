package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"github.com/weirhq/weir/internal/crc32c"
)

// Small metadata files of a partition directory. Each is written atomically
// (write temp, fsync, rename, fsync directory) and ends with a CRC-32C of
// everything before it. Layouts and constants are part of the on-disk format.
//
// recovery-point (52 bytes): the last durable checkpoint.
//
//	+-------+---------+-------+----------+----------+----------+------------+-------+-----------+--------+
//	| magic | version | flags | reserved | seg base | position | next off.  | maxTs | maxTs off | crc32c |
//	| "WRCP"|   1 B   |  1 B  |   2 B    |  int64   |  int64   |   int64    | int64 |   int64   | uint32 |
//	+-------+---------+-------+----------+----------+----------+------------+-------+-----------+--------+
//
// It promises: every byte of segment <seg base> below <position> and every
// earlier segment is durable and valid, <next off.> is the offset of the
// first batch at <position>, every index entry of segment <seg base> that
// points below <position> is durable, and maxTs/maxTs off. are the largest
// batch timestamp of that segment below <position> and its batch's base
// offset (-1 if none). flags bit 0 = written by a clean Close (the whole log
// was synced; position is the segment's length, so open scans nothing).
//
// log-start-offset (20 bytes): the log start offset set by DeleteRecords.
//
//	+--------+---------+----------+--------+--------+
//	| "WLSO" | version | reserved | offset | crc32c |
//	+--------+---------+----------+--------+--------+
const (
	checkpointFile    = "recovery-point"
	checkpointMagic   = "WRCP"
	checkpointSize    = 52
	logStartFile      = "log-start-offset"
	logStartMagic     = "WLSO"
	logStartSize      = 20
	metaVersion       = 1
	flagCleanShutdown = 1
)

// checkpoint is the decoded recovery-point file.
type checkpoint struct {
	clean    bool
	segBase  int64
	pos      int64
	next     int64
	maxTs    int64
	maxTsOff int64
}

func (c checkpoint) encode() []byte {
	b := make([]byte, checkpointSize)
	copy(b, checkpointMagic)
	b[4] = metaVersion
	if c.clean {
		b[5] = flagCleanShutdown
	}
	be := binary.BigEndian
	be.PutUint64(b[8:], uint64(c.segBase))
	be.PutUint64(b[16:], uint64(c.pos))
	be.PutUint64(b[24:], uint64(c.next))
	be.PutUint64(b[32:], uint64(c.maxTs))
	be.PutUint64(b[40:], uint64(c.maxTsOff))
	be.PutUint32(b[48:], crc32c.Checksum(b[:48]))
	return b
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	if len(b) != checkpointSize {
		return checkpoint{}, fmt.Errorf("size %d, want %d", len(b), checkpointSize)
	}
	if string(b[:4]) != checkpointMagic {
		return checkpoint{}, fmt.Errorf("bad magic %q", b[:4])
	}
	if b[4] != metaVersion {
		return checkpoint{}, fmt.Errorf("unsupported version %d", b[4])
	}
	be := binary.BigEndian
	if c := crc32c.Checksum(b[:48]); c != be.Uint32(b[48:]) {
		return checkpoint{}, errors.New("crc mismatch")
	}
	c := checkpoint{
		clean:    b[5]&flagCleanShutdown != 0,
		segBase:  int64(be.Uint64(b[8:])),
		pos:      int64(be.Uint64(b[16:])),
		next:     int64(be.Uint64(b[24:])),
		maxTs:    int64(be.Uint64(b[32:])),
		maxTsOff: int64(be.Uint64(b[40:])),
	}
	if c.segBase < 0 || c.pos < 0 || c.next < c.segBase || c.maxTs < -1 {
		return checkpoint{}, errors.New("fields out of range")
	}
	return c, nil
}

func encodeLogStart(off int64) []byte {
	b := make([]byte, logStartSize)
	copy(b, logStartMagic)
	b[4] = metaVersion
	binary.BigEndian.PutUint64(b[8:], uint64(off))
	binary.BigEndian.PutUint32(b[16:], crc32c.Checksum(b[:16]))
	return b
}

func decodeLogStart(b []byte) (int64, error) {
	if len(b) != logStartSize {
		return 0, fmt.Errorf("size %d, want %d", len(b), logStartSize)
	}
	if string(b[:4]) != logStartMagic {
		return 0, fmt.Errorf("bad magic %q", b[:4])
	}
	if b[4] != metaVersion {
		return 0, fmt.Errorf("unsupported version %d", b[4])
	}
	if c := crc32c.Checksum(b[:16]); c != binary.BigEndian.Uint32(b[16:]) {
		return 0, errors.New("crc mismatch")
	}
	off := int64(binary.BigEndian.Uint64(b[8:]))
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	return off, nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
