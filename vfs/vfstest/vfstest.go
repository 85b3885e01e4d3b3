// Package vfstest holds the semantics every vfs.FS must share, as a test body
// to run against each implementation (and against wrappers such as errorfs).
package vfstest

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/weirhq/weir/vfs"
)

// Run checks fsys's common semantics in the directory root, which must
// exist (or be creatable with MkdirAll) and be empty. It leaves it empty.
func Run(t *testing.T, fsys vfs.FS, root string) {
	t.Helper()
	if err := fsys.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("FileIO", func(t *testing.T) { testFileIO(t, fsys, root) })
	t.Run("Namespace", func(t *testing.T) { testNamespace(t, fsys, root) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, fsys, root) })
	t.Run("Lock", func(t *testing.T) { testLock(t, fsys, root) })
	if names, err := fsys.List(root); err != nil || len(names) != 0 {
		t.Fatalf("root not left empty: %v %v", names, err)
	}
}

// must(f())(t) returns f's value, failing t on f's error.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, fsys vfs.FS, name string) string {
	t.Helper()
	f := must(fsys.Open(name))(t)
	defer f.Close()
	return string(must(io.ReadAll(f))(t))
}

func testFileIO(t *testing.T, fsys vfs.FS, root string) {
	name := filepath.Join(root, "seg.log")
	f := must(fsys.Create(name))(t)
	if n := must(f.Write([]byte("hello ")))(t); n != 6 {
		t.Fatalf("wrote %d", n)
	}
	must(f.Write([]byte("world")))(t)
	ok(t, f.Sync())
	if fi := must(f.Stat())(t); fi.Size() != 11 || fi.IsDir() || fi.Name() != "seg.log" {
		t.Fatalf("stat: size %d dir %v name %q", fi.Size(), fi.IsDir(), fi.Name())
	}
	// ReadAt: exact, short with io.EOF, past the end.
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 6); n != 5 || err != nil || string(buf) != "world" {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf)
	}
	if n, err := f.ReadAt(buf, 8); n != 3 || err != io.EOF || string(buf[:n]) != "rld" {
		t.Fatalf("short ReadAt = %d %v", n, err)
	}
	if n, err := f.ReadAt(buf, 11); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at end = %d %v", n, err)
	}
	// WriteAt past the end zero-fills the gap and leaves the offset alone.
	must(f.WriteAt([]byte("!"), 13))(t)
	must(f.Write([]byte("?")))(t)
	ok(t, f.Close())
	if got := readAll(t, fsys, name); got != "hello world?\x00!" {
		t.Fatalf("content %q", got)
	}

	// OpenReadWrite does not truncate and starts at offset 0; Seek(End) appends.
	f = must(fsys.OpenReadWrite(name))(t)
	must(f.Write([]byte("J")))(t)
	if off := must(f.Seek(0, io.SeekEnd))(t); off != 14 {
		t.Fatalf("seek end = %d", off)
	}
	must(f.Write([]byte("+")))(t)
	if off := must(f.Seek(-3, io.SeekCurrent))(t); off != 12 {
		t.Fatalf("seek cur = %d", off)
	}
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "\x00!+" {
		t.Fatalf("read after seek: %q %v", b, err)
	}
	// Truncate down, then up: the regrown bytes are zero.
	ok(t, f.Truncate(3))
	ok(t, f.Truncate(6))
	ok(t, f.Close())
	if got := readAll(t, fsys, name); got != "Jel\x00\x00\x00" {
		t.Fatalf("after truncate %q", got)
	}
	// OpenReadWrite creates a missing file; Create truncates an existing one.
	other := filepath.Join(root, "new")
	ok(t, must(fsys.OpenReadWrite(other))(t).Close())
	if fi := must(fsys.Stat(other))(t); fi.Size() != 0 {
		t.Fatalf("size %d", fi.Size())
	}
	ok(t, must(fsys.Create(name))(t).Close())
	if fi := must(fsys.Stat(name))(t); fi.Size() != 0 {
		t.Fatalf("Create did not truncate: %d", fi.Size())
	}
	ok(t, fsys.Remove(other))
	ok(t, fsys.Remove(name))
}

func testNamespace(t *testing.T, fsys vfs.FS, root string) {
	dir := filepath.Join(root, "topic-0")
	ok(t, fsys.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755))
	ok(t, fsys.MkdirAll(dir, 0o755)) // idempotent
	if fi := must(fsys.Stat(dir))(t); !fi.IsDir() {
		t.Fatal("not a dir")
	}
	for _, n := range []string{"c", "a", "b"} {
		f := must(fsys.Create(filepath.Join(dir, n)))(t)
		must(f.Write([]byte(n)))(t)
		ok(t, f.Close())
	}
	if got := must(fsys.List(dir))(t); !slices.Equal(got, []string{"a", "b", "c", "sub"}) {
		t.Fatalf("List = %v", got)
	}
	// Rename replaces an existing file.
	ok(t, fsys.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")))
	if got := readAll(t, fsys, filepath.Join(dir, "b")); got != "a" {
		t.Fatalf("renamed content %q", got)
	}
	// Rename moves between directories.
	ok(t, fsys.Rename(filepath.Join(dir, "c"), filepath.Join(dir, "sub", "c")))
	if got := must(fsys.List(dir))(t); !slices.Equal(got, []string{"b", "sub"}) {
		t.Fatalf("List = %v", got)
	}
	d := must(fsys.OpenDir(dir))(t)
	ok(t, d.Sync())
	ok(t, d.Close())
	// Remove refuses a non-empty directory; RemoveAll removes everything.
	if err := fsys.Remove(filepath.Join(dir, "sub")); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("Remove non-empty dir: %v", err)
	}
	ok(t, fsys.RemoveAll(dir))
	if _, err := fsys.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after RemoveAll: %v", err)
	}
	ok(t, fsys.RemoveAll(dir)) // missing is not an error
}

func testErrors(t *testing.T, fsys vfs.FS, root string) {
	missing := filepath.Join(root, "missing")
	notExist := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v, want ErrNotExist", what, err)
		}
	}
	_, err := fsys.Open(missing)
	notExist("Open", err)
	_, err = fsys.Create(filepath.Join(missing, "f"))
	notExist("Create in missing dir", err)
	_, err = fsys.List(missing)
	notExist("List", err)
	_, err = fsys.OpenDir(missing)
	notExist("OpenDir", err)
	notExist("Remove", fsys.Remove(missing))
	notExist("Rename", fsys.Rename(missing, filepath.Join(root, "x")))

	file := filepath.Join(root, "file")
	f := must(fsys.Create(file))(t)
	must(f.Write([]byte("x")))(t)
	ok(t, f.Close())
	if _, err := fsys.OpenDir(file); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("OpenDir(file): %v", err)
	}
	if err := fsys.MkdirAll(filepath.Join(file, "d"), 0o755); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("MkdirAll under file: %v", err)
	}
	if _, err := fsys.Create(root); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("Create(dir): %v", err)
	}
	// Read-only handles refuse writes.
	ro := must(fsys.Open(file))(t)
	if _, err := ro.Write([]byte("y")); err == nil {
		t.Fatal("write to read-only file succeeded")
	}
	if err := ro.Truncate(0); err == nil {
		t.Fatal("truncate of read-only file succeeded")
	}
	// Closed handles refuse everything.
	ok(t, ro.Close())
	if err := ro.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("double Close: %v", err)
	}
	if _, err := ro.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if got := readAll(t, fsys, file); got != "x" {
		t.Fatalf("content %q", got)
	}
	ok(t, fsys.Remove(file))
}

// testLock: Lock is exclusive until the holder closes its File, the File
// is writable, and a missing file is created.
func testLock(t *testing.T, fsys vfs.FS, root string) {
	name := filepath.Join(root, ".lock")
	held := must(fsys.Lock(name))(t)
	if _, err := held.WriteAt([]byte("holder"), 0); err != nil {
		t.Fatalf("write through the lock: %v", err)
	}
	if f, err := fsys.Lock(name); !errors.Is(err, vfs.ErrLocked) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("second Lock: err %v, want ErrLocked", err)
	}
	if got := readAll(t, fsys, name); got != "holder" {
		t.Fatalf("lock file holds %q, want %q", got, "holder")
	}
	ok(t, held.Close())
	again := must(fsys.Lock(name))(t)
	ok(t, again.Close())
	ok(t, fsys.Remove(name))
}
