package stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func runOnce(t *testing.T, b *testBroker, appID string, build func(*Builder), opts ...Opt) error {
	t.Helper()
	bl := NewBuilder()
	build(bl)
	a, err := NewApp(appID, bl, append([]Opt{Brokers(b.seeds...), StateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return a.Run(ctx)
}

func TestMissingTopicsFailFast(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 2)
	err := runOnce(t, b, "app", func(bl *Builder) {
		From(bl, "events", String(), String()).To("nowhere", String(), String())
	})
	if !errors.Is(err, ErrTopicMissing) {
		t.Fatalf("missing sink: err = %v, want ErrTopicMissing", err)
	}
	err = runOnce(t, b, "app", func(bl *Builder) {
		From(bl, "absent", String(), String()).To("events", String(), String())
	})
	if !errors.Is(err, ErrTopicMissing) {
		t.Fatalf("missing source: err = %v, want ErrTopicMissing", err)
	}
}

func TestInternalTopicPartitionMismatch(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 3)
	b.createTopic("counts", 3)
	b.createTopic("app-counts-changelog", 2) // left over from a topology with another input
	err := runOnce(t, b, "app", countTopology)
	if !errors.Is(err, ErrPartitionMismatch) {
		t.Fatalf("err = %v, want ErrPartitionMismatch", err)
	}
}

// TestChangelogRecreatedForcesFullRestore: a local checkpoint beyond the end
// of the changelog (the topic was deleted and recreated, e.g. by an app
// reset) must not be trusted: the local store is wiped and rebuilt from the
// (now empty) changelog, so counts start again instead of continuing from
// stale local state.
func TestChangelogRecreatedForcesFullRestore(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 1)
	b.createTopic("counts", 1)
	dir := t.TempDir()
	truth := map[string]int64{}
	app := b.run("reset", countTopology, StateDir(dir), CommitInterval(10*time.Millisecond))
	produceEvents(b, 0, 50, 1, truth)
	b.waitFor("counts", 20*time.Second, atLeast(t, truth))
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := b.adm.DeleteTopics(ctx, "reset-counts-changelog", "counts"); err != nil {
		t.Fatal(err)
	}
	// Also reset the input position, as an application reset would.
	if _, err := b.adm.DeleteGroup(ctx, "reset"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let deletion settle before recreating
	b.createTopic("counts", 1)
	app = b.run("reset", countTopology, StateDir(dir), CommitInterval(10*time.Millisecond))
	recs := b.waitFor("counts", 20*time.Second, func(r []*kgo.Record) bool { return len(r) >= 50 })
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	if got := latest(t, recs[:50])[key(0)]; got != 50 {
		t.Fatalf("count after reset = %d, want 50 (a fresh count, not stale local state + 50)", got)
	}
}
