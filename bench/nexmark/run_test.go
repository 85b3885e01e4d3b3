package nexmark

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

// streamCase is the input every stream test of the queries runs over:
// generated events written over several partitions with disorder, and the
// out-of-orderness the queries run with.
type streamCase struct {
	b          *weirtest.Broker
	events     []Event
	input      string
	partitions int32
	opts       Options
}

func newStreamCase(t *testing.T, n int, disorder time.Duration) *streamCase {
	t.Helper()
	const parts = 3
	b := weirtest.Start(t, weirtest.Topic("events", parts))
	g, err := NewGenerator(GeneratorConfig{Seed: 7, BaseTime: 1_700_000_000_000, EventsPerSecond: 1000, Disorder: disorder})
	if err != nil {
		t.Fatal(err)
	}
	events := make([]Event, n)
	for i := range events {
		events[i] = g.Next()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := WriteEvents(ctx, b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "events", events, parts); err != nil {
		t.Fatal(err)
	}
	return &streamCase{b: b, events: events, input: "events", partitions: parts, opts: Options{OutOfOrderness: disorder}}
}

// run runs query bounded into the topic out and returns what it wrote.
func (c *streamCase) run(t *testing.T, query, out string, g stream.Guarantee) []Output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := EnsureOutput(ctx, c.b.Admin(), c.input, out); err != nil {
		t.Fatal(err)
	}
	bl := stream.NewBuilder()
	if err := Build(bl, query, c.input, out, c.opts); err != nil {
		t.Fatal(err)
	}
	appID := "nexmark-" + out
	app, err := stream.NewApp(appID, bl, append(AppOptions(c.opts), stream.Brokers(c.b.Addr()),
		stream.StateDir(t.TempDir()), stream.Delivery(g))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.RunBounded(ctx); err != nil {
		t.Fatalf("%s: RunBounded: %v", query, err)
	}
	// Nothing went to the dead-letter topic: every record decoded and no
	// operator or timer failed.
	if dl, err := ReadTopic(ctx, appID+".dlq", kgo.SeedBrokers(c.b.Addr())); err == nil && len(dl) > 0 {
		t.Errorf("%s: %d records in the dead-letter topic, first %q", query, len(dl), dl[0].Value)
	}
	got, err := ReadTopic(ctx, out, kgo.SeedBrokers(c.b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Every query of this branch, run bounded over disordered events on a
// broker, writes what its batch reference computes over the same events.
func TestQueriesMatchBatchReference(t *testing.T) {
	c := newStreamCase(t, 6000, 2*time.Second)
	// The reference results are not trivial: each query has something to
	// get right.
	for q, n := range map[string]int{"q1": len(Q1(c.events)), "q2": len(Q2(c.events)), "q3": len(Q3(c.events)),
		"q4": len(Q4(c.events)), "q6": len(Q6(c.events))} {
		if n < 3 {
			t.Fatalf("%s: reference has %d results over %d events; the case tests nothing", q, n, len(c.events))
		}
	}
	for _, q := range []string{"q0", "q1", "q2", "q3", "q4", "q6"} {
		t.Run(q, func(t *testing.T) {
			out := c.run(t, q, q+"-out", stream.AtLeastOnce)
			if err := Check(q, c.events, out); err != nil {
				t.Error(err)
			}
			// The keyed results spread over the output's partitions (q0, q1
			// and q2 keep the input's empty key: where they go is the
			// producer's choice).
			if q >= "q3" && len(partitionsOf(out)) < 2 {
				t.Errorf("%s: %d results all in one partition", q, len(out))
			}
		})
	}
}

// The stateful queries under ExactlyOnce: the same results (timers and
// stores inside transactions).
func TestStatefulQueriesExactlyOnce(t *testing.T) {
	c := newStreamCase(t, 4000, time.Second)
	for _, q := range []string{"q3", "q6"} {
		t.Run(q, func(t *testing.T) {
			if err := Check(q, c.events, c.run(t, q, q+"-eos", stream.ExactlyOnce)); err != nil {
				t.Error(err)
			}
		})
	}
}

func partitionsOf(out []Output) map[int32]bool {
	ps := map[int32]bool{}
	for _, o := range out {
		ps[o.Partition] = true
	}
	return ps
}

// Check fails on output that differs from the reference: a result missing,
// one too many, a changed value, a table row whose key is not its own.
func TestCheckCatchesWrongOutput(t *testing.T) {
	g, _ := NewGenerator(GeneratorConfig{Seed: 3, BaseTime: 1_700_000_000_000, EventsPerSecond: 1000})
	events := make([]Event, 3000)
	for i := range events {
		events[i] = g.Next()
	}
	enc := func(v any) []byte {
		b, err := stream.JSON[any]().Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := func(k int64) []byte { b, _ := stream.Int64().Encode(k); return b }
	var q2 []Output
	for _, r := range Q2(events) {
		q2 = append(q2, Output{Value: enc(r)})
	}
	var q4 []Output
	for _, r := range Q4(events) {
		q4 = append(q4, Output{Key: key(r.Category), Value: enc(Q4Result{Category: r.Category, Avg: -1})}, // superseded
			Output{Key: key(r.Category), Value: enc(r)})
	}
	if err := Check("q2", events, q2); err != nil {
		t.Fatalf("correct q2 output: %v", err)
	}
	if err := Check("q4", events, q4); err != nil {
		t.Fatalf("correct q4 output (latest per key): %v", err)
	}
	changed := append([]Output(nil), q2...)
	changed[0] = Output{Value: []byte(`{"auction":1,"price":2}`)}
	wrongKey := append([]Output(nil), q4...)
	wrongKey[len(wrongKey)-1].Key = key(99)
	for name, tc := range map[string]struct {
		query string
		out   []Output
	}{
		"missing":       {"q2", q2[1:]},
		"extra":         {"q2", append(q2[:len(q2):len(q2)], q2[0])},
		"changed":       {"q2", changed},
		"unknown field": {"q2", append(q2[1:len(q2):len(q2)], Output{Value: []byte(`{"auction":1,"price":2,"x":1}`)})},
		"stale row":     {"q4", q4[:len(q4)-1]},
		"deleted row":   {"q4", append(q4[:len(q4):len(q4)], Output{Key: q4[0].Key})},
		"wrong key":     {"q4", wrongKey},
	} {
		err := Check(tc.query, events, tc.out)
		if err == nil {
			t.Errorf("%s: Check passed", name)
			continue
		}
		var ce *CheckError
		if name != "unknown field" && name != "wrong key" && !errors.As(err, &ce) {
			t.Errorf("%s: %v is not a CheckError", name, err)
		}
	}
}

// Build refuses an unknown query and bad topics with clear errors.
func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		query, in, out string
		o              Options
	}{
		{"q99", "in", "out", Options{}},
		{"q0", "", "out", Options{}},
		{"q0", "in", "in", Options{}},
		{"q0", "in", "out", Options{OutOfOrderness: -time.Second}},
	} {
		if err := Build(stream.NewBuilder(), tc.query, tc.in, tc.out, tc.o); err == nil {
			t.Errorf("Build(%q, %q, %q, %v) passed", tc.query, tc.in, tc.out, tc.o)
		}
	}
	err := Build(stream.NewBuilder(), "q99", "in", "out", Options{})
	if !errors.Is(err, ErrUnknownQuery) {
		t.Errorf("unknown query: %v, want ErrUnknownQuery", err)
	}
	for _, q := range Queries() {
		if err := Build(stream.NewBuilder(), q, "in", "out", Options{}); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	if fmt.Sprint(Queries()[:3]) != "[q0 q1 q2]" {
		t.Errorf("Queries() = %v, want q0, q1, q2 first", Queries())
	}
}

// EnsureOutput creates the output with the input's partition count, leaves
// an existing one alone, and fails for a missing input.
func TestEnsureOutput(t *testing.T) {
	b := weirtest.Start(t, weirtest.Topic("in", 5), weirtest.Topic("existing", 2))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := b.Admin()
	for _, out := range []string{"created", "existing"} {
		if err := EnsureOutput(ctx, adm, "in", out); err != nil {
			t.Fatal(err)
		}
	}
	details, err := adm.ListTopics(ctx, "created", "existing")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{"created": 5, "existing": 2} {
		if got := len(details[topic].Partitions); got != want {
			t.Errorf("%s: %d partitions, want %d", topic, got, want)
		}
	}
	if err := EnsureOutput(ctx, adm, "missing", "out2"); err == nil {
		t.Error("missing input: no error")
	}
}
