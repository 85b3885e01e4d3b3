package log

import (
	"errors"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/weirhq/weir/vfs"
)

// writeBack starts the writeback of f's dirty pages in [off, off+n)
// (sync_file_range WRITE) without waiting for it, then waits for the
// writeback already started below waitTo (WAIT_BEFORE), so that at most
// [waitTo, off+n) is in flight. It does not commit metadata and is no
// durability guarantee: the cleaned file is still fdatasynced before the
// swap. It bounds the dirty data a later fdatasync (the cleaner's, or an
// appender's whose journal commit must wait for the cleaned file's ordered
// data) can find. ok is false if f has no OS descriptor or the file system
// does not support it; the caller then falls back to periodic syncs.
func writeBack(f vfs.File, off, n, waitTo int64) (ok bool, err error) {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return false, nil
	}
	err = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	if err == nil && waitTo > 0 {
		err = unix.SyncFileRange(int(fd), 0, waitTo, unix.SYNC_FILE_RANGE_WAIT_BEFORE)
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ESPIPE):
		return false, nil
	default:
		return false, err
	}
}

// dropCache drops the page cache of a replaced segment's file (the first
// size bytes) in pieces, yielding the processor between them, so that its
// freeing is split rather than done at once when the file is closed and
// unlinked. Best effort: readers still holding the segment read from the
// disk.
func dropCache(f vfs.File, size int64) {
	if f == nil {
		return
	}
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return
	}
	const piece = 16 * cleanIOChunk
	for off := int64(0); off < size; off += piece {
		if unix.Fadvise(int(fd), off, min(piece, size-off), unix.FADV_DONTNEED) != nil {
			return
		}
		runtime.Gosched()
	}
}
