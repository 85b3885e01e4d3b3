package vfs_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/vfs"
)

// BenchmarkAppendSync appends 4 KiB and syncs, per op: the storage engine's
// hot path. "os" (fdatasync on the test's temporary directory) is the
// baseline for "mem".
func BenchmarkAppendSync(b *testing.B) {
	for _, impl := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{
		{"os", vfs.Default, b.TempDir()},
		{"mem", vfs.NewCrashableMem(), ""},
	} {
		b.Run(impl.name, func(b *testing.B) {
			f, err := impl.fs.Create(filepath.Join(impl.dir, "seg"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMemSyncLargeFile shows that a MemFS Sync costs the same on a
// 64 MiB file as on an empty one (durable bytes are shared, not copied), and
// so does CrashClone.
func BenchmarkMemSyncLargeFile(b *testing.B) {
	for _, prefill := range []int{0, 64 << 20} {
		m := vfs.NewCrashableMem()
		f, err := m.Create("seg")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(make([]byte, prefill)); err != nil {
			b.Fatal(err)
		}
		f.Sync()
		f.Write([]byte{1}) // the one-off growth of the backing array, outside the timing
		f.Sync()
		b.Run(fmt.Sprintf("append-sync/prefill=%dMiB", prefill>>20), func(b *testing.B) {
			buf := make([]byte, 100)
			for b.Loop() {
				f.Write(buf)
				f.Sync()
			}
		})
		b.Run(fmt.Sprintf("crash-clone/prefill=%dMiB", prefill>>20), func(b *testing.B) {
			for b.Loop() {
				m.CrashClone()
			}
		})
	}
}
