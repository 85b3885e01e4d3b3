package weirtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Crash tests of applications run the application in a child process — the
// test binary itself, re-executed in a named role — kill it with SIGKILL so
// that none of its shutdown code runs, and start it again on the same state:
//
//	func TestMain(m *testing.M) {
//		weirtest.RunChildRole(map[string]func() int{"counter": runCounter})
//		os.Exit(m.Run())
//	}
//
//	func TestCounterKill9(t *testing.T) {
//		c := weirtest.StartChild(t, "counter", "BROKER="+b.Addr())
//		// ... wait for progress
//		c.Kill()
//		c = weirtest.StartChild(t, "counter", "BROKER="+b.Addr())
//	}
//
// A role function reads its configuration from the environment given to
// StartChild, stops on ChildContext's cancellation (SIGTERM), and returns
// the process's exit code.

// childRoleEnv names the role a re-executed test binary runs.
const childRoleEnv = "WEIRTEST_CHILD_ROLE"

// RunChildRole runs the role named in the environment and exits the process
// with its code, if this process is a child StartChild started; otherwise
// it returns at once. Call it first in TestMain. An unknown role exits 2.
func RunChildRole(roles map[string]func() int) {
	role, ok := os.LookupEnv(childRoleEnv)
	if !ok {
		return
	}
	run, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "weirtest: unknown child role %q\n", role)
		os.Exit(2)
	}
	os.Exit(run())
}

// ChildContext is the context a child role runs under: cancelled when the
// process receives SIGTERM (Stop), so that the role can shut down cleanly.
// SIGKILL (Kill) gives it no such chance.
func ChildContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM)
}

// Child is a child process started by StartChild or StartProcess. Its
// methods are safe for concurrent use.
type Child struct {
	cmd  *exec.Cmd
	out  *SyncBuffer
	done chan struct{}
	err  error // Wait's result, set before done closes
}

// StartChild re-executes the test binary in role (see RunChildRole), with
// the current environment plus env ("NAME=value" entries). The child runs no
// tests; it dies with the test process, and t's cleanup kills it if it is
// still running.
func StartChild(t testing.TB, role string, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childRoleEnv+"="+role), env...)
	return StartProcess(t, cmd)
}

// StartProcess starts cmd with its standard output and error collected (see
// Logs), killed with the test process and by t's cleanup if still running.
func StartProcess(t testing.TB, cmd *exec.Cmd) *Child {
	t.Helper()
	setDeathSignal(cmd)
	c := &Child{cmd: cmd, out: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	t.Cleanup(c.Kill)
	return c
}

// Kill sends SIGKILL and returns once the process is gone. It does nothing
// when the process has already exited.
func (c *Child) Kill() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// Stop sends SIGTERM and waits up to timeout for the process to exit, then
// kills it. It returns the process's exit error (nil for exit code 0), or
// an error saying it had to be killed.
func (c *Child) Stop(timeout time.Duration) error {
	select {
	case <-c.done:
		return c.err
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		c.Kill()
		return fmt.Errorf("did not exit within %v of SIGTERM; killed", timeout)
	}
}

// Done is closed when the process has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is the process's exit error once Done is closed (nil for exit code
// 0), and nil before.
func (c *Child) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Logs returns the tail (last 4000 bytes) of what the process wrote to its
// standard output and error, for a failure message.
func (c *Child) Logs() string {
	s := c.out.String()
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	return s
}

// SyncBuffer is a bytes.Buffer that one goroutine may write while others
// read it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
