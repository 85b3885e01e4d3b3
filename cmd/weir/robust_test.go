package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/weirtest"
)

// cliResult is the outcome of a command line run in the background.
type cliResult struct {
	code   int
	stderr string
}

// startCLI runs a command line in the background; stdout is readable while
// it runs.
func startCLI(stdin string, args ...string) (*weirtest.SyncBuffer, <-chan cliResult) {
	out := &weirtest.SyncBuffer{}
	done := make(chan cliResult, 1)
	go func() {
		var errb weirtest.SyncBuffer
		code := run(args, strings.NewReader(stdin), out, &errb)
		done <- cliResult{code, errb.String()}
	}()
	return out, done
}

// waitCLI waits for a background command; a command still running after
// limit is reported as hanging (the limit is far above any --timeout the
// tests pass: it detects "never", not "slow").
func waitCLI(t *testing.T, done <-chan cliResult, limit time.Duration, what string) cliResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(limit):
		t.Fatalf("%s: still running after %s (hangs)", what, limit)
		return cliResult{}
	}
}

// refusedAddr is a 127.0.0.1 address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// silentAddr is a 127.0.0.1 address that accepts connections and never
// answers (a hung broker, a firewall that swallows packets).
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Issue 18 defect 2: produce and consume -g against a broker that is not
// there fail within --timeout, naming the address (they hung forever).
func TestUnreachableBroker(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr string
	}{
		{"refused", refusedAddr(t)},
		{"silent", silentAddr(t)},
	} {
		for _, args := range [][]string{
			{"produce", "t"},
			{"consume", "t", "-g", "g1"},
			{"consume", "t"},
		} {
			args := append(args, "--brokers", tc.addr, "--timeout", "2s")
			what := tc.name + ": weir " + strings.Join(args, " ")
			_, done := startCLI("a\nb\n", args...)
			r := waitCLI(t, done, 60*time.Second, what)
			if r.code == 0 {
				t.Errorf("%s: exit 0, want a failure", what)
			}
			if want := "broker unreachable: " + tc.addr; !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr %q, want it to say %q", what, r.stderr, want)
			}
		}
	}
}

// freePort returns a 127.0.0.1 address free at the time of the call, for a
// broker that must come back on the same address.
func freePort(t *testing.T) string { return refusedAddr(t) }

// weirProc is a weir command running as a child process (the test binary
// re-executed, see TestMain), with its output collected.
type weirProc struct {
	cmd            *exec.Cmd
	stdout, stderr *weirtest.SyncBuffer
	exited         chan struct{} // closed when the process ended
	err            error         // its exit error, once exited is closed
}

func startWeir(t *testing.T, args ...string) *weirProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &weirProc{cmd: exec.Command(exe, args...), stdout: &weirtest.SyncBuffer{}, stderr: &weirtest.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), execMainEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// interrupt sends SIGINT and waits for a clean exit (status 0).
func (p *weirProc) interrupt(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("weir %s after SIGINT: %v\nstderr: %s", strings.Join(p.cmd.Args[1:], " "), p.err, p.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("weir %s did not exit within 60s of SIGINT", strings.Join(p.cmd.Args[1:], " "))
	}
}

// waitOutput waits until every one of want is a line of p's stdout.
func (p *weirProc) waitOutput(t *testing.T, limit time.Duration, want ...string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		lines := map[string]bool{}
		for _, l := range strings.Split(p.stdout.String(), "\n") {
			lines[l] = true
		}
		missing := 0
		for _, w := range want {
			if !lines[w] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("weir %s ended (%v) before printing %q\nstdout: %s\nstderr: %s", strings.Join(p.cmd.Args[1:], " "), p.err, want, p.stdout, p.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("weir %s did not print %q within %s\nstdout: %s\nstderr: %s", strings.Join(p.cmd.Args[1:], " "), want, limit, p.stdout, p.stderr)
		}
	}
}

// Issue 18 defect 3: consume -g keeps going through a broker crash and
// restart (kill -9, back 2s later on the same address and data): the
// connection errors in between (if the client reports any) are retried, and
// the records produced after the restart are printed.
func TestConsumeGroupSurvivesBrokerRestart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	args := []string{"--data-dir", data, "--kafka-addr", addr, "--group-initial-rebalance-delay", "0"}
	srv := startServe(t, nil, args...)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "r", "-p", "2")
	mustCLI(t, "a0\na1\na2\n", "produce", b, "r", "-q")

	c := startWeir(t, "consume", b, "r", "-g", "survivor", "--timeout", "3s")
	c.waitOutput(t, 60*time.Second, "a0", "a1", "a2")

	if err := srv.stop(syscall.SIGKILL); err == nil {
		t.Fatal("weir serve exited cleanly after SIGKILL?")
	}
	time.Sleep(2 * time.Second)
	select {
	case <-c.exited:
		t.Fatalf("consume -g ended while the broker was down: %v\nstderr: %s", c.err, c.stderr)
	default:
	}
	startServe(t, nil, args...)
	mustCLI(t, "b0\nb1\nb2\n", "produce", b, "r", "-q")
	c.waitOutput(t, 120*time.Second, "b0", "b1", "b2")
	c.interrupt(t)
}
