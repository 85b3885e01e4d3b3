package log

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestManager(t *testing.T) {
	fsCases(t, func(t *testing.T, fs vfs.FS, dir string) {
		clk := newClock()
		mo := ManagerOptions{FS: fs, Dir: dir, Now: clk.Now, RetentionCheckInterval: 5 * time.Millisecond, Logger: testLogger(t)}
		m, err := OpenManager(mo)
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.Open("orders", 0, Config{SegmentBytes: 1000, RetentionMs: -1})
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.Open("orders", 1, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := m.Open("orders", 0, Config{SegmentBytes: 1000, RetentionMs: -1}); again != a {
			t.Fatal("second Open returned another log")
		}
		if _, err := m.Open("../x", 0, Config{}); err == nil {
			t.Fatal("path traversal accepted")
		}
		for range 10 {
			mustAppend(t, a, testBatch{records: 4, valueSize: 100, firstTs: clk.Now().UnixMilli()}.build(), true)
		}
		mustAppend(t, b, testBatch{records: 1}.build(), true)
		if got, ok := m.Get("orders", 1); !ok || got != b {
			t.Fatal("Get")
		}
		if _, ok := m.Get("orders", 2); ok {
			t.Fatal("Get of unknown partition")
		}
		// The retention loop deletes old segments once retention is set.
		segs := len(a.segments())
		a.SetConfig(Config{SegmentBytes: 1000, RetentionBytes: 1000, RetentionMs: -1})
		deadline := time.Now().Add(10 * time.Second)
		for len(a.segments()) == segs {
			if time.Now().After(deadline) {
				t.Fatal("retention loop did not run")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := m.Remove("orders", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Stat(b.Dir()); err == nil {
			t.Fatal("removed partition's directory still exists")
		}
		leo := a.LogEndOffset()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("second close: %v", err)
		}
		m, err = OpenManager(mo)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		a, err = m.Open("orders", 0, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if a.LogEndOffset() != leo {
			t.Fatalf("reopened leo %d, want %d", a.LogEndOffset(), leo)
		}
	})
}

// handleFS counts the file handles open on an FS (files and directories),
// so a test can assert that nothing leaked.
type handleFS struct {
	vfs.FS
	open atomic.Int64
}

type countedFile struct {
	vfs.File
	fs   *handleFS
	once sync.Once
}

func (f *countedFile) Close() error {
	f.once.Do(func() { f.fs.open.Add(-1) })
	return f.File.Close()
}

func (h *handleFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	h.open.Add(1)
	return &countedFile{File: f, fs: h}, nil
}

func (h *handleFS) Create(name string) (vfs.File, error) { return h.wrap(h.FS.Create(name)) }
func (h *handleFS) Open(name string) (vfs.File, error)   { return h.wrap(h.FS.Open(name)) }
func (h *handleFS) OpenDir(dir string) (vfs.File, error) { return h.wrap(h.FS.OpenDir(dir)) }
func (h *handleFS) OpenReadWrite(name string) (vfs.File, error) {
	return h.wrap(h.FS.OpenReadWrite(name))
}

// gateFS blocks every operation on a path containing one of its keys until
// that key is released, and reports the first such operation per key.
type gateFS struct {
	reached, release map[string]chan struct{}
	once             map[string]*sync.Once
}

func newGate(keys ...string) *gateFS {
	g := &gateFS{reached: map[string]chan struct{}{}, release: map[string]chan struct{}{}, once: map[string]*sync.Once{}}
	for _, k := range keys {
		g.reached[k], g.release[k], g.once[k] = make(chan struct{}), make(chan struct{}), new(sync.Once)
	}
	return g
}

// injector waits at most 10s for a release, then fails the operation (so a
// test whose release never comes fails instead of hanging).
func (g *gateFS) injector() errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		for k, rel := range g.release {
			if !strings.Contains(op.Path, k) {
				continue
			}
			g.once[k].Do(func() { close(g.reached[k]) })
			select {
			case <-rel:
			case <-time.After(10 * time.Second):
				return syscall.ETIMEDOUT
			}
		}
		return nil
	})
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func openTestManager(t *testing.T, fs vfs.FS) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerOptions{FS: fs, Dir: "/data", RetentionCheckInterval: -1, CleanerInterval: -1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Two partitions' opens are in their file I/O at the same time: each one's
// first operation waits until the other's has started. With opens
// serialised by the manager's lock this deadlocks (and fails after 10s).
func TestManagerOpensPartitionsConcurrently(t *testing.T) {
	mem := vfs.NewCrashableMem()
	m := openTestManager(t, mem)
	defer m.Close()
	started := map[string]chan struct{}{"gate-0": make(chan struct{}), "gate-1": make(chan struct{})}
	var once [2]sync.Once
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		for i, k := range []string{"gate-0", "gate-1"} {
			if !strings.Contains(op.Path, k) {
				continue
			}
			once[i].Do(func() { close(started[k]) })
			other := started[[]string{"gate-1", "gate-0"}[i]]
			select {
			case <-other:
			case <-time.After(10 * time.Second):
				return syscall.ETIMEDOUT
			}
		}
		return nil
	}))
	m.opts.FS = fs
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for p := range int32(2) {
		wg.Go(func() { _, errs[p] = m.Open("gate", p, Config{}) })
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("open gate-%d (opens not concurrent?): %v", p, err)
		}
	}
}

// Concurrent Opens of one partition open it once: every caller gets the
// same *Log, and no handle of a second open is left behind.
func TestManagerConcurrentOpenSamePartition(t *testing.T) {
	h := &handleFS{FS: vfs.NewCrashableMem()}
	m := openTestManager(t, h)
	const n = 16
	logs := make([]*Log, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { logs[i], errs[i] = m.Open("same", 0, Config{}) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if logs[i] != logs[0] {
			t.Fatalf("open %d returned another *Log", i)
		}
	}
	mustAppend(t, logs[0], testBatch{records: 1}.build(), true)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := h.open.Load(); got != 0 {
		t.Fatalf("%d file handles open after Close", got)
	}
}

// A Remove that starts while the partition's Open is in its I/O waits for
// it, then removes the log it opened.
func TestManagerRemoveWaitsForOpen(t *testing.T) {
	mem := vfs.NewCrashableMem()
	h := &handleFS{FS: mem}
	gate := newGate("rm-0")
	m := openTestManager(t, h)
	defer m.Close()
	h.FS = errorfs.Wrap(mem, gate.injector())

	type result struct {
		l   *Log
		err error
	}
	opened := make(chan result, 1)
	go func() {
		l, err := m.Open("rm", 0, Config{})
		opened <- result{l, err}
	}()
	waitClosed(t, gate.reached["rm-0"], "open to start")
	removed := make(chan error, 1)
	go func() { removed <- m.Remove("rm", 0) }()
	if _, ok := m.Get("rm", 0); ok {
		t.Fatal("Get returned a log whose open is in flight")
	}
	close(gate.release["rm-0"])
	r := <-opened
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get("rm", 0); ok {
		t.Fatal("removed partition still open")
	}
	if _, err := mem.Stat(r.l.Dir()); err == nil {
		t.Fatal("removed partition's directory exists")
	}
	if _, err := r.l.Append(testBatch{records: 1}.build(), true); !errors.Is(err, ErrClosed) {
		t.Fatalf("append to removed log: %v, want ErrClosed", err)
	}
	if got := h.open.Load(); got != 0 {
		t.Fatalf("%d file handles open after Remove", got)
	}
}

// Close during an Open waits for it; the Open closes its log and returns
// ErrClosed, so nothing stays open (goleak checks the log's goroutine).
func TestManagerCloseDuringOpen(t *testing.T) {
	mem := vfs.NewCrashableMem()
	h := &handleFS{FS: mem}
	gate := newGate("cl-0")
	m := openTestManager(t, h)
	h.FS = errorfs.Wrap(mem, gate.injector())
	opened := make(chan error, 1)
	go func() {
		_, err := m.Open("cl", 0, Config{})
		opened <- err
	}()
	waitClosed(t, gate.reached["cl-0"], "open to start")
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	// Release the open only once Close has begun (it then waits for it).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		m.mu.Lock()
		closing := m.closed
		m.mu.Unlock()
		if closing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close did not start")
		}
	}
	close(gate.release["cl-0"])
	if err := <-opened; !errors.Is(err, ErrClosed) {
		t.Fatalf("open racing Close: %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := h.open.Load(); got != 0 {
		t.Fatalf("%d file handles open after Close", got)
	}
	if _, err := m.Open("cl", 1, Config{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("open after Close: %v", err)
	}
	if err := m.Remove("cl", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("remove after Close: %v", err)
	}
}

// A failed Open leaves no handle and no entry; the next Open tries again.
func TestManagerOpenErrorLeaksNothing(t *testing.T) {
	mem := vfs.NewCrashableMem()
	h := &handleFS{FS: mem}
	m := openTestManager(t, h)
	defer m.Close()
	fail := errorfs.NewToggle(errorfs.FailIf(errorfs.And(errorfs.OnOps(errorfs.OpSync), errorfs.PathContains("bad-0")), syscall.EIO))
	fail.On()
	h.FS = errorfs.Wrap(mem, fail)
	if _, err := m.Open("bad", 0, Config{}); err == nil {
		t.Fatal("open with failing fsync succeeded")
	}
	if _, ok := m.Get("bad", 0); ok {
		t.Fatal("failed open left a log")
	}
	if got := h.open.Load(); got != 0 {
		t.Fatalf("%d file handles open after a failed Open", got)
	}
	fail.Off()
	l, err := m.Open("bad", 0, Config{})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	mustAppend(t, l, testBatch{records: 1}.build(), true)
}

// Random concurrent Open/Remove/Get of a few partitions (run with -race):
// every call succeeds, and at the end a partition is open exactly when its
// directory exists, and Close leaves no handle open.
func TestManagerConcurrentOpenRemove(t *testing.T) {
	mem := vfs.NewCrashableMem()
	h := &handleFS{FS: mem}
	m := openTestManager(t, h)
	const workers, ops, keys = 6, 40, 3
	errs := make(chan error, workers*ops)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				p := int32(rng.IntN(keys))
				switch rng.IntN(3) {
				case 0:
					l, err := m.Open("mix", p, Config{})
					if err != nil {
						errs <- fmt.Errorf("open %d: %w", p, err)
					} else if l == nil {
						errs <- fmt.Errorf("open %d: nil log", p)
					}
				case 1:
					if err := m.Remove("mix", p); err != nil {
						errs <- fmt.Errorf("remove %d: %w", p, err)
					}
				default:
					if l, ok := m.Get("mix", p); ok {
						// The log may be removed concurrently: ErrClosed is the
						// only acceptable failure.
						if _, err := l.Append(testBatch{records: 1}.build(), false); err != nil && !errors.Is(err, ErrClosed) {
							errs <- fmt.Errorf("append %d: %w", p, err)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for p := range int32(keys) {
		_, open := m.Get("mix", p)
		_, statErr := mem.Stat(logDirName("/data", "mix", p))
		if open != (statErr == nil) {
			t.Errorf("partition %d: open %v, directory exists %v", p, open, statErr == nil)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := h.open.Load(); got != 0 {
		t.Fatalf("%d file handles open after Close", got)
	}
}

// BenchmarkManager1000Partitions creates 1,000 fresh partitions through one
// Manager on the OS file system and closes it, alternating between one
// open/close at a time (the old serial path) and 16 in flight, and reports
// the mean times and the ratios (parallel/serial):
//
//	go test -run '^$' -bench Manager1000 -benchtime 2x ./broker/log
func BenchmarkManager1000Partitions(b *testing.B) {
	const parts = 1000
	pools := []int{1, DefaultCloseConcurrency}
	var openT, closeT [2]time.Duration
	root := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		for j, pool := range pools {
			m, err := OpenManager(ManagerOptions{Dir: fmt.Sprintf("%s/%d-%d", root, i, pool), RetentionCheckInterval: -1, CleanerInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			m.closeConcurrency = pool
			start := time.Now()
			sem := make(chan struct{}, pool)
			var wg sync.WaitGroup
			var failed atomic.Int32
			for p := range int32(parts) {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					if _, err := m.Open("wide", p, Config{}); err != nil {
						failed.Add(1)
					}
				})
			}
			wg.Wait()
			openT[j] += time.Since(start)
			if failed.Load() > 0 {
				b.Fatalf("%d opens failed", failed.Load())
			}
			start = time.Now()
			if err := m.Close(); err != nil {
				b.Fatal(err)
			}
			closeT[j] += time.Since(start)
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
	b.ReportMetric(ms(openT[0]), "ms/open-serial")
	b.ReportMetric(ms(openT[1]), "ms/open-parallel")
	b.ReportMetric(ms(openT[1])/ms(openT[0]), "open-ratio")
	b.ReportMetric(ms(closeT[0]), "ms/close-serial")
	b.ReportMetric(ms(closeT[1]), "ms/close-parallel")
	b.ReportMetric(ms(closeT[1])/ms(closeT[0]), "close-ratio")
}

// Close closes logs in parallel: a log whose close fails is reported (with
// its directory), every other one still closes, and no handle stays open.
func TestManagerCloseParallelErrors(t *testing.T) {
	mem := vfs.NewCrashableMem()
	h := &handleFS{FS: mem}
	m := openTestManager(t, h)
	for p := range int32(40) {
		l, err := m.Open("many", p, Config{})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, testBatch{records: 1}.build(), false)
	}
	h.FS = errorfs.Wrap(mem, errorfs.FailIf(errorfs.And(errorfs.OnOps(errorfs.OpSync), errorfs.PathContains("/many-7/")), syscall.EIO))
	err := m.Close()
	if err == nil || !strings.Contains(err.Error(), "many-7") {
		t.Fatalf("close error %v, want one naming many-7", err)
	}
	if strings.Contains(err.Error(), "many-8") {
		t.Fatalf("close error names a healthy log: %v", err)
	}
	if got := h.open.Load(); got != 0 {
		t.Fatalf("%d file handles open after Close", got)
	}
}

// Close racing random Opens and Removes of a few partitions (run with
// -race): calls fail only with ErrClosed, and once Close and the workers
// are done no handle is open (an Open finishing during Close closed its log).
func TestManagerCloseRacesOpenRemove(t *testing.T) {
	for seed := range uint64(4) {
		mem := vfs.NewCrashableMem()
		h := &handleFS{FS: mem}
		m := openTestManager(t, h)
		errs := make(chan error, 200)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(w)))
				for range 25 {
					p := int32(rng.IntN(3))
					var err error
					if rng.IntN(3) == 0 {
						err = m.Remove("cr", p)
					} else {
						_, err = m.Open("cr", p, Config{})
					}
					if err != nil && !errors.Is(err, ErrClosed) {
						errs <- err
					}
				}
			})
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := h.open.Load(); got != 0 {
			t.Fatalf("seed %d: %d file handles open after Close", seed, got)
		}
	}
}
