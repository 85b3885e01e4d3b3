package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// errNotDir is the error of OpenDir on something that is not a directory.
var errNotDir = unix.ENOTDIR

// syncData flushes f's data and the metadata needed to read it back
// (fdatasync(2)); it skips timestamps, which the storage engine never relies
// on. The descriptor is used under the file's reference count (RawConn), so a
// concurrent Close cannot make it sync a reused descriptor.
func syncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		// Control fails only if the file is closed (or closing).
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: os.ErrClosed}
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
