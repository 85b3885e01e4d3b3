package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/weirhq/weir/internal/crc32c"
	"github.com/weirhq/weir/vfs"
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
	tmpSuffix         = ".tmp"
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

// writeFileAtomic replaces dir/name with data so that after a crash the file
// is either its old or its new contents: write a temp file, fsync it, rename
// it over name, fsync the directory.
func writeFileAtomic(fsys vfs.FS, dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(fsys, dir)
}

// syncDir makes the entries of dir durable.
func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// readFile reads a whole (small) file. It returns fs.ErrNotExist-matching
// errors unchanged.
func readFile(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && len(b) == 0) {
		return nil, err
	}
	return b, nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// mkdirAllDurable creates dir and any missing parents and syncs the parent
// of each directory it created, so the whole path survives a crash.
func mkdirAllDurable(fsys vfs.FS, dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !isNotExist(err) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := syncDir(fsys, filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}
