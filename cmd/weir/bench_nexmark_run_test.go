package main

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/bench/nexmark"
)

// `weir bench nexmark --query` runs the hand loop and the query on its own
// embedded broker and reports, per round and as medians, events/s and
// events per CPU-second of both and their ratios, then checks the output
// against the batch reference. The test asserts on the report's structure
// and consistency, never on speed.
func TestBenchNexmarkQueryReport(t *testing.T) {
	const n = 3000
	out := mustCLI(t, "", "bench", "nexmark", "--query", "q3", "--events", strconv.Itoa(n), "--partitions", "3",
		"--disorder", "500ms", "--event-rate", "1000", "--seed", "5")
	num := `([0-9]+(?:\.[0-9]+)?)`
	lines := map[string]*regexp.Regexp{
		"header":  regexp.MustCompile(`^nexmark q3: 3000 events \(\d+ persons, \d+ auctions, \d+ bids\), 3 partitions, seed 5, event-rate 1000/s, disorder 500ms, out-of-orderness 500ms, at-least-once$`),
		"machine": regexp.MustCompile(`^machine: \w+/\w+, \d+ CPUs, GOMAXPROCS \d+, go`),
		"round": regexp.MustCompile(`^round 1: hand loop .* wall, .* CPU: ` + num + ` events/s, ` + num + ` events/CPU-s \| q3 .* wall, .* CPU: ` +
			num + ` events/s, ` + num + ` events/CPU-s \| ratio ` + num + ` events/s, ` + num + ` events/CPU-s$`),
		"hand":  regexp.MustCompile(`^hand loop: ` + num + ` events/s, ` + num + ` events/CPU-s \(median of 1\)$`),
		"query": regexp.MustCompile(`^q3: ` + num + ` events/s, ` + num + ` events/CPU-s \(median of 1\)$`),
		"ratio": regexp.MustCompile(`^ratio q3/hand loop: ` + num + ` events/s, ` + num + ` events/CPU-s \(median of 1\)$`),
		"check": regexp.MustCompile(`^check: (\d+) output records equal the batch reference$`),
	}
	found := map[string][]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		for name, re := range lines {
			if m := re.FindStringSubmatch(line); m != nil {
				var xs []float64
				for _, s := range m[1:] {
					x, err := strconv.ParseFloat(s, 64)
					if err != nil || x <= 0 || math.IsInf(x, 0) {
						t.Errorf("%s: figure %q is not a positive number", name, s)
					}
					xs = append(xs, x)
				}
				found[name] = xs
			}
		}
	}
	for name := range lines {
		if _, ok := found[name]; !ok {
			t.Fatalf("no %s line in the report:\n%s", name, out)
		}
	}
	// The medians of one round are that round's figures, and the ratio is
	// query over hand loop.
	r, h, q, ratio := found["round"], found["hand"], found["query"], found["ratio"]
	near := func(a, b float64) bool { return math.Abs(a-b) <= 0.011*max(math.Abs(a), math.Abs(b))+0.006 }
	if !near(r[0], h[0]) || !near(r[1], h[1]) || !near(r[2], q[0]) || !near(r[3], q[1]) {
		t.Errorf("medians %v %v differ from the only round's %v", h, q, r)
	}
	if !near(ratio[0], q[0]/h[0]) || !near(ratio[1], q[1]/h[1]) {
		t.Errorf("ratio %v, want %v and %v", ratio, q[0]/h[0], q[1]/h[1])
	}
	// The check counted q3's reference results over the same events.
	g, err := nexmark.NewGenerator(nexmark.GeneratorConfig{Seed: 5, BaseTime: 1_700_000_000_000, EventsPerSecond: 1000,
		Disorder: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	events := make([]nexmark.Event, n)
	for i := range events {
		events[i] = g.Next()
	}
	if want := len(nexmark.Q3(events)); int(found["check"][0]) != want || want == 0 {
		t.Errorf("check counted %v results, the reference has %d", found["check"], want)
	}
}

// Several rounds: one line per round, medians over them.
func TestBenchNexmarkQueryRounds(t *testing.T) {
	out := mustCLI(t, "", "bench", "nexmark", "--query", "q0", "--events", "2000", "--rounds", "2", "--check=false")
	for _, want := range []string{"round 1: hand loop", "round 2: hand loop", "(median of 2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "check:") {
		t.Errorf("--check=false still checked:\n%s", out)
	}
}

func TestBenchNexmarkQueryErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--query", "q99"}, `--query "q99": want one of q0, q1`},
		{[]string{"--query", "q0", "--events", "0"}, "--events 0"},
		{[]string{"--query", "q0", "--guarantee", "twice"}, `--guarantee "twice"`},
		{[]string{"--query", "q0", "--rounds", "0"}, "--rounds 0"},
		{[]string{"--query", "q0", "--partitions", "0"}, "--partitions 0"},
		{[]string{"--query", "q0", "--out-of-orderness", "-1s"}, "--out-of-orderness -1s"},
	} {
		_, stderr, code := runCLI(t, "", append([]string{"bench", "nexmark"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("weir bench nexmark %s: exit %d, stderr %q; want an error mentioning %q",
				strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}
