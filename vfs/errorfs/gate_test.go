package errorfs

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// TestGate: a held gate stops the selected operation until Release, counts
// it, and fails it when FailWith says so; other operations pass.
func TestGate(t *testing.T) {
	g := NewGate(And(OnOps(OpSync), PathMatch("*.log")))
	fs := Wrap(vfs.NewCrashableMem(), g)
	f, err := fs.Create("/a.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil || g.Count() != 1 {
		t.Fatalf("released gate: sync %v, count %d", err, g.Count())
	}
	g.Hold()
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	select {
	case <-g.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("held sync never entered the gate")
	}
	select {
	case err := <-done:
		t.Fatalf("held sync returned %v before Release", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.FailWith(syscall.EIO)
	g.Release()
	if err := <-done; !errors.Is(err, syscall.EIO) {
		t.Fatalf("released sync: %v, want EIO", err)
	}
	g.FailWith(nil)
	g.Release() // no-op when released
	if err := f.Sync(); err != nil || g.Count() != 3 {
		t.Fatalf("after release: sync %v, count %d", err, g.Count())
	}
}
