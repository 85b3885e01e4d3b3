package stream

import (
	"context"
	"errors"
	"slices"
	"strings"
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
	recs := b.waitFor("counts", 20*time.Second, counted(t, 50))
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	if got := latest(t, recs)[key(0)]; got != 50 {
		t.Fatalf("count after reset = %d, want 50 (a fresh count, not stale local state + 50)", got)
	}
}

func TestRepartitionTopicTakesLargestUpstreamCount(t *testing.T) {
	b := startBroker(t)
	b.createTopic("small", 2)
	b.createTopic("large", 5)
	b.createTopic("out", 1)
	a := b.run("merge", func(bl *Builder) {
		s := From(bl, "small", String(), String())
		l := From(bl, "large", String(), String())
		Count(GroupByKey(s.Merge(l), Codecs(String(), String())), StoreConfig{Name: "m", TTL: time.Hour}).
			ToStream().To("out", String(), Int64())
	}, StateDir(t.TempDir()), CommitInterval(10*time.Millisecond))
	b.produce(&kgo.Record{Topic: "small", Key: []byte("k"), Value: []byte("1")},
		&kgo.Record{Topic: "large", Key: []byte("k"), Value: []byte("2")})
	recs := b.waitFor("out", 20*time.Second, counted(t, 2))
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if n, _ := Int64().Decode(recs[len(recs)-1].Value); n != 2 {
		t.Fatalf("merged count = %d, want 2 (both sources' records meet in one task)", n)
	}
	td, err := b.adm.ListTopics(t.Context(), "merge-m-repartition", "merge-m-changelog", "merge.dlq")
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range td {
		if len(d.Partitions) != 5 {
			t.Errorf("%s has %d partitions, want 5", name, len(d.Partitions))
		}
	}
	if len(td) != 3 {
		t.Errorf("topics = %v", td.Names())
	}
}

// TestProduceFailureStopsWithoutCommitting: an output the cluster rejects
// (too large) is a runtime failure: Run returns an error and nothing from
// the failed record on is committed, so a fixed App processes it again.
func TestProduceFailureStopsWithoutCommitting(t *testing.T) {
	b := startBroker(t)
	b.createTopic("in", 1)
	b.createTopic("out", 1)
	b.produce(
		&kgo.Record{Topic: "in", Key: []byte("a"), Value: []byte("small")},
		&kgo.Record{Topic: "in", Key: []byte("b"), Value: []byte("huge")},
		&kgo.Record{Topic: "in", Key: []byte("c"), Value: []byte("small")},
	)
	blowUp := func(bl *Builder) {
		Map(From(bl, "in", String(), String()), func(r Record[string, string]) (string, error) {
			if r.Value == "huge" {
				return strings.Repeat("x", 2<<20), nil // above the 1 MiB batch limit
			}
			return r.Value, nil
		}).To("out", String(), String())
	}
	err := runOnce(t, b, "fail", blowUp, CommitInterval(time.Millisecond))
	if err == nil {
		t.Fatal("Run succeeded although an output could not be produced")
	}
	fixed := b.run("fail", func(bl *Builder) {
		From(bl, "in", String(), String()).To("out", String(), String())
	}, StateDir(t.TempDir()))
	recs := b.waitFor("out", 20*time.Second, func(r []*kgo.Record) bool {
		for _, rec := range r {
			if string(rec.Key) == "b" {
				return true
			}
		}
		return false
	})
	if err := fixed.stop(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, string(r.Key))
	}
	// Records after the failed one may have been produced before the
	// failure was known (production is asynchronous): duplicates, as
	// at-least-once allows. The failed record itself is not lost.
	if !slices.Contains(keys, "b") {
		t.Errorf("outputs %v: the record whose output failed was committed past and lost", keys)
	}
}

// TestInputGrewBeyondChangelog: partitions added to an input after its
// changelog was created cannot get a store partition: the task fails with a
// clear error instead of writing state to the wrong place.
func TestInputGrewBeyondChangelog(t *testing.T) {
	bl := NewBuilder()
	countTopology(bl)
	a, err := NewApp("grow", bl, Brokers("127.0.0.1:1"), StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	a.partitions = map[string]int32{"grow-counts-changelog": 2} // as found by setupTopics
	if _, err := a.ensureTask(t.Context(), taskID{sub: 0, partition: 2}); !errors.Is(err, ErrPartitionMismatch) {
		t.Fatalf("err = %v, want ErrPartitionMismatch", err)
	}
}
