package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

const (
	metaFormat     = "format"
	metaCheckpoint = "checkpoint"
)

func metaKey(name string) []byte { return append([]byte{prefixMeta}, name...) }

func (d *DB) getMeta(name string) ([]byte, error) {
	v, closer, err := d.db.Get(metaKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// Checkpoint maps a store name to the changelog offset up to which (exclusive)
// the local store is known to contain every changelog write.
type Checkpoint map[string]int64

// checkpointVersion is the first byte of an encoded checkpoint.
const checkpointVersion = 1

// ErrBadCheckpoint is returned (wrapped) for a checkpoint that does not decode.
var ErrBadCheckpoint = errors.New("state: bad checkpoint")

// EncodeCheckpoint encodes c:
//
//	version u8 (=1) | count uvarint | { len uvarint | store | offset varint } * count | crc32c u32 BE
//
// Entries are sorted by store name; the CRC (Castagnoli) covers every
// preceding byte.
func EncodeCheckpoint(c Checkpoint) []byte {
	b := []byte{checkpointVersion}
	b = binary.AppendUvarint(b, uint64(len(c)))
	for _, name := range slices.Sorted(maps.Keys(c)) {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendVarint(b, c[name])
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DecodeCheckpoint decodes what EncodeCheckpoint wrote; any other input is an
// ErrBadCheckpoint.
func DecodeCheckpoint(b []byte) (Checkpoint, error) {
	bad := func(pos int, why string) error { return fmt.Errorf("%w at byte %d: %s", ErrBadCheckpoint, pos, why) }
	if len(b) < 1+1+4 {
		return nil, bad(0, "too short")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, bad(len(body), "checksum mismatch")
	}
	if body[0] != checkpointVersion {
		return nil, bad(0, fmt.Sprintf("version %d", body[0]))
	}
	pos := 1
	n, w := binary.Uvarint(body[pos:])
	if w <= 0 || n > uint64(len(body)) {
		return nil, bad(pos, "bad count")
	}
	pos += w
	c := make(Checkpoint, n)
	for range n {
		l, w := binary.Uvarint(body[pos:])
		if w <= 0 || l > uint64(len(body)-pos-w) {
			return nil, bad(pos, "bad name length")
		}
		pos += w
		name := string(body[pos : pos+int(l)])
		pos += int(l)
		off, w := binary.Varint(body[pos:])
		if w <= 0 {
			return nil, bad(pos, "bad offset")
		}
		pos += w
		if _, dup := c[name]; dup {
			return nil, bad(pos, "duplicate store "+name)
		}
		c[name] = off
	}
	if pos != len(body) {
		return nil, bad(pos, "trailing bytes")
	}
	return c, nil
}

// Checkpoint returns the stored checkpoint, or nil if there is none.
func (d *DB) Checkpoint() (Checkpoint, error) {
	v, err := d.getMeta(metaCheckpoint)
	if err != nil || v == nil {
		return nil, err
	}
	return DecodeCheckpoint(v)
}

// WriteCheckpoint syncs every write committed so far (flushing the cache's
// dirty entries to Pebble first) together with c. Call it only once the
// changelog writes c covers are acknowledged.
func (d *DB) WriteCheckpoint(c Checkpoint) error {
	if err := d.flushDirty(); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", d.dir, err)
	}
	if err := d.db.Set(metaKey(metaCheckpoint), EncodeCheckpoint(c), pebble.Sync); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", d.dir, err)
	}
	return nil
}

// metaWatermark holds the task's watermark tracker state
// (stream/internal/watermark, docs/format/watermark.md).
const metaWatermark = "watermark"

// Watermark returns the stored watermark tracker state, or nil if there is
// none.
func (d *DB) Watermark() ([]byte, error) { return d.getMeta(metaWatermark) }

// SetWatermark stores the task's watermark tracker state, unsynced: it is
// durable with the next synced write (WriteCheckpoint), which Pebble's WAL
// orders after it.
func (d *DB) SetWatermark(b []byte) error {
	if err := d.db.Set(metaKey(metaWatermark), b, pebble.NoSync); err != nil {
		return fmt.Errorf("write watermark %s: %w", d.dir, err)
	}
	return nil
}
