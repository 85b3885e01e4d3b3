package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeDataDirInUse: two processes on one --data-dir. The second
// `weir serve` (and `weir dev` on the same broker directory) refuses to
// start, naming the first one's pid and Kafka address; after the first is
// killed with SIGKILL the directory is free again (the kernel drops the
// lock with the process).
func TestServeDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	brokerDir := filepath.Join(dir, "broker") // where `weir dev --data-dir dir` keeps the broker
	p := startServe(t, nil, "--data-dir", brokerDir)
	holder := []string{"in use", fmt.Sprintf("pid=%d", p.cmd.Process.Pid), "kafka=" + p.kafkaAddr}

	errOut, code := runWeirProcess(t, "serve", "--data-dir", brokerDir, "--kafka-addr", "127.0.0.1:0", "--http-addr", "")
	if code == 0 {
		t.Fatal("a second weir serve started on a data directory in use")
	}
	for _, want := range holder {
		if !strings.Contains(errOut, want) {
			t.Errorf("second serve: stderr %q does not say %q", errOut, want)
		}
	}

	errOut, code = runWeirProcess(t, "dev", "--data-dir", dir, "--kafka-addr", "127.0.0.1:0", "--rate", "0", "--duration", "1ms")
	if code == 0 {
		t.Fatal("weir dev started on a broker data directory in use")
	}
	for _, want := range holder {
		if !strings.Contains(errOut, want) {
			t.Errorf("dev: stderr %q does not say %q", errOut, want)
		}
	}
	if strings.Contains(errOut, "--kafka-addr") {
		t.Errorf("dev: stderr %q suggests another port for a data directory in use", errOut)
	}

	if err := p.stop(syscall.SIGKILL); err == nil {
		t.Fatal("weir serve exited cleanly on SIGKILL")
	}
	again := startServe(t, nil, "--data-dir", brokerDir)
	if err := again.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("serve after the holder was killed: %v\n%s", err, again.log())
	}
}

// runWeirProcess runs weir as a child process that must exit within 30s
// (a broker that starts when it should not would serve until killed), and
// returns its stderr and exit code.
func runWeirProcess(t *testing.T, args ...string) (stderr string, code int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), execMainEnv+"=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("weir %s still running after 30s (killed)\n%s", strings.Join(args, " "), errb.String())
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return errb.String(), exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return errb.String(), 0
}
