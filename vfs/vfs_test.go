package vfs_test

import (
	"testing"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/vfstest"
)

// TestFS runs one body of common semantics against every implementation.
func TestFS(t *testing.T) {
	t.Run("os", func(t *testing.T) { vfstest.Run(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) { vfstest.Run(t, vfs.NewCrashableMem(), "/data") })
	t.Run("mem-relative", func(t *testing.T) { vfstest.Run(t, vfs.NewCrashableMem(), "") })
}
