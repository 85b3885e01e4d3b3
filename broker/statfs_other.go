//go:build !linux

package broker

import "github.com/weirhq/weir/vfs"

// diskUsage is not measured on this platform.
func diskUsage(vfs.FS, string) (total, usable int64) { return -1, -1 }
