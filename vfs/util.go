package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
)

// TmpSuffix is the suffix WriteFileAtomic gives its temporary file. A file
// with it is never the current version of anything: recovery may delete it.
const TmpSuffix = ".tmp"

// SyncDir makes the entries of dir (files created, renamed into or removed
// from it) durable: OpenDir, Sync, Close.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// ReadFile returns the contents of the named file. An error opening it is
// returned unchanged (errors.Is(err, fs.ErrNotExist) tells a missing file).
// The file's size, when Stat knows it, sizes the buffer, so reading a whole
// index or metadata file allocates once.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := 0
	if st, err := f.Stat(); err == nil && st.Size() > 0 && int64(int(st.Size())) == st.Size() {
		size = int(st.Size())
	}
	// One byte more than the size, so that reading a file of exactly that
	// size reaches io.EOF without growing the buffer.
	b := make([]byte, 0, size+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// WriteFileSynced creates (or truncates) the named file, writes data and
// syncs it. When it returns nil the file's contents are durable; its name is
// durable once its directory is synced (see SyncDir).
func WriteFileSynced(fsys FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReplaceFile replaces the named file with data: it writes and syncs
// name+TmpSuffix (WriteFileSynced) and renames that over name. After a crash
// the file holds its previous contents or exactly data, and it holds data
// once the directory has been synced: a caller replacing several files of
// one directory syncs it once after the last (WriteFileAtomic syncs it for
// one file). On error the temporary file may remain; a later call replaces
// it.
func ReplaceFile(fsys FS, name string, data []byte) error {
	tmp := name + TmpSuffix
	if err := WriteFileSynced(fsys, tmp, data); err != nil {
		return err
	}
	return fsys.Rename(tmp, name)
}

// WriteFileAtomic replaces the named file with data so that after a crash
// it holds either its previous contents (or is absent, if it was) or exactly
// data: ReplaceFile, then SyncDir of its directory. When it returns nil,
// data is durable.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	if err := ReplaceFile(fsys, name, data); err != nil {
		return err
	}
	if err := SyncDir(fsys, filepath.Dir(name)); err != nil {
		return fmt.Errorf("sync dir of %s: %w", name, err)
	}
	return nil
}

// MkdirAllDurable creates dir and any missing parents and syncs the parent
// of each directory it created, so that when it returns nil the whole path
// survives a crash. An existing dir is left as it is (nothing is synced).
func MkdirAllDurable(fsys FS, dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := SyncDir(fsys, filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}
