package state

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// diskUsage is the disk space the files under dir occupy (allocated blocks,
// as du counts them: preallocated space included).
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// maxSmallStoreDisk bounds the disk a task's store of a few keys takes (the
// stream package doc states the cost of a task).
const maxSmallStoreDisk = 8 << 20

// TestSmallStoreFootprint: a store of a handful of keys, checkpointed,
// reopened and checkpointed again (a task's life over two starts), takes a
// few MiB of disk, not the ~36 MiB a 32 MiB memtable's preallocated WAL made
// it (issue 16 defect 4: apps run many small tasks).
func TestSmallStoreFootprint(t *testing.T) {
	dir := t.TempDir()
	for round := range 2 {
		d := open(t, dir)
		txn := d.Begin()
		for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			if _, err := txn.Put("s", []byte(k), []byte("value-"+k), int64(round)); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		txn.Discard()
		if err := d.WriteCheckpoint(Checkpoint{"s": int64(7 * (round + 1))}); err != nil {
			t.Fatal(err)
		}
		used := diskUsage(t, dir)
		t.Logf("start %d: %d KiB on disk", round+1, used>>10)
		if used > maxSmallStoreDisk {
			t.Errorf("start %d: a 7-key store takes %d KiB on disk, want at most %d KiB", round+1, used>>10, maxSmallStoreDisk>>10)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
