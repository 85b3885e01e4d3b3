package stream

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestExactlyOnceFencesZombie: instance A stalls in the middle of a round
// (its transaction open, its outputs partly produced) long enough to be
// removed from the group; B takes over and processes everything. When A
// wakes up, its transaction must not commit (KIP-447: the offset commit
// carries A's stale generation), so a read_committed reader sees every
// count exactly once.
func TestExactlyOnceFencesZombie(t *testing.T) {
	b := startBrokerFor(t, ExactlyOnce)
	b.createTopic("events", 2)
	b.createTopic("counts", 2)
	const keys = 10
	truth := map[string]int64{}

	stuck := make(chan struct{})
	release := make(chan struct{})
	var handled atomic.Int64
	var once sync.Once
	stalling := func(bl *Builder) {
		in := From(bl, "events", String(), String()).Peek(func(Record[string, string]) {
			if handled.Add(1) == 60 {
				once.Do(func() { close(stuck) })
				<-release
			}
		})
		Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "counts", TTL: time.Hour}).
			ToStream().To("counts", String(), Int64())
	}
	groupOpts := ClientOpts(kgo.RebalanceTimeout(time.Second), kgo.SessionTimeout(6*time.Second),
		kgo.TransactionTimeout(2*time.Second))
	a := b.run("zombie", stalling, testLogger(t), Delivery(ExactlyOnce), StateDir(t.TempDir()),
		MaxPollRecords(20), Workers(1), CommitInterval(10*time.Millisecond), groupOpts)
	produceEvents(b, 0, 200, keys, truth)
	select {
	case <-stuck:
	case <-time.After(30 * time.Second):
		t.Fatal("instance A never stalled")
	}
	bApp := b.run("zombie", countTopology, testLogger(t), Delivery(ExactlyOnce), StateDir(t.TempDir()),
		CommitInterval(10*time.Millisecond), groupOpts)
	recs := b.waitForIso("counts", true, 60*time.Second, atLeast(t, truth))
	checkExact(t, recs, truth)

	close(release) // the zombie wakes up and tries to commit its round
	produceEvents(b, 200, 50, keys, truth)
	recs = b.waitForIso("counts", true, 60*time.Second, atLeast(t, truth))
	if err := bApp.stop(); err != nil {
		t.Errorf("B: %v", err)
	}
	// The fenced instance rejoined with a new session and stops cleanly.
	if err := a.stop(); err != nil {
		t.Errorf("A: %v", err)
	}
	// A's transaction was refused: by the epoch fence (its transaction
	// timed out while it stalled with records in it) or, when it holds no
	// records yet (tables collapse their updates until the transaction
	// ends), by the stale generation of its offset commit (KIP-447).
	if f, ab := counterValue(a.a.metrics.fenced), counterValue(a.a.metrics.txnAborts); f < 1 && ab < 1 {
		t.Errorf("A was never fenced nor aborted (fenced_total %v, aborts %v): the scenario did not happen", f, ab)
	}
	recs = b.readCommitted("counts")
	checkExact(t, recs, truth)
}
