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

// TestMkdirAllDurableCrash: once MkdirAllDurable returns, every directory of
// the path survives a crash, and a file synced into the deepest one with its
// directory synced does too.
func TestMkdirAllDurableCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	if err := vfs.MkdirAllDurable(mem, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(mem, "a/b/c/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	c := mem.CrashClone()
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		if st, err := c.Stat(d); err != nil || !st.IsDir() {
			t.Fatalf("after crash %s: %v, %v", d, st, err)
		}
	}
	if b, err := vfs.ReadFile(c, "a/b/c/f"); err != nil || string(b) != "x" {
		t.Fatalf("after crash a/b/c/f = %q, %v", b, err)
	}
	// Without the helper, a plain MkdirAll does not survive: the test can fail.
	mem2 := vfs.NewCrashableMem()
	if err := mem2.MkdirAll("p/q", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := mem2.CrashClone().Stat("p/q"); err == nil {
		t.Fatal("an unsynced MkdirAll survived the crash: the crash model does not test MkdirAllDurable")
	}
}

// TestReadFileSizes reads files around the buffer's growth boundary.
func TestReadFileSizes(t *testing.T) {
	mem := vfs.NewCrashableMem()
	for _, n := range []int{0, 1, 511, 512, 513, 70000} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(i * 7)
		}
		if err := vfs.WriteFileSynced(mem, "f", want); err != nil {
			t.Fatal(err)
		}
		got, err := vfs.ReadFile(mem, "f")
		if err != nil || string(got) != string(want) {
			t.Fatalf("size %d: got %d bytes, %v", n, len(got), err)
		}
	}
}
