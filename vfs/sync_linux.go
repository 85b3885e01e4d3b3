package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// errNotDir is the error of OpenDir on something that is not a directory.
var errNotDir = unix.ENOTDIR

// syncData flushes f's data and the metadata needed to read it back
// (fdatasync(2)); it skips timestamps, which the storage engine never relies on.
func syncData(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
		return nil
	}
}
