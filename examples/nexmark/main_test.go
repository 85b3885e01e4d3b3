package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/bench/nexmark"
	"github.com/weirhq/weir/weirtest"
)

// buildRunner compiles this runner into a temporary directory.
func buildRunner(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "nexmark")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", exe, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// The runner, as a separate process, runs q4 (stateful: a repartition,
// event-time timers, an aggregate) bounded over disordered events on a
// broker: it creates the output with the input's partition count, exits 0,
// and the output equals the batch reference. A second bounded run over the
// same input (committed to its end) writes nothing more.
func TestRunnerBoundedQ4(t *testing.T) {
	exe := buildRunner(t)
	b := weirtest.Start(t, weirtest.Topic("events", 4))
	g, err := nexmark.NewGenerator(nexmark.GeneratorConfig{Seed: 11, BaseTime: 1_700_000_000_000, EventsPerSecond: 1000,
		Disorder: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	events := make([]nexmark.Event, 5000)
	for i := range events {
		events[i] = g.Next()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := nexmark.WriteEvents(ctx, b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "events", events, 4); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	runner := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, exe, args...)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatalf("run %v: %v", args, err)
			}
			code = ee.ExitCode()
		}
		return string(out), code
	}
	args := []string{"--query", "q4", "--brokers", b.Addr(), "--input", "events", "--output", "q4-out",
		"--out-of-orderness", "1500ms", "--guarantee", "exactly-once", "--bounded", "--state-dir", stateDir}
	if out, code := runner(args...); code != 0 {
		t.Fatalf("runner exited %d:\n%s", code, out)
	}
	details, err := b.Admin().ListTopics(ctx, "q4-out")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details["q4-out"].Partitions); n != 4 {
		t.Errorf("output topic has %d partitions, want the input's 4", n)
	}
	got, err := nexmark.ReadTopic(ctx, "q4-out", kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if len(nexmark.Q4(events)) < 3 {
		t.Fatalf("reference has %d categories: the case tests little", len(nexmark.Q4(events)))
	}
	if err := nexmark.Check("q4", events, got); err != nil {
		t.Fatal(err)
	}
	if out, code := runner(args...); code != 0 {
		t.Fatalf("second run exited %d:\n%s", code, out)
	}
	again, err := nexmark.ReadTopic(ctx, "q4-out", kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(got) {
		t.Errorf("second bounded run over a consumed input wrote %d more records", len(again)-len(got))
	}

	// Usage errors exit 2 and say what is wrong.
	for _, bad := range [][]string{
		{"--brokers", b.Addr(), "--input", "events", "--output", "x"},
		{"--query", "q4", "--input", "events", "--output", "x", "--guarantee", "twice"},
	} {
		out, code := runner(bad...)
		if code != 2 || !strings.Contains(out, "nexmark:") {
			t.Errorf("%v: exit %d, output %q; want 2 and a message", bad, code, out)
		}
	}
	// An unknown query exits 1 naming the known ones.
	out, code := runner("--query", "q99", "--brokers", b.Addr(), "--input", "events", "--output", "x", "--bounded")
	if code != 1 || !strings.Contains(out, "q0, q1") {
		t.Errorf("unknown query: exit %d, output %q", code, out)
	}
}
