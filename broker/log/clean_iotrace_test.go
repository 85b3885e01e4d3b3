package log

import (
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/vfs"
)

// ioTraceFS wraps a vfs.FS and records the start and duration of every
// Sync (file or directory), so a benchmark can tell which of the cleaner's
// syncs overlap a slow produce. Only for benchmarks: it holds every event in
// memory.
type ioTraceFS struct {
	vfs.FS
	mu     sync.Mutex
	events []ioEvent
}

// ioEvent is one traced operation.
type ioEvent struct {
	name  string // base name of the file ("" for a directory)
	start time.Time
	dur   time.Duration
}

func (t *ioTraceFS) record(name string, start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	t.events = append(t.events, ioEvent{name: name, start: start, dur: d})
	t.mu.Unlock()
}

// take returns the events recorded since the last call.
func (t *ioTraceFS) take() []ioEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev := t.events
	t.events = nil
	return ev
}

func (t *ioTraceFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &ioTraceFile{File: f, fs: t, name: name}, nil
}

func (t *ioTraceFS) Create(name string) (vfs.File, error) {
	f, err := t.FS.Create(name)
	return t.wrap(f, filepath.Base(name), err)
}

func (t *ioTraceFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := t.FS.OpenReadWrite(name)
	return t.wrap(f, filepath.Base(name), err)
}

func (t *ioTraceFS) Open(name string) (vfs.File, error) {
	f, err := t.FS.Open(name)
	return t.wrap(f, filepath.Base(name), err)
}

func (t *ioTraceFS) OpenDir(dir string) (vfs.File, error) {
	f, err := t.FS.OpenDir(dir)
	return t.wrap(f, "", err)
}

type ioTraceFile struct {
	vfs.File
	fs   *ioTraceFS
	name string
}

func (f *ioTraceFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.fs.record(f.name, start)
	return err
}

// isCleanerIO reports whether a traced event is the cleaner's: a sync of a
// .cleaned file, of the directory (swaps), or of its own files.
func isCleanerIO(e ioEvent) bool {
	return e.name == "" || strings.HasSuffix(e.name, cleanedSuffix) ||
		strings.HasPrefix(e.name, cleanSwapFile) || strings.HasPrefix(e.name, cleanCkptFile)
}
