//go:build !linux

package log

import "github.com/weirhq/weir/vfs"

// writeBack is not available: the cleaner falls back to periodic syncs.
func writeBack(vfs.File, int64, int64, int64) (bool, error) { return false, nil }

// dropCache is a no-op where fadvise is not available.
func dropCache(vfs.File, int64) {}
