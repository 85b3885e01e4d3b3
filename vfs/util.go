package vfs

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
)

// SyncDir makes the entries of dir (files created, renamed into or removed
// from it) durable: OpenDir, Sync, Close.
func SyncDir(fs FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// ReadFile returns the contents of the named file.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFileAtomic replaces the named file with data so that after a crash
// it holds either its previous contents (or is absent, if it was) or exactly
// data: it writes and syncs name+".tmp", renames that over name and syncs
// the directory. When it returns nil, data is durable. On error the
// temporary file may remain; a later call replaces it.
func WriteFileAtomic(fs FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
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
	if err != nil {
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		return err
	}
	if err := SyncDir(fs, filepath.Dir(name)); err != nil {
		return fmt.Errorf("sync dir of %s: %w", name, err)
	}
	return nil
}
