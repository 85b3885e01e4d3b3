package stream

import (
	"context"
	"testing"
	"time"
)

// TestQueryWakesIdleLoop: under ExactlyOnce the committed writes of an idle
// task sit in its store cache until the loop flushes them, at the end of a
// round; a query asks for that flush and cuts the loop's poll short, so it
// is answered without waiting out the poll. Here the poll of an idle loop
// waits a commit interval of an hour (every transaction ends with its round,
// so the counts commit at once): a query that waited for the poll would not
// be answered within the test's bound (the read's own wait is bounded at
// twice the commit interval).
func TestQueryWakesIdleLoop(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 2)
	b.createTopic("counts", 2)
	r := b.run("iq-idle", countTopology, testLogger(t), StateDir(t.TempDir()), Delivery(ExactlyOnce),
		CommitInterval(time.Hour), optFunc(func(c *config) { c.txnPerRound = true }))
	truth := map[string]int64{}
	produceEvents(b, 0, 60, 6, truth)
	b.waitFor("counts", 30*time.Second, atLeast(t, truth))
	q, err := QueryStore[string, int64](r.a, "counts")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range truth {
		type answer struct {
			v     int64
			found bool
			err   error
		}
		done := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			v, found, err := q.Get(ctx, k)
			done <- answer{v, found, err}
		}()
		select {
		case a := <-done:
			if a.err != nil || !a.found || a.v != want {
				t.Errorf("get %s = %d, %v, %v; want %d", k, a.v, a.found, a.err, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("get %s: no answer within 20s: the query waits for the idle loop's poll", k)
		}
	}
}
