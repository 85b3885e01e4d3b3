package log

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// syncLog records the path of every fsync (of a file or a directory).
type syncLog struct {
	mu    sync.Mutex
	paths []string
}

func (s *syncLog) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpSync {
		s.mu.Lock()
		s.paths = append(s.paths, op.Path)
		s.mu.Unlock()
	}
	return nil
}

func (s *syncLog) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paths
	s.paths = nil
	return p
}

// Opening a new partition through the Manager costs two fsyncs: the new
// directory once its files are created, then the logs directory that holds
// it. (It was 8: the parent, both index headers, the directory, both index
// files again and the recovery-point file and its directory.) No path is
// synced twice.
func TestFreshPartitionFsyncs(t *testing.T) {
	mem := vfs.NewCrashableMem()
	syncs := &syncLog{}
	m, err := OpenManager(ManagerOptions{FS: errorfs.Wrap(mem, syncs), Dir: "/data/logs", RetentionCheckInterval: -1, CleanerInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	syncs.take()
	if _, err := m.Open("t", 0, Config{}); err != nil {
		t.Fatal(err)
	}
	got := syncs.take()
	want := []string{"/data/logs/t-0", "/data/logs"}
	for i := range got {
		got[i] = filepath.ToSlash(got[i])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("fsyncs of a new partition: %d %q, want %q", len(got), got, want)
	}
}

// A power cut at any file system operation of creating a partition (and of
// its first acknowledged append) leaves either no partition directory or
// one that opens as a whole log: empty, or holding the acknowledged batch.
// Once Open has returned, the directory is there after any cut. Plain
// images and images with torn writes and a random prefix of the unsynced
// directory entries are checked.
func TestCreatePartitionPowerCut(t *testing.T) {
	base := vfs.NewCrashableMem()
	if err := base.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	base = base.CrashClone() // /d is durable
	const dir = "/d/t-0"
	batch := testBatch{records: 2, valueSize: 50}.build()
	var opened, acked bool
	run := func(fs vfs.FS) {
		opened, acked = false, false
		l, err := Open(Options{FS: fs, Dir: dir})
		if err != nil {
			return
		}
		opened = true
		b := slices.Clone(batch)
		if _, err := l.Append(b, true); err == nil {
			acked = true
		}
		l.Close()
	}
	_, ops := cutRun(base, run)
	if ops < 8 {
		t.Fatalf("creation and one append did only %d operations", ops)
	}
	cuts := 0
	eachPowerCut(base, ops, 11, run, func(img *vfs.MemFS, where string) {
		cuts++
		_, statErr := img.Stat(dir)
		if statErr != nil {
			if opened {
				t.Fatalf("%s: Open returned, but the directory is gone: %v", where, statErr)
			}
			return // no partition: the broker never recorded it
		}
		l, err := Open(Options{FS: img, Dir: dir, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("%s: reopen: %v", where, err)
		}
		defer l.Close()
		batches := readAllRaw(t, l, where)
		switch {
		case acked && len(batches) != 1:
			t.Fatalf("%s: acknowledged batch lost: %d batches", where, len(batches))
		case len(batches) > 1:
			t.Fatalf("%s: %d batches after one append", where, len(batches))
		case len(batches) == 1 && (batches[0].off != 0 || len(batches[0].b) != len(batch)):
			t.Fatalf("%s: served batch at %d of %d bytes", where, batches[0].off, len(batches[0].b))
		}
		if _, err := l.Append(testBatch{records: 1}.build(), true); err != nil {
			t.Fatalf("%s: append after recovery: %v", where, err)
		}
	})
	if cuts < 2*ops {
		t.Fatalf("checked %d cuts of %d operations", cuts, ops)
	}
}
