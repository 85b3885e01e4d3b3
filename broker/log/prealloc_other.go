//go:build !linux

package log

import (
	"errors"

	"github.com/weirhq/weir/vfs"
)

const invalidFd = vfs.InvalidFd

// fallocateKeepSize is not implemented outside Linux: preallocation is
// then off.
func fallocateKeepSize(fd uintptr, off, n int64) error {
	return errors.ErrUnsupported
}
