package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestExactlyOnceTransactionSpansRounds: under ExactlyOnce one transaction
// spans the rounds of a commit interval. The App's clock is frozen, so its
// transaction never becomes due by time: after it handled every record over
// many rounds (MaxPollRecords 20), a read_committed reader sees nothing yet.
// A second instance joining makes the first end its open transaction with a
// commit before it revokes the moving tasks: every in-flight record of the
// tasks that stay (and of those that move) is committed, none aborted, and
// the final counts are exact.
func TestExactlyOnceTransactionSpansRounds(t *testing.T) {
	b := startBrokerFor(t, ExactlyOnce)
	const parts = 4
	b.createTopic("events", parts)
	b.createTopic("counts", parts)
	const keys = 20
	truth := map[string]int64{}

	frozen := newFakeClock() // Now never moves: only a rebalance, the size bound or a stop ends a transaction
	a1 := b.run("spans", countTopology, testLogger(t), Delivery(ExactlyOnce), StateDir(t.TempDir()),
		ProcessingClock(frozen), CommitInterval(50*time.Millisecond), MaxPollRecords(20), Workers(2))
	produceEvents(b, 0, 200, keys, truth)
	waitCounter(t, "records handled by the first instance", func() float64 { return counterValue(a1.a.metrics.recordsIn) }, 200)
	if recs := b.readCommitted("counts"); len(recs) != 0 {
		t.Fatalf("read_committed output has %d records while the transaction should still be open", len(recs))
	}
	if n := counterValue(a1.a.metrics.commits); n != 0 {
		t.Fatalf("%v transactions committed before any was due", n)
	}

	a2 := b.run("spans", countTopology, testLogger(t), Delivery(ExactlyOnce), StateDir(t.TempDir()),
		CommitInterval(20*time.Millisecond), MaxPollRecords(20))
	// The rebalance ends the open transaction with a commit: everything
	// the first instance handled becomes visible, exactly once.
	recs := b.waitForIso("counts", true, 30*time.Second, atLeast(t, truth))
	checkExact(t, recs, truth)
	waitCounter(t, "tasks owned by the second instance", func() float64 {
		a2.a.mu.Lock()
		defer a2.a.mu.Unlock()
		return float64(len(a2.a.tasks) + len(a2.a.assigned))
	}, parts/2)
	if n := counterValue(a1.a.metrics.txnAborts); n != 0 {
		t.Errorf("first instance aborted %v transactions across the rebalance, want 0", n)
	}
	if n := counterValue(a1.a.metrics.commits); n < 1 {
		t.Errorf("first instance committed %v transactions, want >= 1", n)
	}

	produceEvents(b, 200, 200, keys, truth)
	// The second instance commits by time; the first (frozen clock)
	// commits its share on the graceful stop.
	waitCounter(t, "records handled by both instances", func() float64 {
		return counterValue(a1.a.metrics.recordsIn) + counterValue(a2.a.metrics.recordsIn)
	}, 400)
	if err := a1.stop(); err != nil {
		t.Fatalf("first instance: %v", err)
	}
	recs = b.waitForIso("counts", true, 30*time.Second, atLeast(t, truth))
	if err := a2.stop(); err != nil {
		t.Fatalf("second instance: %v", err)
	}
	checkExact(t, b.readCommitted("counts"), truth)
	for i, r := range []*runningApp{a1, a2} {
		if n := counterValue(r.a.metrics.txnAborts); n != 0 {
			t.Errorf("instance %d aborted %v transactions, want 0 (graceful rebalances and stops only)", i+1, n)
		}
	}
	t.Logf("instance 1: %v records in %v transactions; instance 2: %v records in %v transactions",
		counterValue(a1.a.metrics.recordsIn), counterValue(a1.a.metrics.commits),
		counterValue(a2.a.metrics.recordsIn), counterValue(a2.a.metrics.commits))
}

// TestLagZeroAfterGracefulStop: inputs that end with a transaction marker
// (a transactional upstream producer; under ExactlyOnce also the repartition
// topic the App writes itself) must show a consumer lag of 0 once everything
// is processed and after a graceful stop: committed offsets step over
// trailing control records, as the Java consumer's position() does.
func TestLagZeroAfterGracefulStop(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { lagZeroRun(t, g) })
	}
}

func lagZeroRun(t *testing.T, g Guarantee) {
	b := startBrokerFor(t, g)
	b.createTopic("events", 3)
	b.createTopic("counts", 3)
	a := b.run("lag", func(bl *Builder) {
		in := From(bl, "events", String(), String())
		byVal := KeyBy(in, func(r Record[string, string]) (string, error) { return r.Value, nil })
		Count(GroupByKey(byVal, Codecs(String(), String())), StoreConfig{Name: "n", TTL: time.Hour}).ToStream().To("counts", String(), Int64())
	}, testLogger(t), Delivery(g), StateDir(t.TempDir()), CommitInterval(20*time.Millisecond))

	// A transactional upstream producer: each of its transactions ends
	// with a commit marker in every partition it wrote.
	up, err := kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.TransactionalID("lag-upstream"),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	truth := map[string]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for txn := range 3 {
		if err := up.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 60 {
			v := fmt.Sprintf("v%02d", (txn*60+i)%12)
			truth[v]++
			up.Produce(ctx, &kgo.Record{Topic: "events", Key: []byte(fmt.Sprintf("k%03d", txn*60+i)), Value: []byte(v)}, nil)
		}
		if err := up.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := up.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	b.waitForIso("counts", g == ExactlyOnce, 30*time.Second, atLeast(t, truth))

	inputs := []string{"events"}
	topics, err := b.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, "lag-") && strings.HasSuffix(name, "-repartition") {
			inputs = append(inputs, name)
		}
	}
	if len(inputs) != 2 {
		t.Fatalf("inputs %v: want events and one repartition topic", inputs)
	}
	// While running: the commits catch up with the markers.
	deadline := time.Now().Add(30 * time.Second)
	for lagged := groupLag(t, b, "lag", inputs); len(lagged) > 0; lagged = groupLag(t, b, "lag", inputs) {
		if time.Now().After(deadline) {
			t.Fatalf("lag never reached 0 while running: %v", lagged)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if lagged := groupLag(t, b, "lag", inputs); len(lagged) > 0 {
		t.Errorf("lag after a graceful stop: %v", lagged)
	}
}

// groupLag returns "topic-partition=lag" for every partition of topics whose
// committed offset is not at the end (each topic's partitions must all have
// records).
func groupLag(t *testing.T, b *testBroker, group string, topics []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lags, err := b.adm.Lag(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := lags[group]
	if !ok || l.Error() != nil {
		t.Fatalf("lag of %s: %v", group, l.Error())
	}
	ends, err := b.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ends.Each(func(o kadm.ListedOffset) {
		m, ok := l.Lag.Lookup(o.Topic, o.Partition)
		switch {
		case o.Offset == 0:
			t.Fatalf("%s-%d is empty: the test needs records in every partition", o.Topic, o.Partition)
		case !ok:
			out = append(out, fmt.Sprintf("%s-%d=uncommitted(end %d)", o.Topic, o.Partition, o.Offset))
		case m.Err != nil || m.Lag != 0:
			out = append(out, fmt.Sprintf("%s-%d=%d(commit %d, end %d, err %v)", o.Topic, o.Partition, m.Lag,
				m.Commit.At, m.End.Offset, m.Err))
		}
	})
	return out
}

// waitCounter waits until value() >= want, failing the test after 30s.
func waitCounter(t *testing.T, what string, value func() float64, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for value() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v, want >= %v within 30s", what, value(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExpiryJudgesPendingWrites: under ExactlyOnce a task's store writes stay
// pending across rounds until the transaction commits, while the TTL index
// read by expiry is the database's. A key refreshed by a pending write must
// not be expired by its stale committed timestamp, and a key already deleted
// by a pending expiry is not deleted (and tombstoned) again.
func TestExpiryJudgesPendingWrites(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Minute}).ToStream().To("out", String(), Int64())
	h := newHarness(t, b)
	h.feed("in", 0, "refreshed", "v", t0) // committed at t0
	h.feed("in", 0, "stale", "v", t0)     // committed at t0
	tk := h.task("in", 0)
	// One transaction over several rounds: nothing is flushed to the
	// database until it commits.
	r := &kgo.Record{Topic: "in", Offset: 2, Key: []byte("refreshed"), Value: []byte("v"), Timestamp: t0.Add(90 * time.Second)}
	if err := tk.handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	// Stream time t0+90s: both keys' committed timestamps are past the
	// TTL, but "refreshed" has a pending update at t0+90s.
	for range 2 { // two rounds of the same transaction
		if err := tk.expire(100); err != nil {
			t.Fatal(err)
		}
		// The deletions go out with the table's collapsed updates; a
		// flush per round shows a second deletion of the same key.
		if err := tk.flushTables(); err != nil {
			t.Fatal(err)
		}
	}
	var tombstones []string
	for _, r := range h.topic("app-c-changelog") {
		if r.Value == nil {
			tombstones = append(tombstones, string(r.Key))
		}
	}
	if len(tombstones) != 1 || tombstones[0] != "stale" {
		t.Fatalf("tombstones %v, want exactly one, for stale", tombstones)
	}
	if err := tk.flushState(); err != nil { // the transaction commits
		t.Fatal(err)
	}
	h.feed("in", 0, "refreshed", "v", t0.Add(91*time.Second))
	out := h.topic("out")
	if n, _ := Int64().Decode(out[len(out)-1].Value); n != 3 {
		t.Fatalf("count of the refreshed key = %d, want 3 (its pending update was not expired)", n)
	}
}

// TestExactlyOnceTransactionSizeBound: with the clock frozen (no transaction
// is ever due by time) a transaction still ends once it holds the size
// bound's worth of input records, and the graceful stop commits the rest.
func TestExactlyOnceTransactionSizeBound(t *testing.T) {
	b := startBrokerFor(t, ExactlyOnce)
	b.createTopic("events", 2)
	b.createTopic("counts", 2)
	truth := map[string]int64{}
	const bound, perPoll, n = 40, 20, 200
	a := b.run("bound", countTopology, testLogger(t), Delivery(ExactlyOnce), StateDir(t.TempDir()),
		ProcessingClock(newFakeClock()), CommitInterval(20*time.Millisecond), MaxPollRecords(perPoll),
		optFunc(func(c *config) { c.maxTxnRecords = bound }))
	produceEvents(b, 0, n, 10, truth)
	waitCounter(t, "records handled", func() float64 { return counterValue(a.a.metrics.recordsIn) }, n)
	// A transaction ends after the round that reaches the bound: at most
	// bound+perPoll-1 records are in the one left open.
	waitCounter(t, "committed transactions", func() float64 { return counterValue(a.a.metrics.commits) },
		n/(bound+perPoll-1))
	if !counted(t, n-(bound+perPoll-1))(b.readCommitted("counts")) {
		t.Fatalf("read_committed counts add up to less than %d records", n-(bound+perPoll-1))
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	checkExact(t, b.readCommitted("counts"), truth)
}
