package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// The harness talks to a child broker over the child's stdin and stdout, one
// line per message. The child announces itself once, then answers every
// request line with exactly one reply line, in order:
//
//	child   → harness   LISTEN <addr>            the broker accepts connections
//	harness → child     cpu                      → CPU <user ns> <system ns>
//	harness → child     profile <file>           start a CPU profile → OK | ERR <why>
//	harness → child     profile-stop             stop it, write the file and an allocation
//	                                             profile beside it (<name>.allocs.pprof) → OK | ERR <why>
//	anything else                                → ERR <why>
//	EOF on the child's stdin                     stop any profile, shut the broker down cleanly
//
// CPU is the child's own user+system time from getrusage: microsecond
// resolution, all threads including exited ones (/proc/<pid>/stat has the
// same figure in 10 ms ticks). Lines on the child's stdout that are not
// protocol messages are ignored by the harness.
const (
	listenPrefix = "LISTEN "
	cpuQuery     = "cpu"
	cpuPrefix    = "CPU "
	profileStart = "profile "
	profileStop  = "profile-stop"
	replyOK      = "OK"
	replyErr     = "ERR "
)

// isReply reports whether line is a reply of the control protocol.
func isReply(line string) bool {
	return strings.HasPrefix(line, cpuPrefix) || line == replyOK || strings.HasPrefix(line, replyErr)
}

// serveControl runs the child's side of the protocol until in reaches EOF.
func serveControl(in io.Reader, out io.Writer) {
	var prof *os.File
	stopProfile := func() error {
		if prof == nil {
			return errors.New("no profile running")
		}
		pprof.StopCPUProfile()
		err := prof.Close()
		// The allocations since the start (cumulative: diff two phases'
		// files with pprof -base) next to the CPU profile.
		if f, ferr := os.Create(strings.TrimSuffix(prof.Name(), ".pprof") + ".allocs.pprof"); ferr == nil {
			err = errors.Join(err, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		} else {
			err = errors.Join(err, ferr)
		}
		prof = nil
		return err
	}
	defer func() {
		if prof != nil {
			stopProfile()
		}
	}()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fmt.Fprintln(out, controlReply(sc.Text(), &prof, stopProfile))
	}
}

func controlReply(line string, prof **os.File, stopProfile func() error) string {
	errReply := func(err error) string {
		return replyErr + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	switch {
	case line == cpuQuery:
		u, s := rusageCPU()
		return fmt.Sprintf("%s%d %d", cpuPrefix, u.Nanoseconds(), s.Nanoseconds())
	case strings.HasPrefix(line, profileStart):
		if *prof != nil {
			return errReply(errors.New("a profile is already running"))
		}
		f, err := os.Create(strings.TrimPrefix(line, profileStart))
		if err != nil {
			return errReply(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return errReply(err)
		}
		*prof = f
		return replyOK
	case line == profileStop:
		if err := stopProfile(); err != nil {
			return errReply(err)
		}
		return replyOK
	}
	return errReply(fmt.Errorf("unknown request %q", line))
}

// controlTimeout bounds the wait for one reply.
const controlTimeout = 10 * time.Second

// request sends one request line to the child and returns its reply.
// Goroutine-safe: requests are serialised, so replies match requests.
func (c *child) request(line string) (string, error) {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		return "", fmt.Errorf("%s: request %q: %w", c.target, line, err)
	}
	t := time.NewTimer(controlTimeout)
	defer t.Stop()
	select {
	case r := <-c.replies:
		if msg, ok := strings.CutPrefix(r, replyErr); ok {
			return "", fmt.Errorf("%s: %s: %s", c.target, line, msg)
		}
		return r, nil
	case <-c.done:
		return "", fmt.Errorf("%s exited (%v): %s", c.target, c.werr, c.stderr.String())
	case <-t.C:
		return "", fmt.Errorf("%s: no reply to %q within %v", c.target, line, controlTimeout)
	}
}

// cpuTimes is a process's CPU time so far, in seconds.
type cpuTimes struct{ User, Sys float64 }

func (t cpuTimes) total() float64 { return t.User + t.Sys }

// cpu returns the child's CPU time so far.
func (c *child) cpu() (cpuTimes, error) {
	r, err := c.request(cpuQuery)
	if err != nil {
		return cpuTimes{}, err
	}
	t, err := parseCPUReply(r)
	if err != nil {
		return cpuTimes{}, fmt.Errorf("%s: %w", c.target, err)
	}
	return t, nil
}

// parseCPUReply decodes "CPU <user ns> <system ns>".
func parseCPUReply(r string) (cpuTimes, error) {
	v, ok := strings.CutPrefix(r, cpuPrefix)
	f := strings.Fields(v)
	if !ok || len(f) != 2 {
		return cpuTimes{}, fmt.Errorf("bad cpu reply %q", r)
	}
	u, err1 := strconv.ParseUint(f[0], 10, 63)
	s, err2 := strconv.ParseUint(f[1], 10, 63)
	if err1 != nil || err2 != nil {
		return cpuTimes{}, fmt.Errorf("bad cpu reply %q", r)
	}
	return cpuTimes{User: time.Duration(u).Seconds(), Sys: time.Duration(s).Seconds()}, nil
}

// startProfile makes the child write a CPU profile to file until
// stopProfile.
func (c *child) startProfile(file string) error {
	_, err := c.request(profileStart + file)
	return err
}

func (c *child) stopProfile() error {
	_, err := c.request(profileStop)
	return err
}
