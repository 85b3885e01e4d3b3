package stream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tests of this file run Apps against a 3-broker kfake cluster with
// replication factor 3 for the internal topics: partition leaders, the group
// coordinator and the transaction coordinator sit on different brokers, and
// some tests move them during processing. The assertions are those of the
// single-broker tests: nothing missing under AtLeastOnce, exact
// read_committed counts under ExactlyOnce.

const multiBrokers = 3

// startMultiBroker starts a 3-broker kfake cluster and returns it with a
// testBroker whose seeds are all its brokers.
func startMultiBroker(t *testing.T) (*kfake.Cluster, *testBroker) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(multiBrokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	seeds := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, &testBroker{t: t, kind: kfakeBroker, seeds: seeds, cl: cl, adm: kadm.NewClient(cl)}
}

// multiOpts are the options of every App of these tests.
func multiOpts(t *testing.T, g Guarantee) []Opt {
	return []Opt{testLogger(t), Delivery(g), ReplicationFactor(multiBrokers), StateDir(t.TempDir()),
		CommitInterval(20 * time.Millisecond), MaxPollRecords(25), Workers(2)}
}

// rekeyedCountTopology re-keys each event by its value (a repartition) and
// counts per new key.
func rekeyedCountTopology(b *Builder) {
	in := From(b, "events", String(), String())
	byVal := KeyBy(in, func(r Record[string, string]) (string, error) { return r.Value, nil })
	Count(GroupByKey(byVal, Codecs(String(), String())), StoreConfig{Name: "n", TTL: time.Hour}).ToStream().To("counts", String(), Int64())
}

// produceRekeyed writes events from..from+n-1, each under its own key with
// the key it is to be counted under as its value, and adds them to truth.
func produceRekeyed(b *testBroker, from, n, keys int, truth map[string]int64) {
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		k := key(i % keys)
		truth[k]++
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(fmt.Sprint("u", i)), Value: []byte(k),
			Timestamp: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	b.produce(recs...)
}

// checkCounts asserts the guarantee's result on the counts read: under
// ExactlyOnce each key's counts go 1, 2, 3, ... and end at the true count;
// under AtLeastOnce no key's count is below its true count.
func checkCounts(t *testing.T, g Guarantee, recs []*kgo.Record, truth map[string]int64) {
	t.Helper()
	if g == ExactlyOnce {
		checkExact(t, recs, truth)
		return
	}
	got := latest(t, recs)
	for k, n := range truth {
		if got[k] < n {
			t.Errorf("key %s: count %d < true count %d: a record was lost", k, got[k], n)
		}
	}
}

// checkInternalReplication asserts that every internal topic of app was
// created with the App's replication factor.
func checkInternalReplication(t *testing.T, b *testBroker, app string, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := b.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	internal := 0
	for _, td := range topics.Sorted() {
		if len(td.Topic) <= len(app) || td.Topic[:len(app)+1] != app+"-" {
			continue
		}
		internal++
		for _, pd := range td.Partitions.Sorted() {
			if len(pd.Replicas) != want {
				t.Errorf("%s-%d: %d replicas %v, want %d", td.Topic, pd.Partition, len(pd.Replicas), pd.Replicas, want)
			}
		}
	}
	if internal == 0 {
		t.Errorf("no internal topic of app %s found", app)
	}
}

// TestMultiBrokerRepartitionCount: a keyed count after a repartition, on 3
// brokers with replication factor 3, under both guarantees.
func TestMultiBrokerRepartitionCount(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			_, b := startMultiBroker(t)
			b.createTopic("events", 3)
			b.createTopic("counts", 3)
			const keys = 15
			truth := map[string]int64{}
			a := b.run("rekey", rekeyedCountTopology, multiOpts(t, g)...)
			produceRekeyed(b, 0, 300, keys, truth)
			produceRekeyed(b, 300, 150, keys, truth)
			committed := g == ExactlyOnce
			recs := b.waitForIso("counts", committed, 30*time.Second, atLeast(t, truth))
			b.waitCommitted("rekey", "events", 450)
			if err := a.stop(); err != nil {
				t.Fatalf("app: %v", err)
			}
			checkCounts(t, g, b.read("counts", committed), truth)
			checkInternalReplication(t, b, "rekey", multiBrokers)
			t.Logf("%d count updates read", len(recs))
		})
	}
}

// TestMultiBrokerJoin: a stream-table join on 3 brokers with replication
// factor 3: every order is enriched with its customer's current value.
func TestMultiBrokerJoin(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			_, b := startMultiBroker(t)
			committed := g == ExactlyOnce
			const parts, customers = 3, 10
			b.createCompacted("customers", parts)
			b.createTopic("orders", parts)
			b.createTopic("enriched", parts)
			want := map[string]string{}
			a := b.run("shop", shopTopology, multiOpts(t, g)...)
			produceCustomers(b, customers, "", t0)
			b.waitCommitted("shop", "customers", customers)
			produceOrders(b, 0, 30, customers, "", t0.Add(time.Minute), want)
			b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
			produceCustomers(b, customers, "-v2", t0.Add(2*time.Minute))
			b.waitCommitted("shop", "customers", 2*customers)
			produceOrders(b, 30, 30, customers, "-v2", t0.Add(3*time.Minute), want)
			recs := b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
			if err := a.stop(); err != nil {
				t.Fatalf("app: %v", err)
			}
			if committed && len(recs) != len(want) {
				t.Errorf("read_committed enriched has %d records, want exactly %d", len(recs), len(want))
			}
		})
	}
}

// moveAllLeaders moves the leader of every partition of every topic to the
// next broker, and checks that it moved.
func moveAllLeaders(t *testing.T, c *kfake.Cluster, b *testBroker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := b.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range topics.Sorted() {
		for _, pd := range td.Partitions.Sorted() {
			from := c.LeaderFor(td.Topic, pd.Partition)
			to := (from + 1) % multiBrokers
			if err := c.MoveTopicPartition(td.Topic, pd.Partition, to); err != nil {
				t.Fatalf("move %s-%d: %v", td.Topic, pd.Partition, err)
			}
			if got := c.LeaderFor(td.Topic, pd.Partition); got != to {
				t.Fatalf("%s-%d: leader %d after a move from %d to %d", td.Topic, pd.Partition, got, from, to)
			}
		}
	}
}

// moveCoordinators rehashes the cluster's coordinators until the
// coordinator of every key has changed.
func moveCoordinators(t *testing.T, c *kfake.Cluster, keys ...string) {
	t.Helper()
	before := make([]int32, len(keys))
	for i, k := range keys {
		before[i] = c.CoordinatorFor(k)
	}
	for range 100 {
		c.RehashCoordinators()
		moved := true
		for i, k := range keys {
			if c.CoordinatorFor(k) == before[i] {
				moved = false
			}
		}
		if moved {
			return
		}
	}
	t.Fatalf("coordinators of %q did not all move in 100 rehashes", keys)
}

// TestMultiBrokerCoordinatorMoves: the repartitioned count while the group
// coordinator (and under ExactlyOnce the transaction coordinator) moves to
// another broker during processing, four times. Nothing is lost; under
// ExactlyOnce the read_committed counts are exact.
func TestMultiBrokerCoordinatorMoves(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			c, b := startMultiBroker(t)
			movesRun(t, b, g, func(a *App) { moveCoordinators(t, c, moveCoordinatorKeys(t, a, g)...) })
		})
	}
}

// TestMultiBrokerLeaderMoves: the repartitioned count while the leaders of
// all partitions (input, repartition, changelog, output) move to another
// broker during processing, four times: no result is missing, and under
// ExactlyOnce the read_committed counts are exact. On kfake a leader epoch
// bump makes the client report lost records and reset the partition to
// offset 0; the App must not handle again what it already handled
// (runBatch skips records below a task's next offset).
func TestMultiBrokerLeaderMoves(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			c, b := startMultiBroker(t)
			movesRun(t, b, g, func(*App) { moveAllLeaders(t, c, b) })
		})
	}
}

// movesRun runs the repartitioned count over four rounds of input, calling
// move while each round's records are processed, and checks the counts.
func movesRun(t *testing.T, b *testBroker, g Guarantee, move func(*App)) {
	b.createTopic("events", 3)
	b.createTopic("counts", 3)
	const keys, rounds, per = 15, 4, 150
	truth := map[string]int64{}
	committed := g == ExactlyOnce
	a := b.run("moves", rekeyedCountTopology, multiOpts(t, g)...)
	for round := range rounds {
		produceRekeyed(b, round*per, per, keys, truth)
		// Wait for the first results of the round, not all of them.
		n := round*per + per/3
		b.waitForIso("counts", committed, 30*time.Second, counted(t, int64(n)))
		move(a.a)
	}
	b.waitForIso("counts", committed, 30*time.Second, atLeast(t, truth))
	b.waitCommitted("moves", "events", rounds*per)
	if err := a.stop(); err != nil {
		t.Fatalf("app: %v", err)
	}
	checkCounts(t, g, b.read("counts", committed), truth)
}

// moveCoordinatorKeys are the coordinator keys of a running App: its group,
// and under ExactlyOnce its transactional id ("<app>-<instance id>"; the
// App has written its instance id once it produced a result).
func moveCoordinatorKeys(t *testing.T, a *App, g Guarantee) []string {
	t.Helper()
	keys := []string{a.id}
	if g == ExactlyOnce {
		instance, err := a.instanceID()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.id+"-"+instance)
	}
	return keys
}
