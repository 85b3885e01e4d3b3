// Package errorfs wraps a vfs.FS and injects errors into chosen operations,
// so tests can drive a storage engine through disk-full (ENOSPC), I/O errors
// (EIO) and failures of one specific step (the rename of a checkpoint, the
// sync of a directory).
//
// Every operation is described by an Op (kind and path) and offered to an
// Injector before it reaches the wrapped FS. If the Injector returns an error,
// the operation is not performed (except for a Partial write, which writes
// a prefix) and the caller gets that error wrapped as the OS would wrap it:
// *os.PathError (*os.LinkError for Rename) around an *InjectedError around the
// injector's error. So errors.Is(err, syscall.ENOSPC) and
// errors.Is(err, ErrInjected) both hold for an injected ENOSPC.
//
// A failed operation changes nothing in the wrapped FS. Note what that
// means for a failed Sync: the data written since the last successful Sync
// is still there, unsynced, and a later successful Sync makes it durable. On
// Linux a failed fsync(2) may instead have dropped that data while a later
// fsync reports success, so a storage engine must treat a failed Sync as the
// loss of everything written since the last successful one (fail the
// partition, do not retry and carry on); tests should assert that, not
// assume a retry helps.
//
// Injectors here are goroutine-safe; so is the wrapped FS if the underlying
// FS is.
package errorfs

import (
	"errors"
	"fmt"
	"os"

	"github.com/weirhq/weir/vfs"
)

// OpKind is the kind of an operation.
type OpKind int

// Operation kinds. Every FS and File method maps to one kind, except Close
// and Seek, which are never failed, and Fd.
const (
	OpCreate   OpKind = iota // FS.Create
	OpOpen                   // FS.Open, FS.OpenReadWrite (which may create), FS.OpenDir, FS.Lock
	OpRead                   // File.Read, File.ReadAt
	OpWrite                  // File.Write, File.WriteAt
	OpSync                   // File.Sync of a file or of a directory
	OpTruncate               // File.Truncate
	OpRename                 // FS.Rename
	OpRemove                 // FS.Remove, FS.RemoveAll
	OpMkdir                  // FS.MkdirAll
	OpList                   // FS.List
	OpStat                   // FS.Stat, File.Stat
	numOpKinds
)

var opNames = [numOpKinds]string{"create", "open", "read", "write", "sync", "truncate", "rename", "remove", "mkdir", "list", "stat"}

func (k OpKind) String() string {
	if k >= 0 && k < numOpKinds {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Op describes one operation offered to an Injector.
type Op struct {
	Kind OpKind
	// Path is the name the operation acts on: the file's name as opened for
	// File methods, the old name for Rename.
	Path string
	// NewPath is the new name for Rename, "" otherwise.
	NewPath string
	// Offset is the position read or written (File.ReadAt/WriteAt), or -1
	// for the sequential Read/Write and every other kind.
	Offset int64
	// Len is the number of bytes to be read or written, 0 otherwise.
	Len int
}

// Injector decides whether an operation fails. MaybeError returns nil to let
// op proceed, or the error to fail it with (typically a syscall.Errno such
// as syscall.ENOSPC or syscall.EIO, or a Partial for writes).
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc is a function Injector.
type InjectorFunc func(op Op) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// ErrInjected matches (errors.Is) every error this package injects.
var ErrInjected = errors.New("injected error")

// InjectedError is the error an injected failure carries inside its
// *os.PathError or *os.LinkError.
type InjectedError struct {
	Op  Op
	Err error // what the Injector returned
}

func (e *InjectedError) Error() string { return "injected: " + e.Err.Error() }

// Unwrap returns the injector's error.
func (e *InjectedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInjected.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// PartialError, returned by an Injector for an OpWrite, makes the write
// store its first N bytes (all of them if fewer) and then fail with Err, as
// a write(2) cut short by a full disk does.
type PartialError struct {
	N   int
	Err error
}

// Partial returns a *PartialError.
func Partial(n int, err error) error { return &PartialError{N: n, Err: err} }

func (e *PartialError) Error() string { return fmt.Sprintf("after %d bytes: %v", e.N, e.Err) }

// Unwrap returns Err.
func (e *PartialError) Unwrap() error { return e.Err }

// Wrap returns fs with inj consulted before every operation.
func Wrap(fs vfs.FS, inj Injector) vfs.FS {
	return &errorFS{fs: fs, inj: inj}
}

type errorFS struct {
	fs  vfs.FS
	inj Injector
}

// check offers op to the injector and returns the wrapped error, or nil.
func check(inj Injector, op Op) error {
	err := inj.MaybeError(op)
	if err == nil {
		return nil
	}
	ierr := &InjectedError{Op: op, Err: err}
	if op.Kind == OpRename {
		return &os.LinkError{Op: "rename", Old: op.Path, New: op.NewPath, Err: ierr}
	}
	return &os.PathError{Op: op.Kind.String(), Path: op.Path, Err: ierr}
}

func (e *errorFS) check(kind OpKind, path string) error {
	return check(e.inj, Op{Kind: kind, Path: path, Offset: -1})
}

func (e *errorFS) file(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, name: name, inj: e.inj}, nil
}

func (e *errorFS) Create(name string) (vfs.File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	return e.file(name, f, err)
}

func (e *errorFS) OpenReadWrite(name string) (vfs.File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenReadWrite(name)
	return e.file(name, f, err)
}

func (e *errorFS) Open(name string) (vfs.File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	return e.file(name, f, err)
}

func (e *errorFS) Lock(name string) (vfs.File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Lock(name)
	return e.file(name, f, err)
}

func (e *errorFS) OpenDir(dir string) (vfs.File, error) {
	if err := e.check(OpOpen, dir); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenDir(dir)
	return e.file(dir, f, err)
}

func (e *errorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *errorFS) RemoveAll(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

func (e *errorFS) Rename(oldname, newname string) error {
	if err := check(e.inj, Op{Kind: OpRename, Path: oldname, NewPath: newname, Offset: -1}); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *errorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.check(OpMkdir, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

func (e *errorFS) List(dir string) ([]string, error) {
	if err := e.check(OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

func (e *errorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

// errorFile wraps a File; Close, Seek and Fd pass through unchanged.
type errorFile struct {
	vfs.File
	name string
	inj  Injector
}

func (f *errorFile) op(kind OpKind, off int64, n int) Op {
	return Op{Kind: kind, Path: f.name, Offset: off, Len: n}
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := check(f.inj, f.op(OpRead, -1, len(p))); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := check(f.inj, f.op(OpRead, off, len(p))); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

// partial performs the prefix of a write that a *PartialError in err
// allows, and returns its length and err.
func partial(err error, p []byte, write func([]byte) (int, error)) (int, error) {
	var pe *PartialError
	if !errors.As(err, &pe) || pe.N <= 0 {
		return 0, err
	}
	n, werr := write(p[:min(pe.N, len(p))])
	if werr != nil {
		return n, werr
	}
	return n, err
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := check(f.inj, f.op(OpWrite, -1, len(p))); err != nil {
		return partial(err, p, f.File.Write)
	}
	return f.File.Write(p)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := check(f.inj, f.op(OpWrite, off, len(p))); err != nil {
		return partial(err, p, func(q []byte) (int, error) { return f.File.WriteAt(q, off) })
	}
	return f.File.WriteAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := check(f.inj, f.op(OpSync, -1, 0)); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := check(f.inj, f.op(OpTruncate, -1, 0)); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *errorFile) Stat() (os.FileInfo, error) {
	if err := check(f.inj, f.op(OpStat, -1, 0)); err != nil {
		return nil, err
	}
	return f.File.Stat()
}
