//go:build linux

package broker

import (
	"golang.org/x/sys/unix"

	"github.com/weirhq/weir/vfs"
)

// diskUsage returns the total and available bytes of the file system
// holding dir, or -1, -1 when fs is not the OS file system or the call
// fails.
func diskUsage(fs vfs.FS, dir string) (total, usable int64) {
	if fs != vfs.Default {
		return -1, -1
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}
