//go:build !linux

package vfs

import (
	"os"
	"syscall"
)

// errNotDir is the error of OpenDir on something that is not a directory.
var errNotDir = syscall.ENOTDIR

// syncData is a full fsync where fdatasync is not available.
func syncData(f *os.File) error { return f.Sync() }
