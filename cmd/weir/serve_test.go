package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/broker"
	wlog "github.com/weirhq/weir/broker/log"
)

// serveProc is `weir serve` running as a child process (the test binary
// re-executed, see TestMain), with its JSON log lines collected.
type serveProc struct {
	t         *testing.T
	cmd       *exec.Cmd
	mu        sync.Mutex
	lines     []map[string]any
	raw       strings.Builder
	kafkaAddr string
	httpAddr  string
	exited    chan struct{}
	exitErr   error
}

func startServe(t *testing.T, env []string, args ...string) *serveProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"serve", "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append(os.Environ(), execMainEnv+"=1"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{t: t, cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		var once sync.Once
		for sc.Scan() {
			var m map[string]any
			_ = json.Unmarshal(sc.Bytes(), &m)
			p.mu.Lock()
			p.raw.WriteString(sc.Text() + "\n")
			if m != nil {
				p.lines = append(p.lines, m)
				if m["msg"] == "weir serving" {
					p.kafkaAddr, _ = m["kafka_addr"].(string)
				}
				if m["msg"] == "http listening" {
					p.httpAddr, _ = m["addr"].(string)
				}
			}
			if p.kafkaAddr != "" && p.httpAddr != "" {
				once.Do(func() { close(ready) })
			}
			p.mu.Unlock()
		}
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("weir serve exited before serving: %v\n%s", p.exitErr, p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("weir serve not serving after 30s\n%s", p.log())
	}
	return p
}

func (p *serveProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// stop sends sig and waits for the process to exit, returning its error.
func (p *serveProc) stop(sig os.Signal) error {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(30 * time.Second):
		p.t.Fatalf("weir serve did not exit within 30s of %v\n%s", sig, p.log())
		return nil
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeProcess runs `weir serve` as a process: settings from a config
// file and the environment, /healthz and /metrics, the client commands
// against it, SIGTERM → clean exit 0, and a restart that finds the data.
func TestServeProcess(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgFile := filepath.Join(dir, "weir.yaml")
	if err := os.WriteFile(cfgFile, []byte("# test settings\nauto-create-topics: true\ndefault-partitions: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The environment (3) wins over the file (2).
	env := []string{"WEIR_CONFIG=" + cfgFile, "WEIR_DEFAULT_PARTITIONS=3", "WEIR_DATA_DIR=" + data}
	p := startServe(t, env)

	if code, body := httpGet(t, "http://"+p.httpAddr+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}

	b := "--brokers=" + p.kafkaAddr
	var in strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&in, "k%d:v%d\n", i, i)
	}
	// Auto-created (config file) with 3 partitions (environment).
	mustCLI(t, in.String(), "produce", b, "auto", "-K", ":")
	out := mustCLI(t, "", "topic", "describe", b, "auto")
	if !strings.Contains(out, "Partitions: 3") {
		t.Fatalf("auto-created topic:\n%s", out)
	}
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("WEIR_DATA_DIR not used: %v", err)
	}

	code, metrics := httpGet(t, "http://"+p.httpAddr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total", "weir_broker_requests_total", "weir_build_info{"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %s:\n%.2000s", want, metrics)
		}
	}

	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.log())
	}
	if !strings.Contains(p.log(), `"msg":"stopped cleanly"`) {
		t.Fatalf("no clean stop logged:\n%s", p.log())
	}

	// Restart on the same data dir (flags this time): the records are there.
	p2 := startServe(t, nil, "--data-dir", data)
	out = mustCLI(t, "", "consume", "--brokers="+p2.kafkaAddr, "auto", "-e", "-f", "kv")
	for i := 0; i < 20; i++ {
		if !strings.Contains(out, fmt.Sprintf("k%d:v%d\n", i, i)) {
			t.Fatalf("after restart, record k%d missing:\n%s", i, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 20 {
		t.Fatalf("after restart: %d records, want 20:\n%s", n, out)
	}
	if err := p2.stop(os.Interrupt); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, p2.log())
	}
}

func TestServeBadSettings(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("data-dri: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", bad}, `unknown setting "data-dri"`},
		{[]string{"serve", "--config", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{"serve", "--sync", "sometimes", "--data-dir", dir}, "--sync"},
		{[]string{"serve", "--log-level", "loud", "--data-dir", dir}, "--log-level"},
		{[]string{"serve", "--log-format", "xml", "--data-dir", dir}, "--log-format"},
		{[]string{"serve", "--data-dir", ""}, "--data-dir"},
		{[]string{"serve", "--default-partitions", "0", "--data-dir", dir}, "--default-partitions"},
		{[]string{"serve", "extra-arg"}, "unknown command"},
		{[]string{"serve", "--queued-max-request-bytes", "0", "--data-dir", dir}, "--queued-max-request-bytes"},
		{[]string{"serve", "--queued-max-request-bytes", "lots", "--data-dir", dir}, "--queued-max-request-bytes"},
		{[]string{"serve", "--share-delivery-count-limit", "1", "--data-dir", dir}, "--share-delivery-count-limit"},
		{[]string{"serve", "--share-record-lock-duration", "10ms", "--data-dir", dir}, "--share-record-lock-duration"},
	} {
		_, errOut, code := runCLI(t, "", tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("weir %s: exit %d, stderr %q, want failure mentioning %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

func TestServePortInUse(t *testing.T) {
	dir := t.TempDir()
	p := startServe(t, nil, "--data-dir", filepath.Join(dir, "a"))
	// A second broker on the same Kafka port fails to start, cleanly.
	_, errOut, code := runCLI(t, "", "serve", "--data-dir", filepath.Join(dir, "b"), "--kafka-addr", p.kafkaAddr, "--http-addr", "")
	if code == 0 || !strings.Contains(errOut, "address already in use") {
		t.Fatalf("second serve on %s: exit %d, stderr %q", p.kafkaAddr, code, errOut)
	}
	// Same for the HTTP port: the broker it started is closed again.
	_, errOut, code = runCLI(t, "", "serve", "--data-dir", filepath.Join(dir, "c"), "--kafka-addr", "127.0.0.1:0", "--http-addr", p.httpAddr)
	if code == 0 || !strings.Contains(errOut, "http listen") {
		t.Fatalf("second serve on http %s: exit %d, stderr %q", p.httpAddr, code, errOut)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

func TestHealthzDuringShutdown(t *testing.T) {
	var healthy atomic.Bool
	h := newHTTPHandler(prometheus.NewRegistry(), &healthy)
	for _, tc := range []struct {
		healthy bool
		code    int
	}{{true, 200}, {false, 503}} {
		healthy.Store(tc.healthy)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		if rec.Code != tc.code {
			t.Errorf("healthy=%v: /healthz %d, want %d", tc.healthy, rec.Code, tc.code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/metrics", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d", rec.Code)
	}
}

func TestServeBrokerConfig(t *testing.T) {
	o := &serveOptions{}
	cmd := newServeCmdFor(o)
	if err := cmd.ParseFlags([]string{"--data-dir", "/d", "--sync", "interval", "--group-initial-rebalance-delay", "0", "--auto-create-topics"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.brokerConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/d" || cfg.Sync != wlog.SyncInterval || cfg.GroupInitialRebalanceDelay >= 0 || !cfg.AutoCreateTopics ||
		cfg.DefaultPartitions != 1 || cfg.KafkaAddr != "127.0.0.1:9092" || cfg.MaxRequestBytes != 100<<20 {
		t.Fatalf("broker config %+v", cfg)
	}
	o.groupInitialDelay = 3 * time.Second
	if cfg, _ = o.brokerConfig(nil, nil); cfg.GroupInitialRebalanceDelay != 3*time.Second {
		t.Fatalf("delay %v", cfg.GroupInitialRebalanceDelay)
	}
}

// --queued-max-request-bytes (also WEIR_QUEUED_MAX_REQUEST_BYTES) reaches
// the broker's QueuedMaxRequestBytes; its default is the broker's.
func TestServeQueuedMaxRequestBytes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want int64
	}{
		{nil, nil, broker.DefaultQueuedMaxRequestBytes},
		{[]string{"--queued-max-request-bytes", "4194304"}, nil, 4 << 20},
		{nil, map[string]string{"WEIR_QUEUED_MAX_REQUEST_BYTES": "8388608"}, 8 << 20},
	} {
		o := &serveOptions{}
		cmd := newServeCmdFor(o)
		if err := cmd.ParseFlags(append([]string{"--data-dir", "/d"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if err := o.load(cmd, func(k string) string { return tc.env[k] }); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.brokerConfig(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QueuedMaxRequestBytes != tc.want {
			t.Errorf("%v %v: QueuedMaxRequestBytes %d, want %d", tc.args, tc.env, cfg.QueuedMaxRequestBytes, tc.want)
		}
		if cfg.ShareDeliveryCountLimit != 5 || cfg.ShareRecordLockDuration != 30*time.Second {
			t.Errorf("share defaults %d %s", cfg.ShareDeliveryCountLimit, cfg.ShareRecordLockDuration)
		}
	}
}

// weir consume follows until interrupted; SIGINT ends it with exit 0 after
// printing what it read.
func TestConsumeFollowInterrupted(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "f", "-p", "2")
	mustCLI(t, "a\nb\n", "produce", b, "f", "-q")

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "consume", b, "f")
	cmd.Env = append(os.Environ(), execMainEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	got := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(got) < 3 {
		if len(got) == 2 {
			// Follow mode: a record produced now shows up too.
			mustCLI(t, "c\n", "produce", b, "f", "-q")
			got["produced c"] = true
		}
		select {
		case l := <-lines:
			got[l] = true
		case <-deadline:
			t.Fatalf("consume printed only %v", got)
		}
	}
	for len(got) < 4 {
		select {
		case l := <-lines:
			got[l] = true
		case <-deadline:
			t.Fatalf("consume did not print the record produced while following: %v", got)
		}
	}
	for _, want := range []string{"a", "b", "c"} {
		if !got[want] {
			t.Fatalf("consume output %v lacks %q", got, want)
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("consume after SIGINT: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("consume did not exit within 30s of SIGINT")
	}
}

func TestProduceFromFile(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "file", "-p", "1")
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte("k1=v1\r\nk2=v=2\n\nlast-no-newline"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "", "produce", b, "file", "-f", path, "-K", "=", "-q")
	out := mustCLI(t, "", "consume", b, "file", "-e", "-f", "kv", "-K", "|")
	// CRLF is stripped, the separator splits at its first occurrence, an
	// empty line is an empty record, a line without separator has no key.
	if want := "k1|v1\nk2|v=2\n|\n|last-no-newline\n"; out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
	if _, errOut, code := runCLI(t, "", "produce", b, "file", "-f", filepath.Join(t.TempDir(), "missing")); code == 0 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing file: exit %d, %q", code, errOut)
	}
	long := strings.Repeat("x", 100) + "\n"
	if _, errOut, code := runCLI(t, long, "produce", b, "file", "--max-line-bytes", "50"); code == 0 || !strings.Contains(errOut, "longer than --max-line-bytes") {
		t.Fatalf("long line: exit %d, %q", code, errOut)
	}
}
