package vfs

import (
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// InvalidFd is what Fd returns for a file that has no OS file descriptor.
const InvalidFd = ^uintptr(0)

// MaxMemFileSize bounds a MemFS file: a write or truncate that would make a
// file larger fails with EFBIG instead of exhausting memory.
const MaxMemFileSize = 1 << 30

// MemFS is an in-memory FS that records what has been made durable, so that
// CrashClone can produce the state after a simulated power loss (the crash
// model is in the package doc). It is goroutine-safe: one mutex guards the
// whole tree and every file's contents.
//
// Paths: the separator is filepath.Separator; names are cleaned
// (filepath.Clean) and resolved from a single root, so "/a/b" and "a/b" name
// the same file. The root always exists and is durable; entries in it, like
// in any directory, need OpenDir(root).Sync() (root may be "", "." or "/").
//
// Stat reports a zero ModTime and modes 0644 (files) and 0755|ModeDir
// (directories); permissions passed to MkdirAll are ignored.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
	// journal lists, in order, the directory-entry changes not yet made
	// durable by a directory sync (a change is dropped from it when its
	// directory is synced). CrashCloneWith may apply a prefix of it.
	journal []metaOp
	// locked holds the files (inodes) locked by Lock. A CrashClone starts
	// with none: a crash ends the process that held them.
	locked map[*memNode]bool
}

// memNode is an inode: a regular file or a directory.
type memNode struct {
	isDir bool

	// Regular file. Invariant: durable is always a slice capped at its
	// length (durable[:len:len]). While !diverged, data[:len(durable)] and
	// durable are the same bytes, possibly the same backing array, and no
	// byte below len(durable) is written in place; the first change below
	// len(durable) copies data and sets diverged. So a pure append since the
	// last Sync is exactly !diverged && len(data) > len(durable).
	data, durable []byte
	diverged      bool

	// Directory: live entries and entries as of the last directory sync.
	children, durableChildren map[string]*memNode
}

// entryChange sets dir's entry name to node (nil: removes it).
type entryChange struct {
	dir  *memNode
	name string
	node *memNode
}

// metaOp is one directory operation; its changes persist together or not at
// all (a rename's two halves; each half is dropped when its dir is synced).
type metaOp []entryChange

func newDir() *memNode {
	return &memNode{isDir: true, children: map[string]*memNode{}, durableChildren: map[string]*memNode{}}
}

// NewCrashableMem returns an empty MemFS.
func NewCrashableMem() *MemFS {
	return &MemFS{root: newDir()}
}

var _ FS = (*MemFS)(nil)

func pathErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

// split cleans name into its components; the root is no components.
func split(name string) ([]string, error) {
	name = filepath.Clean(name)
	name = strings.TrimLeft(name, string(filepath.Separator))
	if name == "." || name == "" {
		return nil, nil
	}
	parts := strings.Split(name, string(filepath.Separator))
	if parts[0] == ".." {
		return nil, syscall.ENOENT
	}
	return parts, nil
}

// lookupDir returns the directory named by parts. Lock must be held.
func (m *MemFS) lookupDir(parts []string) (*memNode, error) {
	d := m.root
	for _, p := range parts {
		c := d.children[p]
		if c == nil {
			return nil, syscall.ENOENT
		}
		if !c.isDir {
			return nil, syscall.ENOTDIR
		}
		d = c
	}
	return d, nil
}

// lookup returns the parent directory of name, name's last component ("" for
// the root) and the node it names (nil if none). Lock must be held.
func (m *MemFS) lookup(name string) (parent *memNode, base string, n *memNode, err error) {
	parts, err := split(name)
	if err != nil {
		return nil, "", nil, err
	}
	if len(parts) == 0 {
		return nil, "", m.root, nil
	}
	parent, err = m.lookupDir(parts[:len(parts)-1])
	if err != nil {
		return nil, "", nil, err
	}
	base = parts[len(parts)-1]
	return parent, base, parent.children[base], nil
}

// setEntries changes a live directory entry and journals the change as one op
// with any others passed. Lock must be held.
func (m *MemFS) setEntries(changes ...entryChange) {
	for _, c := range changes {
		if c.node == nil {
			delete(c.dir.children, c.name)
		} else {
			c.dir.children[c.name] = c.node
		}
	}
	m.journal = append(m.journal, metaOp(changes))
}

func (m *MemFS) openFile(op, name string, create, truncate, write bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	switch {
	case n == nil && !create:
		return nil, pathErr(op, name, syscall.ENOENT)
	case n == nil:
		n = &memNode{}
		m.setEntries(entryChange{parent, base, n})
	case n.isDir && write:
		return nil, pathErr(op, name, syscall.EISDIR)
	case truncate:
		n.resize(0)
	}
	return &memFile{fs: m, n: n, name: name, write: write}, nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) { return m.openFile("open", name, true, true, true) }

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) {
	return m.openFile("open", name, true, false, true)
}

// Open implements FS. Opening a directory is allowed (as with os.Open).
func (m *MemFS) Open(name string) (File, error) { return m.openFile("open", name, false, false, false) }

// Lock implements FS. Locks are per inode, as flock(2): a file locked under
// one name is locked under every name it has.
func (m *MemFS) Lock(name string) (File, error) {
	f, err := m.openFile("lock", name, true, false, true)
	if err != nil {
		return nil, err
	}
	mf := f.(*memFile)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locked[mf.n] {
		mf.closed = true
		return nil, pathErr("lock", name, ErrLocked)
	}
	if m.locked == nil {
		m.locked = map[*memNode]bool{}
	}
	m.locked[mf.n] = true
	mf.holdsLock = true
	return mf, nil
}

// OpenDir implements FS.
func (m *MemFS) OpenDir(dir string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.lookup(dir)
	if err == nil && n == nil {
		err = syscall.ENOENT
	} else if err == nil && !n.isDir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, pathErr("opendir", dir, err)
	}
	return &memFile{fs: m, n: n, name: dir}, nil
}

func (m *MemFS) remove(name string, all bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, n, err := m.lookup(name)
	if all && (err == nil && n == nil || err == syscall.ENOENT) {
		return nil
	}
	switch {
	case err != nil:
	case n == nil:
		err = syscall.ENOENT
	case parent == nil:
		err = syscall.EBUSY // the root
	case n.isDir && len(n.children) > 0 && !all:
		err = syscall.ENOTEMPTY
	}
	if err != nil {
		return pathErr("remove", name, err)
	}
	// RemoveAll unlinks the subtree from its parent in one change; its
	// inner entries keep whatever durable state they had, which only
	// matters if the parent's removal is not made durable.
	m.setEntries(entryChange{parent, base, nil})
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error { return m.remove(name, false) }

// RemoveAll implements FS.
func (m *MemFS) RemoveAll(name string) error { return m.remove(name, true) }

// Rename implements FS. As os.Rename: it replaces an existing file, never a
// directory (EEXIST).
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	linkErr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	// The checks run in the order os.Rename and rename(2) make them, so
	// both implementations return the same error.
	op, ob, on, oerr := m.lookup(oldname)
	np, nb, nn, nerr := m.lookup(newname)
	if oerr == nil && on == nil {
		oerr = syscall.ENOENT
	}
	var err error
	switch {
	case nerr == nil && nn != nil && nn.isDir && oerr != nil:
		err = oerr
	case nerr == nil && nn != nil && nn.isDir:
		err = syscall.EEXIST // os.Rename never replaces a directory
	case oerr != nil && oerr != syscall.ENOENT: // old parent unresolvable
		err = oerr
	case nerr != nil:
		err = nerr
	case oerr != nil:
		err = oerr
	case op == nil || np == nil:
		err = syscall.EBUSY // the root
	case on.isDir && m.isWithin(np, on):
		err = syscall.EINVAL
	case nn == on:
		return nil
	case nn != nil && on.isDir:
		err = syscall.ENOTDIR
	}
	if err != nil {
		return linkErr(err)
	}
	m.setEntries(entryChange{op, ob, nil}, entryChange{np, nb, on})
	return nil
}

// isWithin reports whether dir is d or lies below it. Lock must be held.
func (m *MemFS) isWithin(dir, d *memNode) bool {
	if dir == d {
		return true
	}
	for _, c := range d.children {
		if c.isDir && m.isWithin(dir, c) {
			return true
		}
	}
	return false
}

// MkdirAll implements FS. Each directory it creates is one journalled entry
// change in its parent.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts, err := split(dir)
	if err != nil {
		return pathErr("mkdir", dir, err)
	}
	d := m.root
	for _, p := range parts {
		c := d.children[p]
		if c == nil {
			c = newDir()
			m.setEntries(entryChange{d, p, c})
		} else if !c.isDir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		d = c
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.lookup(dir)
	if err == nil && n == nil {
		err = syscall.ENOENT
	} else if err == nil && !n.isDir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, pathErr("open", dir, err)
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.lookup(name)
	if err == nil && n == nil {
		err = syscall.ENOENT
	}
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return n.info(name), nil
}

// ---- file contents ----

// touch prepares n.data for a change of the bytes at positions >= off,
// copying it first if that change would touch durable bytes (see memNode).
func (n *memNode) touch(off int) {
	if off < len(n.durable) && !n.diverged {
		n.data = slices.Clone(n.data)
		n.diverged = true
	}
}

// resize sets n's length, zero-filling any extension.
func (n *memNode) resize(size int) {
	if size < len(n.data) {
		if size < len(n.durable) && !n.diverged {
			n.data = slices.Clone(n.data[:size])
			n.diverged = true
		}
		n.data = n.data[:size]
		return
	}
	n.touch(len(n.data))
	old := len(n.data)
	n.data = slices.Grow(n.data, size-old)[:size]
	clear(n.data[old:]) // the backing array may hold bytes of an earlier, longer length
}

// writeAt writes p at off, extending n as needed.
func (n *memNode) writeAt(p []byte, off int) {
	if len(p) == 0 {
		return // as pwrite(2): no extension
	}
	if end := off + len(p); end > len(n.data) {
		n.resize(end)
	}
	n.touch(off)
	copy(n.data[off:], p)
}

// sync makes n's live state durable.
func (n *memNode) sync(m *MemFS) {
	if !n.isDir {
		n.durable = n.data[:len(n.data):len(n.data)]
		n.diverged = false
		return
	}
	n.durableChildren = maps.Clone(n.children)
	// Drop the journalled changes to n: they are durable now.
	j := m.journal[:0]
	for _, op := range m.journal {
		op = slices.DeleteFunc(op, func(c entryChange) bool { return c.dir == n })
		if len(op) > 0 {
			j = append(j, op)
		}
	}
	clear(m.journal[len(j):])
	m.journal = j
}

func (n *memNode) info(name string) os.FileInfo {
	fi := memFileInfo{name: filepath.Base(name), size: int64(len(n.data)), mode: 0o644}
	if n.isDir {
		fi.size, fi.mode = 0, fs.ModeDir|0o755
	}
	return fi
}

type memFileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (fi memFileInfo) Name() string       { return fi.name }
func (fi memFileInfo) Size() int64        { return fi.size }
func (fi memFileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi memFileInfo) ModTime() time.Time { return time.Time{} }
func (fi memFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi memFileInfo) Sys() any           { return nil }

// ---- crash ----

// CrashOptions widens CrashCloneWith from the strict model (the zero value)
// to more of the states a real machine can be left in. See the package doc.
type CrashOptions struct {
	// Rand drives every random choice; required if any option is set.
	Rand *rand.Rand
	// TornWrites keeps, for each file whose unsynced change is a pure
	// append, a random prefix (possibly empty, possibly all) of the
	// unsynced tail.
	TornWrites bool
	// UnsyncedEntries applies a random prefix (possibly empty, possibly
	// all) of the directory operations not yet made durable, in the order
	// they were made, as a journaling file system may have committed them.
	UnsyncedEntries bool
}

// CrashClone returns the state after a power loss under the strict model:
// exactly the durable state. The clone is independent of m.
func (m *MemFS) CrashClone() *MemFS { return m.CrashCloneWith(CrashOptions{}) }

// CrashCloneWith returns a possible state after a power loss; see
// CrashOptions and the package doc. The clone is independent of m.
func (m *MemFS) CrashCloneWith(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	if (opts.TornWrites || opts.UnsyncedEntries) && opts.Rand == nil {
		panic("vfs: CrashOptions.Rand is nil")
	}
	// entries returns the directory table the clone gets for d.
	entries := func(d *memNode) map[string]*memNode { return d.durableChildren }
	if opts.UnsyncedEntries {
		overlay := map[*memNode]map[string]*memNode{}
		for _, op := range m.journal[:opts.Rand.IntN(len(m.journal)+1)] {
			for _, c := range op {
				t, ok := overlay[c.dir]
				if !ok {
					t = maps.Clone(c.dir.durableChildren)
					overlay[c.dir] = t
				}
				if c.node == nil {
					delete(t, c.name)
				} else {
					t[c.name] = c.node
				}
			}
		}
		entries = func(d *memNode) map[string]*memNode {
			if t, ok := overlay[d]; ok {
				return t
			}
			return d.durableChildren
		}
	}
	// A node reachable by two names (a cross-directory rename with only one
	// side synced) stays one node in the clone.
	seen := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := seen[n]; ok {
			return c
		}
		if n.isDir {
			c := newDir()
			seen[n] = c
			for name, child := range entries(n) {
				c.children[name] = clone(child)
			}
			c.durableChildren = maps.Clone(c.children)
			return c
		}
		// The clone shares the durable bytes with m: both copy before
		// writing below their durable length (see memNode).
		keep := n.durable
		if opts.TornWrites && !n.diverged && len(n.data) > len(n.durable) {
			// 1/4: none of the tail, 1/4: all of it, 1/2: a uniform prefix.
			// m may still write the tail in place, so it is copied.
			end := len(n.durable)
			switch k := opts.Rand.IntN(4); {
			case k == 1:
				end = len(n.data)
			case k >= 2:
				end += opts.Rand.IntN(len(n.data) - len(n.durable) + 1)
			}
			keep = slices.Clip(slices.Clone(n.data[:end]))
		}
		c := &memNode{data: keep, durable: keep}
		seen[n] = c
		return c
	}
	return &MemFS{root: clone(m.root)}
}

// ---- handles ----

// memFile is an open MemFS file or directory.
type memFile struct {
	fs     *MemFS
	n      *memNode
	name   string
	pos    int64
	write  bool
	closed bool
	// holdsLock: opened by Lock; Close releases the lock.
	holdsLock bool
}

var _ File = (*memFile)(nil)

// check returns the error for op on f, or nil. Lock must be held.
func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, os.ErrClosed)
	case write && !f.write:
		return pathErr(op, f.name, syscall.EBADF)
	case f.n.isDir && op != "sync" && op != "stat" && op != "seek":
		return pathErr(op, f.name, syscall.EISDIR)
	}
	return nil
}

// As on the OS: Read of no bytes succeeds on any open file; ReadAt and
// WriteAt of no bytes succeed on any file, even a closed one.

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed || len(p) > 0 {
		if err := f.check("read", false); err != nil {
			return 0, err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if f.pos >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, pathErr("readat", f.name, syscall.EINVAL)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.pos > MaxMemFileSize-int64(len(p)) { // no overflow
		return 0, pathErr("write", f.name, syscall.EFBIG)
	}
	f.n.writeAt(p, int(f.pos))
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, pathErr("writeat", f.name, syscall.EINVAL)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off > MaxMemFileSize-int64(len(p)) {
		return 0, pathErr("writeat", f.name, syscall.EFBIG)
	}
	f.n.writeAt(p, int(off))
	return len(p), nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("seek", false); err != nil {
		return 0, err
	}
	switch whence {
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += int64(len(f.n.data))
	case io.SeekStart:
	default:
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	if offset < 0 {
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	f.pos = offset
	return offset, nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("truncate", f.name, os.ErrClosed)
	}
	if !f.write || f.n.isDir || size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL) // as ftruncate(2)
	}
	if size > MaxMemFileSize {
		return pathErr("truncate", f.name, syscall.EFBIG)
	}
	f.n.resize(int(size))
	return nil
}

// Sync makes the file's contents, or a directory's entries, durable.
func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.n.sync(f.fs)
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	return f.n.info(f.name), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	if f.holdsLock {
		delete(f.fs.locked, f.n)
	}
	return nil
}

// Fd returns InvalidFd.
func (f *memFile) Fd() uintptr { return InvalidFd }
