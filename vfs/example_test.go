package vfs_test

import (
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/weirhq/weir/vfs"
)

func read(fs vfs.FS, name string) string {
	f, err := fs.Open(name)
	if err != nil {
		return "<absent>"
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	return string(b)
}

// The atomic-replace idiom, and what a crash leaves at each step.
func ExampleMemFS_CrashClone() {
	fs := vfs.NewCrashableMem()
	f, _ := fs.Create("state")
	f.Write([]byte("v1"))
	f.Sync()
	f.Close()
	d, _ := fs.OpenDir("")
	d.Sync() // makes the entry "state" durable

	t, _ := fs.Create("state.tmp")
	t.Write([]byte("v2"))
	t.Sync()
	t.Close()
	fs.Rename("state.tmp", "state")
	fmt.Println("before dir sync:", read(fs.CrashClone(), "state"))
	d.Sync()
	fmt.Println("after dir sync:", read(fs.CrashClone(), "state"))
	// Output:
	// before dir sync: v1
	// after dir sync: v2
}

// A torn append: the unsynced tail survives in part.
func ExampleMemFS_CrashCloneWith() {
	fs := vfs.NewCrashableMem()
	f, _ := fs.Create("seg")
	d, _ := fs.OpenDir("")
	d.Sync()
	f.Write([]byte("synced|"))
	f.Sync()
	f.Write([]byte("unsynced"))
	rng := rand.New(rand.NewPCG(4, 1))
	for range 3 {
		c := fs.CrashCloneWith(vfs.CrashOptions{Rand: rng, TornWrites: true})
		fmt.Printf("%q\n", read(c, "seg"))
	}
	// Output:
	// "synced|unsyn"
	// "synced|unsynced"
	// "synced|"
}
