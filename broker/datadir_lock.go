package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/weirhq/weir/vfs"
)

// lockFileName is the data directory's lock file, as Kafka's ".lock" in each
// log directory. Its contents name the holder ("pid=N kafka=host:port"),
// for the message of a broker that finds it taken; the lock itself is the
// vfs lock on the file, which the kernel drops when the holder exits or is
// killed, so a stale file never blocks a start.
const lockFileName = ".lock"

// ErrDataDirLocked is the error (wrapped) of Start when another broker, in
// this process or another, holds the data directory.
var ErrDataDirLocked = errors.New("data directory is in use by another broker")

// dataDirLock is the held lock of one data directory.
type dataDirLock struct {
	f vfs.File
}

// lockDataDir takes dir's lock and records this process as its holder. When
// the lock is held, the error names the holder as its lock file records it.
func lockDataDir(fs vfs.FS, dir string) (*dataDirLock, error) {
	name := filepath.Join(dir, lockFileName)
	f, err := fs.Lock(name)
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is held by %s", ErrDataDirLocked, name, lockHolder(fs, name))
	}
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	l := &dataDirLock{f: f}
	if err := l.setHolder(""); err != nil {
		_ = f.Close()
		return nil, err
	}
	return l, nil
}

// setHolder rewrites the lock file's holder description: this process's
// pid, and the Kafka listener's address once known.
func (l *dataDirLock) setHolder(kafkaAddr string) error {
	holder := fmt.Sprintf("pid=%d", os.Getpid())
	if kafkaAddr != "" {
		holder += " kafka=" + kafkaAddr
	}
	holder += "\n"
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write data dir lock: %w", err)
	}
	if _, err := l.f.WriteAt([]byte(holder), 0); err != nil {
		return fmt.Errorf("write data dir lock: %w", err)
	}
	return nil
}

// release drops the lock; the file stays (an unlocked file is free).
func (l *dataDirLock) release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// lockHolder describes the holder of the lock file name from its contents,
// "an unknown process" when they are unreadable, empty (the holder has not
// written them yet) or not a holder description.
func lockHolder(fs vfs.FS, name string) string {
	const unknown = "an unknown process"
	data, err := vfs.ReadFile(fs, name)
	if err != nil {
		return unknown
	}
	s := strings.TrimSpace(string(data))
	if !strings.HasPrefix(s, "pid=") || len(s) > 200 || strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r)
	}) {
		return unknown
	}
	return s
}
