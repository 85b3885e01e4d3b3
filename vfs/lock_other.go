//go:build !unix && !windows

package vfs

import (
	"errors"
	"os"
)

// Lock is not supported on this platform: it fails rather than pretend
// to exclude anyone.
func (osFS) Lock(name string) (File, error) {
	return nil, &os.PathError{Op: "lock", Path: name, Err: errors.ErrUnsupported}
}
