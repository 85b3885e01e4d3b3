package log

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/vfs"
)

// ManagerOptions configure OpenManager.
type ManagerOptions struct {
	FS           vfs.FS // default vfs.Default
	Dir          string // data dir; each partition is "<topic>-<partition>" in it
	Sync         SyncPolicy
	SyncInterval time.Duration
	// RetentionCheckInterval is how often retention runs (Kafka's
	// log.retention.check.interval.ms, default 5 minutes); < 0 disables
	// the background loop (tests call ApplyRetention).
	RetentionCheckInterval time.Duration
	Now                    func() time.Time
	Logger                 *slog.Logger
	// The compaction cleaner (compact_manager.go): how often it looks for
	// a compacted log to clean (default 15s, < 0 disables the loop; tests
	// call Clean/CleanOnce), its I/O rate in bytes/s (0: default
	// DefaultCleanerBytesPerSec, < 0: unlimited) and its offset map memory
	// (default DefaultCleanerMapBytes).
	CleanerInterval    time.Duration
	CleanerBytesPerSec int64
	CleanerMapBytes    int
}

// DefaultRetentionCheckInterval is Kafka's log.retention.check.interval.ms.
const DefaultRetentionCheckInterval = 5 * time.Minute

// Manager owns the logs of many partitions under one data dir and runs
// retention on them in the background. It is goroutine-safe.
type Manager struct {
	opts   ManagerOptions
	mu     sync.Mutex
	logs   map[partKey]*Log
	closed bool
	stop   chan struct{}
	done   chan struct{}
	// cleaner is the compaction loop (compact_manager.go).
	cleaner *managerCleaner
}

type partKey struct {
	topic     string
	partition int32
}

// OpenManager creates the data dir if needed and starts the retention loop.
// Partitions are opened with Open (the broker knows which exist).
func OpenManager(opts ManagerOptions) (*Manager, error) {
	if opts.Dir == "" {
		return nil, errors.New("log: ManagerOptions.Dir is empty")
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RetentionCheckInterval == 0 {
		opts.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if err := mkdirAllDurable(opts.FS, opts.Dir); err != nil {
		return nil, storageErr("create data dir", err)
	}
	m := &Manager{opts: opts, logs: map[partKey]*Log{}, stop: make(chan struct{}), done: make(chan struct{})}
	if opts.RetentionCheckInterval > 0 {
		go m.retentionLoop()
	} else {
		close(m.done)
	}
	m.startCleaner()
	return m, nil
}

// Open opens (or returns the already open) log of a partition. For an open
// log, cfg replaces its config.
func (m *Manager) Open(topic string, partition int32, cfg Config) (*Log, error) {
	if topic == "" || topic == "." || topic == ".." || strings.ContainsAny(topic, `/\`) || partition < 0 {
		return nil, fmt.Errorf("log: invalid partition %q-%d", topic, partition)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	k := partKey{topic, partition}
	if l, ok := m.logs[k]; ok {
		l.SetConfig(cfg)
		return l, nil
	}
	l, err := Open(Options{
		FS: m.opts.FS, Dir: logDirName(m.opts.Dir, topic, partition), Config: cfg,
		Sync: m.opts.Sync, SyncInterval: m.opts.SyncInterval, Now: m.opts.Now,
		Logger: m.opts.Logger.With("topic", topic, "partition", partition),
	})
	if err != nil {
		return nil, err
	}
	m.logs[k] = l
	return l, nil
}

// Get returns the open log of a partition.
func (m *Manager) Get(topic string, partition int32) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[partKey{topic, partition}]
	return l, ok
}

// Remove closes the partition's log and deletes its directory (topic
// deletion). Removing a partition that is not open removes its directory
// if present.
func (m *Manager) Remove(topic string, partition int32) error {
	m.mu.Lock()
	k := partKey{topic, partition}
	l, ok := m.logs[k]
	delete(m.logs, k)
	m.mu.Unlock()
	if ok {
		return l.Delete()
	}
	dir := logDirName(m.opts.Dir, topic, partition)
	if err := m.opts.FS.RemoveAll(dir); err != nil {
		return storageErr("remove "+dir, err)
	}
	if err := syncDir(m.opts.FS, m.opts.Dir); err != nil {
		return storageErr("sync "+m.opts.Dir, err)
	}
	return nil
}

// ApplyRetention runs retention on every open log once and returns the
// number of segments deleted.
func (m *Manager) ApplyRetention() (int, error) {
	m.mu.Lock()
	logs := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		logs = append(logs, l)
	}
	m.mu.Unlock()
	total := 0
	var errs []error
	for _, l := range logs {
		n, err := l.ApplyRetention()
		total += n
		if err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, fmt.Errorf("%s: %w", l.dir, err))
		}
	}
	return total, errors.Join(errs...)
}

func (m *Manager) retentionLoop() {
	defer close(m.done)
	t := time.NewTicker(m.opts.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			if _, err := m.ApplyRetention(); err != nil {
				m.opts.Logger.Warn("retention", "err", err)
			}
		}
	}
}

// Close stops retention and closes every log (each writes its clean
// checkpoint).
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.closed = true
	logs := m.logs
	m.logs = map[partKey]*Log{}
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	m.stopCleaner()
	var errs []error
	for _, l := range logs {
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, fmt.Errorf("%s: %w", l.dir, err))
		}
	}
	return errors.Join(errs...)
}
