package log

import (
	"golang.org/x/sys/unix"

	"github.com/weirhq/weir/vfs"
)

const invalidFd = vfs.InvalidFd

// fallocateKeepSize reserves [off, off+n) of the file without changing its
// size.
func fallocateKeepSize(fd uintptr, off, n int64) error {
	for {
		err := unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, off, n)
		if err != unix.EINTR {
			return err
		}
	}
}
