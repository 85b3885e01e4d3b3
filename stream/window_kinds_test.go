package stream

import (
	"testing"
	"time"
)

func TestWindowSessionsMatchBatch(t *testing.T) {
	for _, agg := range []windowAgg{aggCount, aggSum, aggAggregate} {
		// Sparse records with out-of-order arrivals: sessions form, and
		// late-arriving records bridge two of them.
		recs := genRecords(3, 500, testKeys[:4], 1_000_000, 90, 400)
		r := newWindowRun(t, Session(250*time.Millisecond), finalStore("sess"), 1, 400*time.Millisecond, agg)
		r.pipe(recs...)
		r.flush(10_000_000)
		want := batchSessions(recs, 250, agg == aggCount)
		if d := diffResults(r.finals(), want); d != "[]" {
			t.Fatalf("agg %d: %s", agg, d)
		}
	}
}

// A record between two sessions merges them; the merged session's result is
// the one emitted.
func TestWindowSessionMerge(t *testing.T) {
	r := newWindowRun(t, Session(150*time.Millisecond), finalStore("merge"), 1, time.Second, aggSum)
	r.pipe(wrec{key: "a", ts: 1000, val: 1}, wrec{key: "a", ts: 1050, val: 2}, // session [1000, 1050]
		wrec{key: "a", ts: 1300, val: 4}, // session [1300, 1300]
		wrec{key: "a", ts: 1180, val: 8}) // within 150 of both: one session [1000, 1300]
	r.flush(100_000)
	want := map[string]int64{wkey("a", 1000, 1300): 15}
	if d := diffResults(r.finals(), want); d != "[]" {
		t.Fatal(d)
	}
}

func TestWindowSlidingMatchesBatch(t *testing.T) {
	for _, agg := range []windowAgg{aggCount, aggSum} {
		recs := genRecords(4, 300, testKeys[:3], 1_000_000, 40, 200)
		r := newWindowRun(t, Sliding(150*time.Millisecond), finalStore("slide"), 1, 200*time.Millisecond, agg)
		r.pipe(recs...)
		r.flush(10_000_000)
		want := batchSliding(recs, 150, agg == aggCount)
		if d := diffResults(r.finals(), want); d != "[]" {
			t.Fatalf("agg %d: %s", agg, d)
		}
	}
}

// Kafka Streams' documented example (SlidingWindows javadoc: time
// difference 5 s, records at 8 s, 9.2 s and 12.4 s).
func TestWindowSlidingKafkaExample(t *testing.T) {
	r := newWindowRun(t, Sliding(5*time.Second), finalStore("kafka"), 1, 10*time.Second, aggCount)
	r.pipe(wrec{key: "a", ts: 8000}, wrec{key: "a", ts: 9200}, wrec{key: "a", ts: 12400})
	r.flush(100_000)
	want := map[string]int64{
		wkey("a", 3000, 8000): 1, wkey("a", 4200, 9200): 2, wkey("a", 7400, 12400): 3,
		wkey("a", 8001, 13001): 2, wkey("a", 9201, 14201): 1,
	}
	if d := diffResults(r.finals(), want); d != "[]" {
		t.Fatal(d)
	}
}
