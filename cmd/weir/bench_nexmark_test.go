package main

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/bench/nexmark"
	"github.com/weirhq/weir/weirtest"
)

// runWeirForOutput runs the weir binary (the test binary re-executed, see
// TestMain) as a child process and returns its stdout.
func runWeirForOutput(t *testing.T, args ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), execMainEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("weir %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// readNexmarkTopic reads every record of topic (n expected) and decodes it,
// checking key and timestamp; events come back per partition, partitions
// in order.
func readNexmarkTopic(t *testing.T, b *weirtest.Broker, topic string, n int) map[int32][]nexmark.Event {
	t.Helper()
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int32][]nexmark.Event{}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %d of %d records: %v", topic, got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			e, err := nexmark.Decode(r.Value)
			if err != nil {
				t.Fatalf("record %d/%d: %v", r.Partition, r.Offset, err)
			}
			if len(r.Key) != 0 {
				t.Fatalf("record %d/%d has key %q, want empty", r.Partition, r.Offset, r.Key)
			}
			if r.Timestamp.UnixMilli() != e.DateTime() {
				t.Fatalf("record %d/%d timestamp %d, event dateTime %d", r.Partition, r.Offset, r.Timestamp.UnixMilli(), e.DateTime())
			}
			out[r.Partition] = append(out[r.Partition], e)
		})
	}
	return out
}

func TestBenchNexmarkGenerate(t *testing.T) {
	b := weirtest.Start(t)
	const n = 5000
	args := func(topic string, extra ...string) []string {
		return append([]string{"bench", "nexmark", "generate", "--brokers", b.Addr(), "--topic", topic,
			"--events", strconv.Itoa(n), "--seed", "42", "--base-time", "1700000000000", "--event-rate", "1000"}, extra...)
	}
	out := runWeirForOutput(t, args("nx-a")...)
	if !strings.Contains(out, "wrote 5000 events to nx-a (100 persons, 300 auctions, 4600 bids)") {
		t.Fatalf("unexpected report:\n%s", out)
	}
	a := readNexmarkTopic(t, b, "nx-a", n)
	if len(a) != 1 {
		t.Fatalf("events in %d partitions, want the 1 of a created topic", len(a))
	}
	// The topic holds exactly the generator's events for the seed, in order.
	gen, err := nexmark.NewGenerator(nexmark.GeneratorConfig{Seed: 42, BaseTime: 1_700_000_000_000, EventsPerSecond: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range a[0] {
		if want := gen.Next(); !reflect.DeepEqual(e, want) {
			t.Fatalf("event %d: got %+v, want %+v", i, e, want)
		}
	}
	// Same seed into a second topic: the same events.
	runWeirForOutput(t, args("nx-b")...)
	if bb := readNexmarkTopic(t, b, "nx-b", n); !reflect.DeepEqual(a[0], bb[0]) {
		t.Fatal("same seed, different events")
	}

	// Disorder within a bound, over three partitions, paced.
	out = runWeirForOutput(t, args("nx-d", "--disorder", "300ms", "--partitions", "3", "--rate", "100000")...)
	if !strings.Contains(out, "wrote 5000 events to nx-d") {
		t.Fatalf("unexpected report:\n%s", out)
	}
	d := readNexmarkTopic(t, b, "nx-d", n)
	if len(d) != 3 {
		t.Fatalf("events in %d partitions, want 3", len(d))
	}
	var counts [3]int
	late := 0
	for p, events := range d {
		maxSeen := int64(0)
		for _, e := range events {
			counts[e.Type]++
			if ts := e.DateTime(); ts < maxSeen {
				late++
				if maxSeen-ts > 300 {
					t.Fatalf("partition %d: event at %d is %d ms behind the max before it (bound 300)", p, ts, maxSeen-ts)
				}
			}
			maxSeen = max(maxSeen, e.DateTime())
		}
	}
	// Disorder holds some of the first 5000 generated events back and
	// writes some later ones instead: about 1:3:46 still, and exactly the
	// generator's first 5000 events for that config.
	if counts[0] < 95 || counts[0] > 105 || counts[1] < 290 || counts[1] > 310 || counts[0]+counts[1]+counts[2] != n {
		t.Fatalf("person/auction/bid counts %v, want about 100/300/4600", counts)
	}
	gen, err = nexmark.NewGenerator(nexmark.GeneratorConfig{Seed: 42, BaseTime: 1_700_000_000_000, EventsPerSecond: 1000, Disorder: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for range n {
		enc, _ := nexmark.Encode(nil, gen.Next())
		want[string(enc)]++
	}
	for _, events := range d {
		for _, e := range events {
			enc, _ := nexmark.Encode(nil, e)
			if want[string(enc)] == 0 {
				t.Fatalf("event %s is not one of the generator's", enc)
			}
			want[string(enc)]--
		}
	}
	if late == 0 {
		t.Fatal("--disorder 300ms wrote every partition in order")
	}
}

func TestBenchNexmarkGenerateErrors(t *testing.T) {
	b := weirtest.Start(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--events", "10"}, `"topic" not set`},
		{[]string{"--topic", "x"}, `"events" not set`},
		{[]string{"--topic", "x", "--events", "-1"}, "--events -1 is negative"},
		{[]string{"--topic", "x", "--events", "1", "--rate", "-5"}, "--rate -5 is negative"},
		{[]string{"--topic", "x", "--events", "1", "--partitions", "0"}, "--partitions 0"},
		{[]string{"--topic", "x", "--events", "1", "--event-rate", "-1"}, "events per second -1 out of range"},
		{[]string{"--topic", "x", "--events", "1", "--disorder", "-1s"}, "negative disorder"},
	} {
		args := append([]string{"bench", "nexmark", "generate", "--brokers", b.Addr()}, tc.args...)
		_, stderr, code := runCLI(t, "", args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("weir %s: exit %d, stderr %q; want an error mentioning %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	// Nothing was created by the rejected command lines.
	topics, err := b.Admin().ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("x") {
		t.Error("a rejected command line created its topic")
	}
}
