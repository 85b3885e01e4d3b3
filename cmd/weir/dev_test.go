package main

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/demo/surge"
)

// finalTable returns the zone rows of the last table weir dev printed and
// the number of requests its status line says were produced.
func finalTable(t *testing.T, out string) (rows map[string][]string, produced int64) {
	t.Helper()
	i := strings.LastIndex(out, "· final\n")
	if i < 0 {
		t.Fatalf("no final table in the output:\n%s", out)
	}
	start := strings.LastIndex(out[:i], "\n") + 1
	lines := strings.Split(strings.TrimSpace(out[start:]), "\n")
	f := strings.Fields(lines[0])
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || f[2] != "requests," {
		t.Fatalf("final status line %q", lines[0])
	}
	rows = map[string][]string{}
	for _, l := range lines[2:] {
		if l == "" || strings.HasPrefix(l, "weir dev:") {
			break
		}
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	return rows, n
}

// TestDev runs `weir dev --duration 3s` in-process: it must print the
// broker address, the app's guarantee statement, tables as results change,
// and a final table in which every request produced is counted (the demo
// waits for the app to catch up), then exit 0; a second run on the same
// data dir continues the counts from the first one (durable broker data,
// committed offsets, changelog-backed state).
func TestDev(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	args := []string{"dev", "--duration", "3s", "--kafka-addr", "127.0.0.1:0", "--http-addr", "off", "--data-dir", dir,
		"--rate", "100", "--seed", "7", "--refresh", "500ms"}
	out := mustCLI(t, "", args...)
	for _, want := range []string{"weir dev: broker on 127.0.0.1:", "app surge (at-least-once)",
		"output      zone-surge: at-least-once", "store zone-stats: TTL"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rows, produced := finalTable(t, out)
	var counted int64
	for _, zone := range surge.Zones() {
		r, ok := rows[zone]
		if !ok {
			t.Fatalf("final table lacks zone %s:\n%s", zone, out)
		}
		n, err := strconv.ParseInt(r[1], 10, 64)
		if err != nil {
			t.Fatalf("row %q: %v", r, err)
		}
		counted += n
	}
	if produced < 50 || counted != produced {
		t.Fatalf("final table counts %d requests, %d were produced:\n%s", counted, produced, out)
	}
	if strings.Count(out, "zone  requests") < 2 {
		t.Errorf("expected the table to be printed as it changed, then once more at the end:\n%s", out)
	}

	// Again on the same data: the counts continue from the first run.
	out2 := mustCLI(t, "", "dev", "--duration", "2s", "--kafka-addr", "127.0.0.1:0", "--http-addr", "off", "--data-dir", dir,
		"--rate", "50", "--seed", "8")
	rows2, produced2 := finalTable(t, out2)
	var counted2 int64
	for _, zone := range surge.Zones() {
		n, _ := strconv.ParseInt(rows2[zone][1], 10, 64)
		counted2 += n
	}
	if produced2 == 0 || counted2 != counted+produced2 {
		t.Fatalf("second run: table counts %d requests, want %d from the first run + %d produced:\n%s",
			counted2, counted, produced2, out2)
	}
}

func TestDevBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"dev", "--rate", "-1"},
		{"dev", "--partitions", "0"},
		{"dev", "--log-level", "loud"},
		{"dev", "extra"},
	} {
		if _, errOut, code := runCLI(t, "", args...); code == 0 || errOut == "" {
			t.Errorf("weir %v: exit %d, stderr %q; want an error", args, code, errOut)
		}
	}
}

// TestDevInterrupt runs weir dev as a real process until interrupted: on
// SIGINT it stops the generator, the app and the broker cleanly, prints a
// final table and exits 0.
func TestDevInterrupt(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "dev", "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--data-dir", "", "--rate", "50",
		"--refresh", "200ms")
	cmd.Env = append(os.Environ(), execMainEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var all strings.Builder
	tables := make(chan struct{}, 100)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "zone  requests") {
				tables <- struct{}{}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-tables: // results are showing
	case <-time.After(60 * time.Second):
		t.Fatal("no table within 60s")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-readDone; exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("weir dev after SIGINT: %v\n%s", err, all.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("weir dev did not exit after SIGINT")
	}
	out := all.String()
	if !strings.Contains(out, "· final\n") || !strings.HasSuffix(out, "weir dev: stopped\n") {
		t.Fatalf("no final table and stop message after SIGINT:\n%s", out)
	}
}

// TestDevPortBusy: a taken --kafka-addr is a clear error that says what to do.
func TestDevPortBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, errOut, code := runCLI(t, "", "dev", "--kafka-addr", ln.Addr().String(), "--http-addr", "off", "--data-dir", "", "--duration", "1s")
	if code == 0 || !strings.Contains(errOut, "--kafka-addr 127.0.0.1:0") {
		t.Fatalf("exit %d, stderr %q: want an error suggesting another address", code, errOut)
	}
}

// Issue 18: weir dev creates topics on first use (serve does not by default)
// and serves the broker's and the app's metrics on --http-addr.
func TestDevAutoCreateAndMetrics(t *testing.T) {
	p := startWeir(t, "dev", "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--data-dir", "", "--rate", "0", "--plain")
	deadline := time.Now().Add(60 * time.Second)
	var kafkaAddr, metricsURL string
	for kafkaAddr == "" {
		if time.Now().After(deadline) {
			t.Fatalf("weir dev did not print its addresses:\n%s\n%s", p.stdout, p.stderr)
		}
		select {
		case <-p.exited:
			t.Fatalf("weir dev exited: %v\n%s\n%s", p.err, p.stdout, p.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		for _, l := range strings.Split(p.stdout.String(), "\n") {
			var rest string
			if _, after, ok := strings.Cut(l, "weir dev: broker on "); ok {
				rest = after
			} else {
				continue
			}
			kafkaAddr, rest, _ = strings.Cut(rest, ",")
			if _, after, ok := strings.Cut(rest, "metrics on "); ok {
				metricsURL, _, _ = strings.Cut(after, ",")
			}
		}
	}
	if metricsURL == "" {
		t.Fatalf("no metrics address printed:\n%s", p.stdout)
	}
	b := "--brokers=" + kafkaAddr
	// A topic nobody created: produce creates it.
	mustCLI(t, "hello\n", "produce", b, "fresh-topic", "-q")
	if out := mustCLI(t, "", "consume", b, "fresh-topic", "-e"); out != "hello\n" {
		t.Fatalf("consume of the auto-created topic: %q", out)
	}
	code, body := httpGet(t, metricsURL)
	if code != 200 {
		t.Fatalf("GET %s: %d", metricsURL, code)
	}
	for _, want := range []string{"weir_broker_requests_total", "go_goroutines", "weir_broker_topics_auto_created_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	p.interrupt(t)
}

// TestDevQueryAddrBusy: the default query API address being busy (another
// weir dev) leaves the API unserved with a warning, as the registry's;
// an address given explicitly is left to the App to bind (and fail on).
func TestDevQueryAddrBusy(t *testing.T) {
	if ln, err := net.Listen("tcp", defaultDevQueryAddr); err == nil {
		defer ln.Close()
	} // else something else holds it: busy either way
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if (&devOptions{queryAddr: defaultDevQueryAddr}).queryAddrFree(logger) {
		t.Fatal("the busy default address is taken as free")
	}
	if !strings.Contains(logs.String(), "query API not served") {
		t.Fatalf("no warning: %q", logs.String())
	}
	if !(&devOptions{queryAddr: "127.0.0.1:1"}).queryAddrFree(logger) {
		t.Fatal("an explicit address is checked by dev, not by the App")
	}
}
