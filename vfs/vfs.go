// Package vfs is the file system interface through which weir's storage engine
// (broker/log) does all of its file I/O.
//
// Three implementations exist:
//
//   - Default: the operating system. File.Sync is fdatasync(2) on Linux
//     (fsync elsewhere); a directory opened with OpenDir syncs with fsync(2),
//     which makes the entries created, renamed or removed in it durable.
//   - MemFS (NewCrashableMem): an in-memory file system that records what
//     has been made durable, so that CrashClone can produce the state a
//     machine would find after a power loss. See the "Crash model" section
//     below; the storage engine's durability tests rely on it exactly.
//   - errorfs.Wrap: wraps any FS and injects errors (ENOSPC, EIO) by
//     operation and path.
//
// Helpers, the only copies of them in weir: SyncDir, ReadFile,
// WriteFileSynced, ReplaceFile and WriteFileAtomic (the crash-safe replace:
// temporary file, sync, rename, directory sync) and MkdirAllDurable (create
// a path and sync each new entry's parent). Package vfstest holds the
// semantics every implementation shares, as a test body (it is run against
// Default, MemFS and errorfs), and the MemFS is fuzzed against the OS.
//
// # Crash model (MemFS)
//
// A MemFS keeps, besides the live ("volatile") state every operation sees,
// a "durable" state: the state that survives a power loss. Only two
// operations change the durable state:
//
//  1. File.Sync on a regular file: the file's durable contents become its
//     current contents (length and every byte). Appends, overwrites and
//     truncates made before the Sync survive; those made after it do not,
//     until the next Sync. A file's data is identified by the file (the
//     inode), not by its name: syncing data through a handle makes it
//     durable whatever names the file has or will have.
//  2. File.Sync on a directory opened with OpenDir: the directory's durable
//     entry table becomes its current entry table (the names it holds and
//     the file or sub-directory each name refers to). A Create, Rename or
//     Remove of an entry survives a crash only once the directory that holds
//     the entry has been synced; a Rename between two directories needs both
//     synced (the old directory loses the entry when it is synced, the new
//     one gains it when it is synced, independently). MkdirAll behaves like a
//     Create of each missing directory: a new directory survives only once
//     its parent is synced.
//
// CrashClone returns a new, independent MemFS holding exactly the durable
// state, which is also its live state (the strict model); it has no open
// files, and handles on the original never affect it. Reachability is by
// durable entries from the root: a file survives iff a path of durable
// directory entries leads to it, and then with its durable contents. Hence:
//
//   - a file created, written and synced, whose directory entry was never
//     synced (or whose parent directory's own entry was never synced), is
//     lost entirely;
//   - a file whose directory entry is durable but whose data was never synced
//     survives with length 0 (a freshly created file) or with its last synced
//     contents;
//   - a removed file whose removal was not synced comes back, with its
//     durable contents;
//   - "write tmp; sync tmp; rename tmp -> final; sync dir" is atomic: after a
//     crash "final" is either the old file or the complete new one;
//   - a rename between directories with only the new one synced leaves the
//     file under both names (one file, as a hard link); with only the old one
//     synced, under neither. Sync both.
//
// CrashCloneWith(CrashOptions{...}) widens the strict model with seeded
// randomness (the zero options are CrashClone):
//
//   - TornWrites: for every file whose live contents extend its durable
//     contents (the live file is longer and no byte below the durable length
//     changed since the last Sync; i.e. the unsynced change is a pure
//     append), keep a random prefix of the unsynced tail (the live bytes
//     past the durable length, as they are at CrashCloneWith): none of it,
//     all of it, or any length in between. This is what a disk does to an unsynced
//     append and what log recovery must handle. A file with any other
//     unsynced change (overwrite, truncate below the durable length) keeps
//     exactly its durable contents, so a clone never holds bytes that were
//     neither synced nor written.
//   - UnsyncedEntries: apply a random prefix, in program order, of the
//     directory operations not yet made durable (a rename is one operation,
//     its two halves applied together), as a journaling file system that
//     committed more than was asked. Operations already covered by a sync of
//     their directory are never undone.
//
// The strict model keeps the least a POSIX file system that honours fsync
// may keep; the options add states such file systems do produce (ext4 and
// xfs commit directory operations in order, disks tear unsynced appends). It
// does not model: unsynced bytes persisting out of order (a later block
// without an earlier one), torn overwrites of durable bytes, lying disks that
// drop synced data, or metadata such as modification times. A storage engine
// tested under CrashClone and CrashCloneWith with both options must recover
// from every state produced.
package vfs

import (
	"errors"
	"io"
	"os"
)

// File is an open file or directory. Like *os.File it has one offset, shared
// by Read, Write and Seek, so those must not be called concurrently on one
// File; ReadAt, WriteAt, Sync and Stat do not use the offset and may be called
// concurrently with anything (except Close).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	// WriteAt writes at an absolute position, extending the file (with
	// zeros over any gap) if needed; it does not move the offset.
	io.WriterAt
	// Seek moves the offset used by Read and Write; Seek(0, io.SeekEnd)
	// positions a reopened file for appending.
	io.Seeker
	io.Closer
	// Sync makes the file's data and the metadata needed to read it back
	// durable (fdatasync on Linux). On a directory opened with OpenDir it
	// makes the directory's entries durable.
	Sync() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
	// Fd returns the OS file descriptor, or InvalidFd for in-memory files.
	Fd() uintptr
}

// FS is a file system. Implementations are goroutine-safe.
type FS interface {
	// Create creates the named file, or truncates it if it exists, and opens
	// it read-write.
	Create(name string) (File, error)
	// OpenReadWrite opens the named file read-write, creating it if it does
	// not exist; it does not truncate.
	OpenReadWrite(name string) (File, error)
	// Open opens the named file read-only.
	Open(name string) (File, error)
	// Remove removes the named file or empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything it contains. It returns nil if
	// name does not exist.
	RemoveAll(name string) error
	// Rename renames (moves) oldname to newname, replacing newname if it is
	// an existing file; an existing directory is never replaced (EEXIST).
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// OpenDir opens a directory so that its entries can be synced.
	OpenDir(dir string) (File, error)
	// List returns the names of the entries in dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes the named file or directory.
	Stat(name string) (os.FileInfo, error)
	// Lock opens the named file read-write, creating it if it does not
	// exist, and takes an exclusive lock on it without waiting. The lock is
	// held until the returned File is closed or the process ends (a killed
	// process releases it). A lock already held, by another process or by
	// another Lock of the same file in this process, fails with an error
	// wrapping ErrLocked. The lock is advisory: it excludes other Lock
	// calls only, not reads or writes of the file.
	Lock(name string) (File, error)
}

// ErrLocked is the error (wrapped) of FS.Lock on a file locked by someone
// else.
var ErrLocked = errors.New("file is locked")

// Default is the operating system's file system.
var Default FS = osFS{}
