package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// makeTaskDir creates root/name with a file in it, both last modified at
// mtime.
func makeTaskDir(t *testing.T, root, name string, mtime time.Time) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "000001.log")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, dir} {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestStateCleanerDeletesUnusedTaskDirs: a pass deletes the directories of
// tasks neither active, assigned, claimed nor kept as a standby (running or
// stopping) here, once unwritten for the delay; it leaves recent ones, other
// names and the instance id, and finishes deletions cut short.
func TestStateCleanerDeletesUnusedTaskDirs(t *testing.T) {
	bl := NewBuilder()
	countTopology(bl)
	dir := t.TempDir()
	a, err := NewApp("cl", bl, Brokers("127.0.0.1:1"), StateDir(dir), StateCleanupDelay(10*time.Minute), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "cl")
	now := time.Now()
	old := now.Add(-20 * time.Minute)
	for _, name := range []string{"0_0", "0_1", "0_2", "0_4", "1_0", "notatask", "0_07", ".deleting-0_9-1"} {
		makeTaskDir(t, root, name, old)
	}
	makeTaskDir(t, root, "0_3", now.Add(-time.Minute))
	if err := os.WriteFile(filepath.Join(root, "instance-id"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(root, "instance-id"), old, old); err != nil {
		t.Fatal(err)
	}
	m := a.standbys
	m.claimed[taskID{0, 0}] = true                                                      // active (being opened)
	m.running[taskID{0, 1}] = &standbyTask{id: taskID{0, 1}, done: make(chan struct{})} // a standby
	m.stopping[taskID{1, 0}] = &standbyTask{id: taskID{1, 0}, done: make(chan struct{})}
	a.assigned[taskID{0, 4}] = true

	removed, err := m.cleaner.clean(now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []taskID{{0, 2}}) {
		t.Errorf("removed %v, want [0_2]", removed)
	}
	for _, name := range []string{"0_0", "0_1", "0_3", "0_4", "1_0", "notatask", "0_07", "instance-id"} {
		if !exists(filepath.Join(root, name)) {
			t.Errorf("%s deleted", name)
		}
	}
	for _, name := range []string{"0_2", ".deleting-0_9-1"} {
		if exists(filepath.Join(root, name)) {
			t.Errorf("%s left", name)
		}
	}
	if n := counterValue(m.cleaner.removed); n != 1 {
		t.Errorf("removed metric %v, want 1", n)
	}

	// Released tasks go once unwritten for the delay.
	delete(m.claimed, taskID{0, 0})
	delete(m.running, taskID{0, 1})
	delete(m.stopping, taskID{1, 0})
	delete(a.assigned, taskID{0, 4})
	removed, err = m.cleaner.clean(now.Add(5 * time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(removed, compareTaskIDs)
	if want := []taskID{{0, 0}, {0, 1}, {0, 4}, {1, 0}}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v (0_3 is written 6 minutes ago)", removed, want)
	}
	if removed, err = m.cleaner.clean(now.Add(10 * time.Minute)); err != nil || !slices.Equal(removed, []taskID{{0, 3}}) {
		t.Errorf("removed %v (%v), want [0_3]", removed, err)
	}
	entries, _ := os.ReadDir(root)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"0_07", "instance-id", "notatask"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}

// TestStateCleanerDisabled: a delay <= 0 runs no cleaner.
func TestStateCleanerDisabled(t *testing.T) {
	bl := NewBuilder()
	countTopology(bl)
	a, err := NewApp("cl", bl, Brokers("127.0.0.1:1"), StateDir(t.TempDir()), StateCleanupDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	a.standbys.start(context.Background())
	defer a.standbys.stopAll()
	a.standbys.cleaner.mu.Lock()
	running := a.standbys.cleaner.cancel != nil
	a.standbys.cleaner.mu.Unlock()
	if running {
		t.Fatal("cleaner running with StateCleanupDelay(0)")
	}
}

// TestStateCleanerAfterTaskMoved runs the keyed count on one instance, then
// a second joins and takes half the tasks. Without standbys the first
// instance deletes the moved tasks' directories after the delay and keeps
// its active ones; with a standby replica it keeps them (they are its
// standby copies).
func TestStateCleanerAfterTaskMoved(t *testing.T) {
	for _, standbys := range []int{0, 1} {
		t.Run(fmt.Sprintf("standbys=%d", standbys), func(t *testing.T) {
			b := startBroker(t)
			const parts, keys = 2, 20
			b.createTopic("events", parts)
			b.createTopic("counts", parts)
			dir1 := t.TempDir()
			opts := func(dir string) []Opt {
				return []Opt{testLogger(t), StateDir(dir), CommitInterval(20 * time.Millisecond),
					StandbyReplicas(standbys), StateCleanupDelay(100 * time.Millisecond), QueryServer("127.0.0.1:0")}
			}
			a1 := b.run("clean", countTopology, opts(dir1)...)
			truth := map[string]int64{}
			produceEvents(b, 0, 200, keys, truth)
			b.waitFor("counts", 30*time.Second, atLeast(t, truth))
			taskDir := func(p int32) string { return a1.a.taskDir(taskID{0, p}) }
			for p := range int32(parts) {
				if !exists(taskDir(p)) {
					t.Fatalf("no directory for task 0_%d", p)
				}
			}
			a2 := b.run("clean", countTopology, opts(t.TempDir())...)
			waitSplit(t, parts, a1.a, a2.a)
			produceEvents(b, 200, 200, keys, truth)
			b.waitFor("counts", 30*time.Second, atLeast(t, truth))
			mine := localPartitions(a1.a)
			moved := int32(1 - mine[0])
			cleaner := a1.a.standbys.cleaner
			if standbys == 0 {
				deadline := time.Now().Add(30 * time.Second)
				for exists(taskDir(moved)) {
					if time.Now().After(deadline) {
						t.Fatalf("directory of moved task 0_%d kept", moved)
					}
					time.Sleep(20 * time.Millisecond)
				}
			} else {
				// Passes that ran after the standby copy of the moved
				// task started keep it.
				deadline := time.Now().Add(30 * time.Second)
				for {
					if _, running := a1.a.standbys.positions()[taskID{0, moved}]; running {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("no standby of task 0_%d", moved)
					}
					time.Sleep(20 * time.Millisecond)
				}
				// (Its directory may have been deleted before the standby
				// started: unused for longer than the short delay.)
				removed := counterValue(cleaner.removed)
				for {
					last, err := lastWrite(taskDir(moved))
					if err == nil && time.Since(last) > time.Second {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("standby directory of task 0_%d: last write %v (%v)", moved, last, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				for n := cleaner.passes.Load() + 3; cleaner.passes.Load() < n; {
					if time.Now().After(deadline) {
						t.Fatal("the cleaner does not run")
					}
					time.Sleep(20 * time.Millisecond)
				}
				if !exists(taskDir(moved)) || counterValue(cleaner.removed) != removed {
					t.Fatalf("directory of task 0_%d deleted, though it is a standby here", moved)
				}
			}
			if !exists(taskDir(mine[0])) {
				t.Fatalf("directory of active task 0_%d deleted", mine[0])
			}
			if n := counterValue(cleaner.removed); standbys == 0 && n == 0 {
				t.Errorf("no directory removed")
			}
		})
	}
}
