//go:build unix

package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Lock implements FS with flock(2): the lock belongs to the open file
// description, so a second Lock of the same file, even in this process,
// conflicts; the kernel releases it when the last descriptor closes, which
// includes the process being killed.
func (osFS) Lock(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var lockErr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lockErr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			if lockErr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		lockErr = err
	}
	if lockErr != nil {
		f.Close()
		if errors.Is(lockErr, unix.EWOULDBLOCK) {
			lockErr = ErrLocked
		}
		return nil, &os.PathError{Op: "lock", Path: name, Err: lockErr}
	}
	return osFile{f}, nil
}
