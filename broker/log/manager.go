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
//
// Opening or removing a partition does file I/O (directory and file
// creation, fsyncs) without holding mu: the key is claimed in busy for the
// duration instead, so operations on different partitions run in parallel
// while those on the same partition are serialised. Invariants, under mu:
//   - a key is never in both logs and busy: Open adds its log to logs and
//     ends its claim in one critical section, Remove takes the log out of
//     logs and claims the key in one;
//   - a key in busy has exactly one goroutine working on it; everyone else
//     wanting that key waits for its channel to close and looks again;
//   - after closed is set no log is added to logs, and Close returns only
//     once busy is empty, so no log opened concurrently with Close stays
//     open (the opener closes it and returns ErrClosed).
type Manager struct {
	opts   ManagerOptions
	mu     sync.Mutex
	logs   map[partKey]*Log
	busy   map[partKey]chan struct{} // closed when the claim ends
	closed bool
	// closeConcurrency bounds the logs Close closes at once (tests and
	// benchmarks lower it).
	closeConcurrency int
	stop             chan struct{}
	done             chan struct{}
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
	if err := vfs.MkdirAllDurable(opts.FS, opts.Dir); err != nil {
		return nil, storageErr("create data dir", err)
	}
	m := &Manager{opts: opts, logs: map[partKey]*Log{}, busy: map[partKey]chan struct{}{}, closeConcurrency: DefaultCloseConcurrency, stop: make(chan struct{}), done: make(chan struct{})}
	if opts.RetentionCheckInterval > 0 {
		go m.retentionLoop()
	} else {
		close(m.done)
	}
	m.startCleaner()
	return m, nil
}

// Open opens (or returns the already open) log of a partition. For an open
// log, cfg replaces its config. Opens of different partitions run
// concurrently; concurrent Opens of one partition open it once and return
// the same *Log. If the Manager is closed while the open runs, the log is
// closed again and Open returns ErrClosed.
func (m *Manager) Open(topic string, partition int32, cfg Config) (*Log, error) {
	if topic == "" || topic == "." || topic == ".." || strings.ContainsAny(topic, `/\`) || partition < 0 {
		return nil, fmt.Errorf("log: invalid partition %q-%d", topic, partition)
	}
	k := partKey{topic, partition}
	m.mu.Lock()
	if l, ok := m.logs[k]; ok && !m.closed {
		m.mu.Unlock()
		l.SetConfig(cfg)
		return l, nil
	}
	if err := m.claimLocked(k); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	// Another Open may have finished while this one waited for the key.
	if l, ok := m.logs[k]; ok {
		m.releaseLocked(k)
		m.mu.Unlock()
		l.SetConfig(cfg)
		return l, nil
	}
	m.mu.Unlock()

	l, err := Open(Options{
		FS: m.opts.FS, Dir: logDirName(m.opts.Dir, topic, partition), Config: cfg,
		Sync: m.opts.Sync, SyncInterval: m.opts.SyncInterval, Now: m.opts.Now,
		Logger: m.opts.Logger.With("topic", topic, "partition", partition),
	})

	m.mu.Lock()
	closed := m.closed
	if err == nil && !closed {
		m.logs[k] = l
	}
	m.releaseLocked(k)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if closed {
		if cerr := l.Close(); cerr != nil && !errors.Is(cerr, ErrClosed) {
			m.opts.Logger.Warn("close log opened during manager close", "dir", l.dir, "err", cerr)
		}
		return nil, ErrClosed
	}
	return l, nil
}

// claimLocked waits until no other goroutine works on k, then claims it.
// It returns ErrClosed (without a claim) once the Manager is closed.
// mu must be held; it is released while waiting.
func (m *Manager) claimLocked(k partKey) error {
	for {
		if m.closed {
			return ErrClosed
		}
		ch, busy := m.busy[k]
		if !busy {
			m.busy[k] = make(chan struct{})
			return nil
		}
		m.mu.Unlock()
		<-ch
		m.mu.Lock()
	}
}

// releaseLocked ends the claim on k and wakes its waiters. mu must be held.
func (m *Manager) releaseLocked(k partKey) {
	close(m.busy[k])
	delete(m.busy, k)
}

// Get returns the open log of a partition. A log whose Open is still
// running is not returned.
func (m *Manager) Get(topic string, partition int32) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[partKey{topic, partition}]
	return l, ok
}

// Remove closes the partition's log and deletes its directory (topic
// deletion). Removing a partition that is not open removes its directory
// if present. An Open of the same partition in flight finishes first (its
// log is then removed); an Open that starts during the Remove waits for it
// and opens a fresh, empty log.
func (m *Manager) Remove(topic string, partition int32) error {
	k := partKey{topic, partition}
	m.mu.Lock()
	if err := m.claimLocked(k); err != nil {
		m.mu.Unlock()
		return err
	}
	l, ok := m.logs[k]
	delete(m.logs, k)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.releaseLocked(k)
		m.mu.Unlock()
	}()
	if ok {
		return l.Delete()
	}
	dir := logDirName(m.opts.Dir, topic, partition)
	if err := m.opts.FS.RemoveAll(dir); err != nil {
		return storageErr("remove "+dir, err)
	}
	if err := vfs.SyncDir(m.opts.FS, m.opts.Dir); err != nil {
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
	// Opens and Removes in flight finish first: an Open that completes
	// now closes its own log (it sees closed), so after this loop logs
	// holds every log that is still open.
	for len(m.busy) > 0 {
		var ch chan struct{}
		for _, c := range m.busy {
			ch = c
			break
		}
		m.mu.Unlock()
		<-ch
		m.mu.Lock()
	}
	logs := m.logs
	m.logs = map[partKey]*Log{}
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	m.stopCleaner()
	// Each Close flushes and fsyncs; many partitions close much faster
	// with several in flight.
	var (
		errMu sync.Mutex
		errs  []error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, max(1, m.closeConcurrency))
	for _, l := range logs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
				errMu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", l.dir, err))
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// DefaultCloseConcurrency bounds the logs Manager.Close closes at once.
const DefaultCloseConcurrency = 16
