package vfs_test

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// TestWriteFileAtomicCrash fails WriteFileAtomic at each of its operations
// in turn, then crashes (strictly and with every option): the file is always
// the old or the new contents, and the new ones once the call succeeded.
func TestWriteFileAtomicCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	sawSuccess := false
	for failAt := int64(0); !sawSuccess; failAt++ {
		if failAt > 20 {
			t.Fatal("WriteFileAtomic never succeeded")
		}
		mem := vfs.NewCrashableMem()
		if err := mem.MkdirAll("dir", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.SyncDir(mem, ""); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(mem, "dir/meta", []byte("old contents")); err != nil {
			t.Fatal(err)
		}
		fs := errorfs.Wrap(mem, errorfs.FailAfter(failAt, errorfs.OnOps(), syscall.EIO))
		err := vfs.WriteFileAtomic(fs, "dir/meta", []byte("new contents"))
		sawSuccess = err == nil
		check := func(c *vfs.MemFS, strict bool) {
			b, rerr := vfs.ReadFile(c, "dir/meta")
			got := string(b)
			if rerr != nil || got != "old contents" && got != "new contents" {
				t.Fatalf("fail at op %d (err %v): after crash %q, %v", failAt, err, got, rerr)
			}
			if strict && err == nil && got != "new contents" {
				t.Fatalf("succeeded, but after crash %q", got)
			}
		}
		check(mem.CrashClone(), true)
		for range 20 {
			check(mem.CrashCloneWith(vfs.CrashOptions{Rand: rng, TornWrites: true, UnsyncedEntries: true}), false)
		}
	}
}
