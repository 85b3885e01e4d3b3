package errorfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/vfstest"
)

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// recorder is an injector that never fails but records what it saw.
type recorder struct {
	mu  sync.Mutex
	ops []Op
}

func (r *recorder) MaybeError(op Op) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	return nil
}

// TestPassThrough: with an injector that never fails, the wrapper has the
// common semantics.
func TestPassThrough(t *testing.T) {
	t.Run("mem", func(t *testing.T) { vfstest.Run(t, Wrap(vfs.NewCrashableMem(), &recorder{}), "/d") })
	t.Run("os", func(t *testing.T) { vfstest.Run(t, Wrap(vfs.Default, &recorder{}), t.TempDir()) })
}

// TestOpKinds checks that every method is offered to the injector as the
// documented kind, path and position.
func TestOpKinds(t *testing.T) {
	r := &recorder{}
	fs := Wrap(vfs.NewCrashableMem(), r)
	ok(t, fs.MkdirAll("d", 0o755))
	f, err := fs.Create("d/a")
	ok(t, err)
	_, err = f.Write([]byte("xy"))
	ok(t, err)
	_, err = f.WriteAt([]byte("z"), 5)
	ok(t, err)
	_, err = f.Seek(0, io.SeekStart) // not offered
	ok(t, err)
	_, err = f.Read(make([]byte, 3))
	ok(t, err)
	_, err = f.ReadAt(make([]byte, 2), 1)
	ok(t, err)
	ok(t, f.Sync())
	ok(t, f.Truncate(1))
	_, err = f.Stat()
	ok(t, err)
	ok(t, f.Close()) // not offered
	for _, step := range []func() error{
		func() error { f, err := fs.OpenReadWrite("d/a"); f.Close(); return err },
		func() error { f, err := fs.Open("d/a"); f.Close(); return err },
		func() error { d, err := fs.OpenDir("d"); ok(t, d.Sync()); return err },
		func() error { return fs.Rename("d/a", "d/b") },
		func() error { _, err := fs.List("d"); return err },
		func() error { _, err := fs.Stat("d/b"); return err },
		func() error { return fs.Remove("d/b") },
		func() error { return fs.RemoveAll("d") },
	} {
		ok(t, step())
	}
	want := []Op{
		{Kind: OpMkdir, Path: "d", Offset: -1},
		{Kind: OpCreate, Path: "d/a", Offset: -1},
		{Kind: OpWrite, Path: "d/a", Offset: -1, Len: 2},
		{Kind: OpWrite, Path: "d/a", Offset: 5, Len: 1},
		{Kind: OpRead, Path: "d/a", Offset: -1, Len: 3},
		{Kind: OpRead, Path: "d/a", Offset: 1, Len: 2},
		{Kind: OpSync, Path: "d/a", Offset: -1},
		{Kind: OpTruncate, Path: "d/a", Offset: -1},
		{Kind: OpStat, Path: "d/a", Offset: -1},
		{Kind: OpOpen, Path: "d/a", Offset: -1},
		{Kind: OpOpen, Path: "d/a", Offset: -1},
		{Kind: OpOpen, Path: "d", Offset: -1},
		{Kind: OpSync, Path: "d", Offset: -1},
		{Kind: OpRename, Path: "d/a", NewPath: "d/b", Offset: -1},
		{Kind: OpList, Path: "d", Offset: -1},
		{Kind: OpStat, Path: "d/b", Offset: -1},
		{Kind: OpRemove, Path: "d/b", Offset: -1},
		{Kind: OpRemove, Path: "d", Offset: -1},
	}
	if !slices.Equal(r.ops, want) {
		t.Fatalf("ops:\n got %v\nwant %v", r.ops, want)
	}
}

func TestInjectedErrorShape(t *testing.T) {
	for _, impl := range []struct {
		name string
		fs   vfs.FS
		dir  func(t *testing.T) string
	}{
		{"mem", vfs.NewCrashableMem(), func(*testing.T) string { return "/x" }},
		{"os", vfs.Default, func(t *testing.T) string { return t.TempDir() }},
	} {
		t.Run(impl.name, func(t *testing.T) {
			dir := impl.dir(t)
			ok(t, impl.fs.MkdirAll(dir, 0o755))
			fs := Wrap(impl.fs, First(
				FailIf(And(OnOps(OpWrite, OpSync), PathMatch("*.log")), syscall.ENOSPC),
				FailIf(OnOps(OpRename), syscall.EIO),
			))
			seg := filepath.Join(dir, "0.log")
			f, err := fs.Create(seg)
			ok(t, err)
			defer f.Close()
			n, err := f.Write([]byte("batch"))
			var pe *os.PathError
			if n != 0 || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrInjected) || !errors.As(err, &pe) ||
				pe.Op != "write" || pe.Path != seg {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Sync = %v", err)
			}
			if fi, err := impl.fs.Stat(seg); err != nil || fi.Size() != 0 {
				t.Fatalf("failed write reached the disk: %v %v", fi, err)
			}
			// Other files are unaffected.
			idx, err := fs.Create(filepath.Join(dir, "0.index"))
			ok(t, err)
			_, err = idx.Write([]byte("i"))
			ok(t, err)
			ok(t, idx.Sync())
			ok(t, idx.Close())
			// Rename: *os.LinkError, nothing renamed.
			err = fs.Rename(filepath.Join(dir, "0.index"), filepath.Join(dir, "1.index"))
			var le *os.LinkError
			if !errors.Is(err, syscall.EIO) || !errors.As(err, &le) {
				t.Fatalf("Rename = %v", err)
			}
			names, err := impl.fs.List(dir)
			ok(t, err)
			if !slices.Equal(names, []string{"0.index", "0.log"}) {
				t.Fatalf("after failed rename: %v", names)
			}
		})
	}
}

func TestPartialWrite(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fs := Wrap(mem, Times(1, FailIf(OnOps(OpWrite), Partial(4, syscall.ENOSPC))))
	f, err := fs.Create("f")
	ok(t, err)
	n, err := f.Write([]byte("0123456789"))
	if n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	n, err = f.Write([]byte("ab")) // Times(1): the disk has room again
	if n != 2 || err != nil {
		t.Fatalf("second Write = %d, %v", n, err)
	}
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 100))
	ok(t, err)
	if string(b) != "0123ab" {
		t.Fatalf("content %q", b)
	}
	// WriteAt: the prefix lands at the offset.
	fs = Wrap(mem, FailIf(OnOps(OpWrite), Partial(2, syscall.ENOSPC)))
	f, err = fs.OpenReadWrite("f")
	ok(t, err)
	n, err = f.WriteAt([]byte("XYZ"), 1)
	if n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
	b, err = io.ReadAll(io.NewSectionReader(f, 0, 100))
	ok(t, err)
	if string(b) != "0XY3ab" {
		t.Fatalf("content %q", b)
	}
}

func TestPathMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		op      Op
		want    bool
	}{
		{"*.log", Op{Path: "/data/t-0/00000000000000000000.log"}, true},
		{"*.log", Op{Path: "/data/t-0/00000000000000000000.index"}, false},
		{"*.log", Op{Path: "/data/t-0/x.tmp", NewPath: "/data/t-0/x.log"}, true},
		{"/data/*/*.index", Op{Path: "/data/t-0/0.index"}, true},
		{"/data/*.index", Op{Path: "/data/t-0/0.index"}, false},
		{"*", Op{Path: ""}, false},
	} {
		if got := PathMatch(tc.pattern)(tc.op); got != tc.want {
			t.Errorf("PathMatch(%q)(%+v) = %v", tc.pattern, tc.op, got)
		}
	}
	if !PathContains("t-0/")(Op{Path: "/data/t-0/0.log"}) || PathContains("t-1")(Op{Path: "/data/t-0/0.log"}) {
		t.Error("PathContains")
	}
	defer func() {
		if recover() == nil {
			t.Error("bad pattern did not panic")
		}
	}()
	PathMatch("[")
}

func TestFailAfter(t *testing.T) {
	fs := Wrap(vfs.NewCrashableMem(), FailAfter(2, OnOps(OpSync), syscall.EIO))
	f, err := fs.Create("f")
	ok(t, err)
	for i := range 5 {
		err := f.Sync()
		if (i < 2) != (err == nil) || err != nil && !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	_, err = f.Write([]byte("x")) // other kinds are not counted or failed
	ok(t, err)
}

// TestToggle simulates "disk full, then space returns".
func TestToggle(t *testing.T) {
	full := NewToggle(FailIf(OnOps(OpWrite, OpCreate), syscall.ENOSPC))
	fs := Wrap(vfs.NewCrashableMem(), full)
	f, err := fs.Create("f")
	ok(t, err)
	_, err = f.Write([]byte("a"))
	ok(t, err)
	full.On()
	if _, err := f.Write([]byte("b")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write while full: %v", err)
	}
	if _, err := fs.Create("g"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Create while full: %v", err)
	}
	ok(t, f.Sync()) // not selected
	full.Off()
	_, err = f.Write([]byte("c"))
	ok(t, err)
	if full.Injected() != 2 {
		t.Fatalf("Injected = %d", full.Injected())
	}
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 100))
	ok(t, err)
	if string(b) != "ac" {
		t.Fatalf("content %q", b)
	}
}

// TestCountersConcurrent: FailAfter and Times count exactly under
// concurrent use (run with -race).
func TestCountersConcurrent(t *testing.T) {
	after := FailAfter(100, OnOps(), syscall.EIO)
	times := Times(30, FailIf(OnOps(), syscall.EIO))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failedAfter, failedTimes int
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				a := after.MaybeError(Op{}) != nil
				b := times.MaybeError(Op{}) != nil
				mu.Lock()
				if a {
					failedAfter++
				}
				if b {
					failedTimes++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failedAfter != 100 || failedTimes != 30 {
		t.Fatalf("FailAfter failed %d of 200 (want 100), Times failed %d (want 30)", failedAfter, failedTimes)
	}
}
