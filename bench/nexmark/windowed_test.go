package nexmark

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

// The windowed queries (q5, q7, q8, q11) run bounded over generated events
// on the embedded broker, several partitions, disorder within the
// out-of-orderness, and their output must equal the batch reference of
// queries.go: the same results, each exactly once.

// windowedCase is one windowed query with its batch reference, as the
// JSON of each result.
type windowedCase struct {
	query string
	want  func([]Event) []string
}

var windowedCases = []windowedCase{
	{"q5", func(es []Event) []string { return jsonLines(Q5(es)) }},
	{"q7", func(es []Event) []string { return jsonLines(Q7(es)) }},
	{"q8", func(es []Event) []string { return jsonLines(Q8(es)) }},
	{"q11", func(es []Event) []string { return jsonLines(Q11(es)) }},
}

// windowedEvents is the test input: 16,000 events at 400 per second of
// event time (40 s: four TUMBLE windows, 20+ HOP windows), shuffled
// within windowedDisorder.
const (
	windowedEventCount = 16_000
	windowedDisorder   = 2 * time.Second
)

func windowedEvents(t testing.TB) []Event {
	t.Helper()
	g, err := NewGenerator(GeneratorConfig{Seed: 7, BaseTime: 1_700_000_000_000, EventsPerSecond: 400, Disorder: windowedDisorder})
	if err != nil {
		t.Fatal(err)
	}
	es := make([]Event, windowedEventCount)
	for i := range es {
		es[i] = g.Next()
	}
	return es
}

// produceEvents writes es to topic as the event format says (empty key,
// timestamp = dateTime), es[i] to partition (first+i) % partitions: each
// partition's records are a subsequence of the generator's order, so no
// record is further behind its partition's latest than the disorder.
func produceEvents(t testing.TB, b *weirtest.Broker, topic string, partitions int32, es []Event, first int) {
	t.Helper()
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	recs := make([]*kgo.Record, len(es))
	for i, e := range es {
		v, err := Encode(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(first+i) % partitions, Value: v, Timestamp: time.UnixMilli(e.DateTime())}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce events: %v", err)
	}
}

// runQueryBounded runs query from in to out as app, bounded, with the
// watermark bounded by the generator's disorder.
func runQueryBounded(t testing.TB, b *weirtest.Broker, query, app, in, out string, g stream.Guarantee) {
	t.Helper()
	o := Options{OutOfOrderness: windowedDisorder}
	bl := stream.NewBuilder()
	if err := Build(bl, query, in, out, o); err != nil {
		t.Fatal(err)
	}
	opts := append(AppOptions(o), stream.Brokers(b.Addr()), stream.StateDir(t.TempDir()), stream.Delivery(g))
	a, err := stream.NewApp(app, bl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := a.RunBounded(ctx); err != nil {
		t.Fatalf("%s: RunBounded: %v", query, err)
	}
}

// readValues returns the values of every committed record of topic up to
// its last stable offsets now (as strings): what a read_committed consumer
// can read of it at this moment.
func readValues(t testing.TB, b *weirtest.Broker, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := b.Admin().ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	var out []string
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: partitions %v not read to their end", topic, left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, string(r.Value))
			}
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

// jsonLines is each result's JSON.
func jsonLines[T any](rs []T) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			panic(err)
		}
		out[i] = string(b)
	}
	return out
}

// sameResults compares got with want as multisets, naming the differences.
func sameResults(got, want []string) error {
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	var missing, extra []string
	for v, n := range count {
		for ; n > 0; n-- {
			missing = append(missing, v)
		}
		for ; n < 0; n++ {
			extra = append(extra, v)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return fmt.Errorf("%d results, want %d: %d missing %s, %d unexpected or repeated %s",
		len(got), len(want), len(missing), firstFew(missing), len(extra), firstFew(extra))
}

func firstFew(vs []string) string {
	if len(vs) > 5 {
		return "[" + strings.Join(vs[:5], " ") + " ...]"
	}
	return "[" + strings.Join(vs, " ") + "]"
}

func TestWindowedQueriesBounded(t *testing.T) {
	es := windowedEvents(t)
	b := weirtest.Start(t, weirtest.Topic("nexmark", 3))
	produceEvents(t, b, "nexmark", 3, es, 0)
	for _, c := range windowedCases {
		t.Run(c.query, func(t *testing.T) {
			out := c.query + "-out"
			b.CreateTopic(out, 3)
			runQueryBounded(t, b, c.query, "nexmark-"+c.query, "nexmark", out, stream.AtLeastOnce)
			want := c.want(es)
			if len(want) < 3 {
				t.Fatalf("reference has %d results: the input does not exercise the query", len(want))
			}
			if err := sameResults(readValues(t, b, out), want); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d results equal the batch reference", c.query, len(want))
		})
	}
}

// TestWindowedQueriesEdges runs the windowed queries over a few events
// placed on the edges of their windows: ties for the top (across
// partitions), events exactly at a window's end, a bid exactly Q11Gap after
// the previous one, a person who opens an auction before joining, and
// events out of order within the bound.
func TestWindowedQueriesEdges(t *testing.T) {
	const T = 1_700_000_000_000 // a multiple of every window size
	es := []Event{
		bid(1, 7, 50, T),
		auction(500, 100, 10, T+400, T+5000, 0), // seller 100 joins after: same window
		person(100, T+500, "early seller", "OR"),
		bid(2, 8, 90, T+200), // out of order
		bid(1, 7, 10, T+2000),
		bid(2, 8, 20, T+2100),
		person(101, T+9999, "at the end", "CA"),
		bid(3, 7, 5, T+9999),                       // Q11: 9999 after the bid at T: same session
		auction(501, 101, 10, T+10000, T+20000, 0), // next window: no q8 result
		bid(3, 9, 90, T+9998),                      // ties the top price of [T, T+10000)
		bid(4, 9, 10, T+10000),                     // first instant of the next windows
		person(102, T+12000, "busy", "WA"),
		auction(502, 102, 10, T+15000, T+20000, 0),
		auction(503, 102, 11, T+16000, T+20000, 0), // one q8 result all the same
		auction(504, 103, 11, T+16500, T+20000, 0), // seller never joins
		bid(4, 9, 10, T+17000),
		bid(3, 7, 10, T+19999), // exactly Q11Gap after T+9999: a new session
		bid(4, 7, 10, T+29998), // 9999 after: the same session
		bid(4, 8, 10, T+29999),
	}
	b := weirtest.Start(t, weirtest.Topic("edges", 3))
	produceEvents(t, b, "edges", 3, es, 0)
	for _, c := range windowedCases {
		t.Run(c.query, func(t *testing.T) {
			out := c.query + "-edges"
			b.CreateTopic(out, 3)
			runQueryBounded(t, b, c.query, "edges-"+c.query, "edges", out, stream.AtLeastOnce)
			want := c.want(es)
			if err := sameResults(readValues(t, b, out), want); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d results equal the batch reference", c.query, len(want))
		})
	}
}
