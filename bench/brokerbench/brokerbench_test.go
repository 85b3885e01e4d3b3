package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain lets the test binary serve as the harness's child process:
// Run re-executes Config.Exe (here the test binary) as "serve <target>".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		os.Exit(serveMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func tinyConfig(t *testing.T) Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Records = 2000
	cfg.Rate = 2000
	cfg.RateDuration = 300 * time.Millisecond
	cfg.WidePartitions = 20
	cfg.Settle = 100 * time.Millisecond
	cfg.PhaseTimeout = 20 * time.Second
	cfg.Dir = t.TempDir()
	cfg.Exe = exe
	return cfg
}

// TestEndToEnd runs the whole harness with a tiny workload against every
// target and checks that every record was read back and the report
// is complete. It does not look at any speed.
func TestEndToEnd(t *testing.T) {
	cfg := tinyConfig(t)
	var log bytes.Buffer
	cfg.Log = &log
	cfg.ProfileDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Results) != len(cfg.Targets) {
		t.Fatalf("%d results for %d targets", len(rep.Results), len(cfg.Targets))
	}
	for _, r := range rep.Results {
		if r.Err != "" {
			t.Errorf("%s failed: %s", r.Target, r.Err)
			continue
		}
		if r.Read.Distinct != cfg.Records || r.Read.Foreign != 0 {
			t.Errorf("%s: read %+v, want %d distinct records", r.Target, r.Read, cfg.Records)
		}
		if r.Latency.Count != cfg.rateRecords() {
			t.Errorf("%s: %d latencies, want %d", r.Target, r.Latency.Count, cfg.rateRecords())
		}
		if r.Latency.P50 <= 0 || r.Latency.P99 < r.Latency.P50 || r.Latency.Max < r.Latency.P999 {
			t.Errorf("%s: implausible latency summary %+v", r.Target, r.Latency)
		}
		if r.Produce.Wall <= 0 || r.Consume.Wall <= 0 || r.Produce.BrokerCPU < 0 || r.Consume.BrokerCPU < 0 {
			t.Errorf("%s: bad phase figures produce %+v consume %+v", r.Target, r.Produce, r.Consume)
		}
		if r.IdleRSS <= 0 || r.PeakRSS < r.IdleRSS {
			t.Errorf("%s: idle RSS %d, peak %d", r.Target, r.IdleRSS, r.PeakRSS)
		}
		if isKafka(r.Target) && (r.WideRSS <= 0 || r.WideCreatedRSS <= 0) {
			t.Errorf("%s: no RSS with the wide topic", r.Target)
		}
		for _, ph := range []string{"produce", "consume", "fixed-rate"} {
			name := filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-r1-%s.pprof", r.Target, ph))
			if fi, err := os.Stat(name); err != nil || fi.Size() == 0 {
				t.Errorf("%s: no CPU profile %s: %v", r.Target, name, err)
			}
		}
	}

	md := rep.Markdown()
	for _, m := range metrics {
		if !strings.Contains(md, "| "+m.name+" | "+m.unit+" |") {
			t.Errorf("report lacks row %q (%s)", m.name, m.unit)
		}
	}
	header := "| metric | unit | " + strings.Join(cfg.Targets, " | ") + " | weir/kfake | target | verdict | weir/nats |"
	if !strings.Contains(md, header) {
		t.Errorf("report lacks header %q:\n%s", header, md)
	}
	if strings.Contains(md, "| failed |") || strings.Contains(md, "n/a (not measured)") {
		t.Errorf("complete run but the report shows a missing figure")
	}
	if n := strings.Count(md, "PASS") + strings.Count(md, "MISS"); n != 6 {
		t.Errorf("%d verdicts, want 6 (one per target of the issue)", n)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("report:\n%s\nlog:\n%s", md, log.String())
	}
}

// TestChildFailsClearly checks that a broker that cannot start is reported
// with its stderr, not as a hang.
func TestChildFailsClearly(t *testing.T) {
	cfg := tinyConfig(t)
	_, err := startChild(context.Background(), cfg, "no-such-target", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `unknown target "no-such-target"`) {
		t.Fatalf("err = %v, want the child's unknown-target message", err)
	}
}

func TestParseStatCPU(t *testing.T) {
	// The command name may contain spaces and parentheses.
	stat := "1234 (weird ) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 12345 1000 200 18446744073709551615\n"
	got, err := parseStatCPU([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if want := 3.25; got != want {
		t.Fatalf("cpu = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "1 (x S 1 2", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 zz 1 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
	// Our own process parses.
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestParseStatusRSS(t *testing.T) {
	status := "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\n"
	cur, peak, err := parseStatusRSS([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if cur != 1024<<10 || peak != 2048<<10 {
		t.Fatalf("cur %d peak %d", cur, peak)
	}
	for _, bad := range []string{"", "VmRSS:\t1 kB\n", "VmRSS:\tx kB\nVmHWM:\t1 kB\n", "VmRSS:\t1 MB\nVmHWM:\t1 kB\n"} {
		if _, _, err := parseStatusRSS([]byte(bad)); err == nil {
			t.Errorf("parseStatusRSS(%q): no error", bad)
		}
	}
}

func TestSummarize(t *testing.T) {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[len(lat)-1-i] = time.Duration(i+1) * time.Millisecond // descending: summarize sorts
	}
	got := summarize(lat)
	want := Latency{Count: 1000, P50: 500 * time.Millisecond, P99: 990 * time.Millisecond, P999: 999 * time.Millisecond, Max: time.Second}
	if got != want {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
	if lat[0] != time.Second {
		t.Fatal("summarize modified its input")
	}
	if (summarize(nil) != Latency{}) {
		t.Fatal("empty summary not zero")
	}
}

func TestPacer(t *testing.T) {
	start := time.Unix(100, 0)
	p := pacer{start: start, rate: 1000}
	if got := p.due(1500); !got.Equal(start.Add(1500 * time.Millisecond)) {
		t.Fatalf("due(1500) = %v", got.Sub(start))
	}
	cases := []struct {
		at   time.Duration
		want int
	}{{-time.Second, 0}, {0, 1}, {999 * time.Microsecond, 1}, {time.Millisecond, 2}, {time.Hour, 50}}
	for _, c := range cases {
		if got := p.dueBy(start.Add(c.at), 50); got != c.want {
			t.Errorf("dueBy(%v) = %d, want %d", c.at, got, c.want)
		}
	}
}

func TestReadTracker(t *testing.T) {
	pl := newPayloads(16, 4)
	tr := newReadTracker(3)
	for _, i := range []int{2, 0, 0, 7} {
		tr.add(pl.get(i))
	}
	tr.add([]byte{1, 2})
	if tr.complete() {
		t.Fatal("complete without index 1")
	}
	tr.add(pl.get(1))
	want := readStats{Records: 6, Distinct: 3, Duplicates: 1, Foreign: 2}
	if !tr.complete() || tr.st != want {
		t.Fatalf("stats %+v complete %v, want %+v", tr.st, tr.complete(), want)
	}
}

func TestRoundOrder(t *testing.T) {
	ts := []string{"a", "b", "c"}
	for round, want := range []string{"a,b,c", "b,c,a", "c,a,b", "a,b,c"} {
		if got := strings.Join(roundOrder(ts, "alternate", round, nil), ","); got != want {
			t.Errorf("alternate round %d = %s, want %s", round, got, want)
		}
	}
	if got := strings.Join(roundOrder(ts, "fixed", 1, nil), ","); got != "a,b,c" {
		t.Errorf("fixed = %s", got)
	}
	if strings.Join(ts, ",") != "a,b,c" {
		t.Error("roundOrder modified its input")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := map[string]func(*Config){
		"no targets":      func(c *Config) { c.Targets = nil },
		"unknown target":  func(c *Config) { c.Targets = []string{"kafka"} },
		"duplicate":       func(c *Config) { c.Targets = []string{"nats", "nats"} },
		"records":         func(c *Config) { c.Records = 0 },
		"record size":     func(c *Config) { c.RecordSize = 7 },
		"rate":            func(c *Config) { c.Rate = 0 },
		"rate duration":   func(c *Config) { c.RateDuration = 0 },
		"repeat":          func(c *Config) { c.Repeat = 0 },
		"order":           func(c *Config) { c.Order = "sideways" },
		"wide partitions": func(c *Config) { c.WidePartitions = -1 },
		"no codec":        func(c *Config) { c.Compression = nil },
		"unknown codec":   func(c *Config) { c.Compression = []string{"none", "brotli"} },
		"codec twice":     func(c *Config) { c.Compression = []string{"lz4", "lz4"} },
	}
	for name, mut := range bad {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if _, err := parseFlags([]string{"--records", "10", "--targets", "nats, kfake"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if c, err := parseFlags([]string{"--compression", "none, snappy,zstd"}, &bytes.Buffer{}); err != nil || !slices.Equal(c.Compression, []string{"none", "snappy", "zstd"}) {
		t.Fatalf("--compression: %v %v", c.Compression, err)
	}
	if _, err := parseFlags([]string{"extra"}, &bytes.Buffer{}); err == nil {
		t.Fatal("stray argument accepted")
	}
}

// TestChildCPU checks the CPU figure the child reports (getrusage) against
// /proc/<pid>/stat, which has the same quantity in 10 ms ticks, after the
// broker has done some work.
func TestChildCPU(t *testing.T) {
	cfg := tinyConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := startChild(ctx, cfg, targetKfake, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ch.stop(); err != nil {
			t.Error(err)
		}
	}()
	d, err := newKafkaDriver(ch.addr, codecNone, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	before, err := ch.cpu()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.produce(ctx, 3000); err != nil {
		t.Fatal(err)
	}
	after, err := ch.cpu()
	if err != nil {
		t.Fatal(err)
	}
	ticks, err := procCPU(ch.pid())
	if err != nil {
		t.Fatal(err)
	}
	if after.total() <= before.total() || after.User < before.User || after.Sys < before.Sys {
		t.Fatalf("broker CPU did not advance: %+v -> %+v", before, after)
	}
	// The broker is idle between the two reads; the tick figure is
	// truncated to 10 ms.
	if diff := after.total() - ticks; diff < -0.05 || diff > 0.05 {
		t.Fatalf("getrusage %.3fs vs /proc stat %.3fs", after.total(), ticks)
	}
}

func TestFmtRatio(t *testing.T) {
	cases := []struct {
		q    float64
		ok   bool
		want string
	}{{0, false, "—"}, {1.234, true, "1.23x"}, {0, true, "0.00x"}, {0.0009, true, "9.0e-04x"}, {72.26, true, "72.26x"}}
	for _, c := range cases {
		if got := fmtRatio(c.q, c.ok); got != c.want {
			t.Errorf("fmtRatio(%v, %v) = %q, want %q", c.q, c.ok, got, c.want)
		}
	}
}

// TestControlProtocol drives the child's side of the control protocol.
func TestControlProtocol(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "x.pprof")
	in := strings.Join([]string{
		"cpu",
		"profile " + prof,
		"profile " + prof,
		"profile-stop",
		"profile-stop",
		"profile " + filepath.Join(t.TempDir(), "no", "such", "dir.pprof"),
		"bogus",
		"profile " + prof, // left running: EOF must stop it
	}, "\n") + "\n"
	var out bytes.Buffer
	serveControl(strings.NewReader(in), &out)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{cpuPrefix, replyOK, replyErr + "a profile is already running", replyOK,
		replyErr + "no profile running", replyErr, replyErr + `unknown request "bogus"`, replyOK}
	if len(got) != len(want) {
		t.Fatalf("replies %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) || !isReply(got[i]) {
			t.Errorf("reply %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
	if c, err := parseCPUReply(got[0]); err != nil || c.total() <= 0 {
		t.Errorf("cpu reply %q: %v", got[0], err)
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Errorf("profile not written at EOF: %v", err)
	}
}

func TestParseCPUReply(t *testing.T) {
	got, err := parseCPUReply("CPU 1500000000 250000000")
	if err != nil || got != (cpuTimes{User: 1.5, Sys: 0.25}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range []string{"", "CPU", "CPU 1", "CPU 1 2 3", "CPU -1 2", "CPU x 2", "cpu 1 2", "OK"} {
		if _, err := parseCPUReply(bad); err == nil {
			t.Errorf("parseCPUReply(%q): no error", bad)
		}
	}
}

// TestRunCancelled checks that a cancelled run stops promptly and returns
// what it has.
func TestRunCancelled(t *testing.T) {
	cfg := tinyConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := Run(ctx, cfg)
	if err != context.Canceled || rep == nil || len(rep.Results) != 0 {
		t.Fatalf("rep %v, err %v; want an empty report and context.Canceled", rep, err)
	}
	if md := rep.Markdown(); !strings.Contains(md, "| produce throughput | records/s | failed | failed | failed |") {
		t.Fatalf("empty report:\n%s", md)
	}
}

// TestRunTargetsFailIndependently checks that a broker that cannot start is
// reported per target, and the run goes on with the next one.
func TestRunTargetsFailIndependently(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Exe = "/bin/false"
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(cfg.Targets) || !rep.Failed() {
		t.Fatalf("%d results, failed %v", len(rep.Results), rep.Failed())
	}
	for _, r := range rep.Results {
		if !strings.Contains(r.Err, "exited before listening") {
			t.Errorf("%s: err %q", r.Target, r.Err)
		}
	}
	md := rep.Markdown()
	if !strings.Contains(md, "| produce throughput | records/s | failed | failed | failed | — | weir/kfake >= 1.0 | n/a (not measured) | — |") {
		t.Errorf("report of failed runs:\n%s", md)
	}
}

// TestCreateTopicTwice: a create answered TOPIC_ALREADY_EXISTS (the
// client's retry of its own timed-out create) counts as created once the
// topic has the wanted partitions; a different partition count still
// fails the wait.
func TestCreateTopicTwice(t *testing.T) {
	cfg := tinyConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := startChild(ctx, cfg, "weir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.stop()
	d, err := newKafkaDriver(ch.addr, codecNone, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	for i := range 2 {
		if err := d.createTopic(ctx, "twice", 3); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := d.createTopic(short, "twice", 4); err == nil {
		t.Fatal("create with another partition count succeeded")
	}
}

// TestCompression runs weir with every producer codec in one invocation:
// each run reads every record back, and the report has the compression table with a ratio and verdict for each codec
// that has a target. It does not look at any speed.
func TestCompression(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Targets = []string{targetWeir}
	cfg.Compression = slices.Clone(allCodecs)
	cfg.WidePartitions = 0
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Results) != len(allCodecs) {
		t.Fatalf("%d results, want one per codec", len(rep.Results))
	}
	for i, r := range rep.Results {
		if r.Err != "" || r.Codec != allCodecs[i] || r.Read.Distinct != cfg.Records {
			t.Errorf("run %d: codec %s err %q read %+v", i, r.Codec, r.Err, r.Read)
		}
	}
	md := rep.Markdown()
	if !strings.Contains(md, "## Compression") {
		t.Fatalf("no compression table:\n%s", md)
	}
	for _, z := range []string{"snappy", "lz4", "zstd"} {
		if !regexp.MustCompile(`(?m)^\| weir \| ` + z + ` \| [0-9.]+ \| [0-9.]+x \| <= [0-9.]+x \| (PASS|MISS) \|`).MatchString(md) {
			t.Errorf("no complete compression row for %s:\n%s", z, md)
		}
	}
}

// weir-tls with --tls-compare reads the records back and produces as many
// again over both of its listeners, in pairs alternating which goes first,
// and reports each pair and the median TLS/PLAINTEXT ratio of produce,
// consume and both; --consume-passes reads them several times in the
// consume phase. Nothing about speed is checked.
func TestTLSCompareAndPasses(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Targets = []string{targetWeirTLS}
	cfg.WidePartitions = 0
	cfg.TLSCompare = 2
	cfg.ConsumePasses = 2
	cfg.ProfileDir = t.TempDir()
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, log.String())
	}
	r := rep.Results[0]
	if r.Err != "" || r.Read.Distinct != cfg.Records {
		t.Fatalf("run: err %q read %+v\nlog:\n%s", r.Err, r.Read, log.String())
	}
	if len(r.TLSCompare) != 2 {
		t.Fatalf("%d compare pairs, want 2", len(r.TLSCompare))
	}
	for i, p := range r.TLSCompare {
		if p.Plain.Wall <= 0 || p.TLS.Wall <= 0 || p.Plain.BrokerCPU < 0 || p.TLS.BrokerCPU < 0 ||
			p.ProducePlain.Wall <= 0 || p.ProduceTLS.Wall <= 0 || p.ProducePlain.BrokerCPU < 0 || p.ProduceTLS.BrokerCPU < 0 {
			t.Errorf("pair %d: %+v", i, p)
		}
	}
	// Each leg is a phase of its own, profiled under its own name.
	for _, leg := range []string{"compare1-plain", "compare1-tls", "compare2-tls", "compare2-plain",
		"compare1-produce-plain", "compare1-produce-tls", "compare2-produce-tls", "compare2-produce-plain"} {
		if _, err := os.Stat(filepath.Join(cfg.ProfileDir, "weir-tls-r1-"+leg+".pprof")); err != nil {
			t.Errorf("no profile of %s: %v", leg, err)
		}
	}
	md := rep.Markdown()
	if !strings.Contains(md, "## TLS vs PLAINTEXT on one weir broker") ||
		!regexp.MustCompile(`(?m)^- Median TLS/PLAINTEXT over 2 pairs, produce: [0-9.]+x .*(PASS|MISS)$`).MatchString(md) ||
		!regexp.MustCompile(`(?m)^- Median TLS/PLAINTEXT over 2 pairs, consume: [0-9.]+x .*(PASS|MISS)$`).MatchString(md) ||
		!regexp.MustCompile(`(?m)^- Median TLS/PLAINTEXT over 2 pairs, whole \(produce \+ consume\): [0-9.]+x .*(PASS|MISS)$`).MatchString(md) ||
		!strings.Contains(md, "read back in full (2 time(s)") {
		t.Fatalf("report lacks the TLS comparison or the passes:\n%s", md)
	}
}
