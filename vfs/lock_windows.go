package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// Lock implements FS with LockFileEx on the file's first byte range; the
// system releases it when the handle closes or the process ends.
func (osFS) Lock(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	ol := new(windows.Overlapped)
	err = windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if err != nil {
		f.Close()
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			err = ErrLocked
		}
		return nil, &os.PathError{Op: "lock", Path: name, Err: err}
	}
	return osFile{f}, nil
}
