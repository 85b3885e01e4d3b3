package stream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State cleaner (Kafka Streams' StateDirectory.cleanRemovedTasks).
//
// A task directory stays on disk after its task moved to another instance,
// or after this instance stopped keeping a standby copy of it: it is reused
// if the task comes back soon (its checkpoint makes the restore replay only
// the changelog tail). A directory no task or standby of this instance uses,
// that nothing wrote to for StateCleanupDelay, is deleted.
//
// Only the entries of <StateDir>/<app> named like a task ("<sub>_<p>") are
// candidates; the instance id file and anything else are left alone. A
// candidate is first renamed (under standbyManager.mu, where claims and
// standby starts are decided, so none can open it meanwhile) to a name no
// task uses, ".deleting-<task>-<n>", then removed; a removal cut short by a
// crash is finished by the next pass. A task assigned here between a pass's
// look at the App's tasks and its rename may lose its (long unused) copy:
// it then restores from the changelog start, as Kafka Streams' cleaner
// allows too.

// defaultStateCleanupDelay is Kafka Streams' state.cleanup.delay.ms default.
const defaultStateCleanupDelay = 10 * time.Minute

// deletingPrefix names directories being deleted.
const deletingPrefix = ".deleting-"

// StateCleanupDelay sets how long the local directory of a task that this
// instance neither runs nor keeps a standby copy of stays on disk after its
// last write (Kafka Streams' state.cleanup.delay.ms). Keeping it makes the
// task's return cheap (only the changelog tail is replayed); deleting it
// frees its disk. The cleaner runs this often while the App runs. Default:
// 10 minutes; <= 0 never deletes.
func StateCleanupDelay(d time.Duration) Opt {
	return optFunc(func(c *config) { c.cleanupDelay = d })
}

// stateCleaner deletes unused task directories for one App.
type stateCleaner struct {
	m       *standbyManager
	removed prometheus.Counter
	passes  atomic.Int64 // completed passes (tests)

	mu     sync.Mutex
	cancel context.CancelFunc // of the running loop, if any
	wg     sync.WaitGroup
}

func newStateCleaner(m *standbyManager) (*stateCleaner, error) {
	c := &stateCleaner{m: m, removed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "stream",
		Name: "state_dirs_removed_total", Help: "Local task directories deleted after StateCleanupDelay unused.",
		ConstLabels: prometheus.Labels{"app": m.a.id}})}
	if r := m.a.cfg.registerer; r != nil {
		if err := r.Register(c.removed); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// start runs a pass every StateCleanupDelay until stop (or ctx is done).
func (c *stateCleaner) start(ctx context.Context) {
	delay := c.m.a.cfg.cleanupDelay
	if delay <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.wg.Go(func() {
		tick := time.NewTicker(delay)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := c.clean(c.m.a.cfg.clock.Now()); err != nil {
				c.m.a.cfg.logger.Warn("state cleaner", "err", err)
			}
		}
	})
}

// stop ends the loop and waits for a pass under way.
func (c *stateCleaner) stop() {
	c.mu.Lock()
	cancel := c.cancel
	c.cancel = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.wg.Wait()
}

// parseTaskDir returns the task a directory name stands for.
func parseTaskDir(name string) (taskID, bool) {
	sub, p, ok := strings.Cut(name, "_")
	if !ok {
		return taskID{}, false
	}
	s, err1 := strconv.Atoi(sub)
	n, err2 := strconv.ParseInt(p, 10, 32)
	if err1 != nil || err2 != nil || s < 0 || n < 0 || strconv.Itoa(s) != sub || strconv.FormatInt(n, 10) != p {
		return taskID{}, false
	}
	return taskID{sub: s, partition: int32(n)}, true
}

// lastWrite is the latest modification time of dir and its entries (a
// store's writes go to its write-ahead log, a file in dir).
func lastWrite(dir string) (time.Time, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return time.Time{}, err
	}
	latest := info.ModTime()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return time.Time{}, err
	}
	for _, e := range entries {
		ei, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return time.Time{}, err
		}
		if ei.ModTime().After(latest) {
			latest = ei.ModTime()
		}
	}
	return latest, nil
}

// clean runs one pass as of now: deletes every unused task directory last
// written at least StateCleanupDelay before now, and the remains of passes
// cut short. It returns the tasks whose directories it deleted.
func (c *stateCleaner) clean(now time.Time) ([]taskID, error) {
	defer c.passes.Add(1)
	a := c.m.a
	delay := a.cfg.cleanupDelay
	root := filepath.Join(a.cfg.stateDir, a.id)
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state cleaner: %w", err)
	}
	// Tasks active or assigned here (App.mu, never held with m.mu).
	inUse := map[taskID]bool{}
	a.mu.Lock()
	for id := range a.tasks {
		inUse[id] = true
	}
	for id := range a.assigned {
		inUse[id] = true
	}
	a.mu.Unlock()

	var errs []error
	var removed []taskID
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, deletingPrefix) {
			if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		id, ok := parseTaskDir(name)
		if !ok || !e.IsDir() || inUse[id] {
			continue
		}
		dir := filepath.Join(root, name)
		last, err := lastWrite(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if now.Sub(last) < delay {
			continue
		}
		trash := filepath.Join(root, fmt.Sprintf("%s%s-%d", deletingPrefix, name, now.UnixNano()))
		m := c.m
		m.mu.Lock()
		used := m.claimed[id] || m.running[id] != nil || m.stopping[id] != nil
		if !used {
			err = os.Rename(dir, trash)
		}
		m.mu.Unlock()
		if used {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(trash); err != nil {
			errs = append(errs, err)
		}
		c.removed.Inc()
		removed = append(removed, id)
		a.cfg.logger.Info("deleted the local state of a task unused here", "task", id.String(),
			"last_write", last, "delay", delay)
	}
	return removed, errors.Join(errs...)
}
