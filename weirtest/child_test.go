package weirtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childRoles are the roles this package's tests start as child processes.
var childRoles = map[string]func() int{
	// "wait" prints its marker, then waits for SIGTERM and exits 3.
	"wait": func() int {
		ctx, stop := ChildContext()
		defer stop()
		fmt.Println("ready", os.Getenv("CHILD_MARK"))
		<-ctx.Done()
		return 3
	},
	// "ignore" prints its marker and never exits by itself, not even on
	// SIGTERM.
	"ignore": func() int {
		fmt.Println("ready")
		select {}
	},
}

func waitLogs(t *testing.T, c *Child, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(c.Logs(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("child wrote %q, want %q within 30s", c.Logs(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A child runs its role with the environment it was given; Stop delivers
// SIGTERM to the role's context and returns its exit code.
func TestChildStopRunsRoleShutdown(t *testing.T) {
	c := StartChild(t, "wait", "CHILD_MARK=m42")
	waitLogs(t, c, "ready m42")
	err := c.Stop(30 * time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Stop: %v, want exit code 3 from the role", err)
	}
	if c.Err() != err {
		t.Fatalf("Err after exit: %v, want %v", c.Err(), err)
	}
}

// Kill ends a process that ignores SIGTERM, and Stop kills one that does not
// exit within its timeout.
func TestChildKillAndStopTimeout(t *testing.T) {
	c := StartChild(t, "ignore")
	waitLogs(t, c, "ready")
	c.Kill()
	select {
	case <-c.Done():
	default:
		t.Fatal("Kill returned before the process was gone")
	}
	if c.Err() == nil {
		t.Fatal("a killed process reported a clean exit")
	}

	c = StartChild(t, "ignore")
	waitLogs(t, c, "ready")
	// The role does not handle SIGTERM, so the Go runtime's default
	// action ends it; either way Stop returns an error, never hangs.
	if err := c.Stop(5 * time.Second); err == nil {
		t.Fatal("Stop of a role that does not exit cleanly returned nil")
	}
}

// An unknown role exits with code 2 and says so.
func TestChildUnknownRole(t *testing.T) {
	c := StartChild(t, "no-such-role")
	<-c.Done()
	var exit *exec.ExitError
	if !errors.As(c.Err(), &exit) || exit.ExitCode() != 2 || !strings.Contains(c.Logs(), "unknown child role") {
		t.Fatalf("exit %v, logs %q; want exit code 2 naming the unknown role", c.Err(), c.Logs())
	}
}
