package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports (the kernel ABI fixes it,
// independent of CONFIG_HZ).
const clockTicks = 100

// child is a broker running as a child process of the harness.
//
// The harness controls it over its stdin/stdout (control.go). It is killed
// if the harness dies (Pdeathsig).
type child struct {
	target string
	dir    string // data directory
	addr   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	done   chan struct{} // closed when the process has exited
	werr   error         // cmd.Wait's result, valid after done

	reqMu   sync.Mutex  // one control request at a time
	replies chan string // reply lines of the control protocol
}

const startTimeout = 60 * time.Second

func startChild(ctx context.Context, cfg Config, target, dir string) (*child, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.Exe, serveCommand, target, "--dir", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ch := &child{target: target, dir: dir, cmd: cmd, stdin: stdin, stderr: &tailBuffer{max: 8 << 10},
		done: make(chan struct{}), replies: make(chan string, 1)}
	if cfg.Verbose && cfg.Log != nil {
		cmd.Stderr = io.MultiWriter(ch.stderr, cfg.Log)
	} else {
		cmd.Stderr = ch.stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", target, err)
	}
	go func() {
		ch.werr = cmd.Wait()
		close(ch.done)
	}()

	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, listenPrefix); ok {
				select {
				case addrc <- strings.TrimSpace(a):
				default:
				}
			} else if isReply(line) {
				ch.replies <- line
			}
		}
		io.Copy(io.Discard, stdout) // keep the pipe drained
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case ch.addr = <-addrc:
		return ch, nil
	case <-ch.done:
		return nil, fmt.Errorf("%s exited before listening (%v): %s", target, ch.werr, ch.stderr.String())
	case <-t.C:
		ch.kill()
		return nil, fmt.Errorf("%s did not report an address within %v: %s", target, startTimeout, ch.stderr.String())
	case <-ctx.Done():
		ch.kill()
		return nil, ctx.Err()
	}
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop closes the child's stdin (clean shutdown) and waits for it to exit,
// killing it after a grace period. A non-zero exit is an error.
func (c *child) stop() error {
	c.stdin.Close()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.kill()
		return fmt.Errorf("%s did not shut down within 30s; killed: %s", c.target, c.stderr.String())
	}
	if c.werr != nil {
		return fmt.Errorf("%s exited with %v: %s", c.target, c.werr, c.stderr.String())
	}
	return nil
}

func (c *child) kill() {
	c.cmd.Process.Kill()
	<-c.done
}

// rss returns the child's current and peak resident set size in bytes.
func (c *child) rss() (cur, peak int64, err error) { return procRSS(c.pid()) }

// procCPU reads utime+stime of pid from /proc/<pid>/stat.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("broker cpu: %w", err)
	}
	return parseStatCPU(b)
}

// parseStatCPU extracts utime (field 14) and stime (field 15) from the
// contents of /proc/<pid>/stat. The command name (field 2) is parenthesised
// and may contain spaces or ')' itself, so fields are counted from the last
// ')'.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return float64(ut+st) / clockTicks, nil
}

// procRSS reads VmRSS and VmHWM of pid from /proc/<pid>/status.
func procRSS(pid int) (cur, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("broker rss: %w", err)
	}
	return parseStatusRSS(b)
}

func parseStatusRSS(b []byte) (cur, peak int64, err error) {
	var haveCur, havePeak bool
	for line := range strings.Lines(string(b)) {
		name, val, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc status: bad %s line %q", name, strings.TrimSpace(line))
		}
		// Sizes are unsigned; anything past 2^40 kB (1 PiB) is garbage and
		// would overflow the conversion to bytes.
		kb, err := strconv.ParseUint(f[0], 10, 40)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc status: %s: %w", name, err)
		}
		if name == "VmRSS" {
			cur, haveCur = int64(kb)<<10, true
		} else {
			peak, havePeak = int64(kb)<<10, true
		}
	}
	if !haveCur || !havePeak {
		return 0, 0, errors.New("/proc status: no VmRSS/VmHWM")
	}
	return cur, peak, nil
}

// rusageCPU returns this process's user and system CPU time (all threads,
// including exited ones).
func rusageCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// selfCPU returns the harness's own CPU seconds.
func selfCPU() float64 {
	u, s := rusageCPU()
	return (u + s).Seconds()
}

// tailBuffer keeps the last max bytes written to it (a child's stderr, for
// error messages). Goroutine-safe.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return "(no stderr)"
	}
	return s
}
