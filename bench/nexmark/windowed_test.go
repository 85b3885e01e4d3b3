package nexmark

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

// The windowed queries (q5, q7, q8, q11) run bounded over events on the
// embedded broker, over several partitions with disorder within the
// out-of-orderness, and their output must equal the batch reference of
// queries.go (Check): the same results, each exactly once.

var windowedQueries = []string{"q5", "q7", "q8", "q11"}

const windowedDisorder = 2 * time.Second

// windowedEvents is the generated input of the windowed tests: 16,000
// events at 400 per second of event time (40 s: four TUMBLE windows, 20+
// HOP windows, sessions that close before the end and some that do not),
// shuffled within windowedDisorder.
func windowedEvents(t testing.TB) []Event {
	t.Helper()
	g, err := NewGenerator(GeneratorConfig{Seed: 7, BaseTime: 1_700_000_000_000, EventsPerSecond: 400, Disorder: windowedDisorder})
	if err != nil {
		t.Fatal(err)
	}
	es := make([]Event, 16_000)
	for i := range es {
		es[i] = g.Next()
	}
	return es
}

// newWindowedCase writes events over the 3 partitions of the topic
// "events" of a new broker; the queries run with windowedDisorder as their
// out-of-orderness.
func newWindowedCase(t *testing.T, events []Event) *streamCase {
	t.Helper()
	const parts = 3
	b := weirtest.Start(t, weirtest.Topic("events", parts))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := WriteEvents(ctx, b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "events", events, parts); err != nil {
		t.Fatal(err)
	}
	return &streamCase{b: b, events: events, input: "events", partitions: parts, opts: Options{OutOfOrderness: windowedDisorder}}
}

func TestWindowedQueriesBounded(t *testing.T) {
	c := newWindowedCase(t, windowedEvents(t))
	for _, q := range windowedQueries {
		t.Run(q, func(t *testing.T) {
			n := checkedLen(t, q, c.events)
			if n < 3 {
				t.Fatalf("reference has %d results: the input does not exercise %s", n, q)
			}
			if err := Check(q, c.events, c.run(t, q, q+"-out", stream.AtLeastOnce)); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d results equal the batch reference", q, n)
		})
	}
}

// checkedLen is the number of results of q's batch reference over events.
func checkedLen(t testing.TB, q string, events []Event) int {
	switch q {
	case "q5":
		return len(Q5(events))
	case "q7":
		return len(Q7(events))
	case "q8":
		return len(Q8(events))
	case "q11":
		return len(Q11(events))
	}
	t.Fatalf("no reference for %s", q)
	return 0
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
	c := newWindowedCase(t, es)
	for _, q := range windowedQueries {
		t.Run(q, func(t *testing.T) {
			if err := Check(q, c.events, c.run(t, q, q+"-edges", stream.AtLeastOnce)); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d results equal the batch reference", q, checkedLen(t, q, es))
		})
	}
}

// committedCount is the number of records of topic a read_committed
// consumer can read now (up to its last stable offsets): unlike ReadTopic
// it does not wait for a transaction left open by a killed writer.
func committedCount(t testing.TB, b *weirtest.Broker, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := b.Admin().ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("last stable offsets of %s: %v", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	if len(left) == 0 {
		return 0
	}
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	defer cl.Close()
	n := 0
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: partitions %v not read to their last stable offset", topic, left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				n++
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return n
}
