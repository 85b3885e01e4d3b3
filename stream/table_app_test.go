package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runPrepared runs an App built by the test (seams set) in the background;
// killed is its kill switch (withKillSwitch), or nil.
func runPrepared(t testing.TB, a *App, killed *atomic.Bool) *runningApp {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningApp{a: a, killed: killed, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

func (b *testBroker) createCompacted(name string, partitions int32) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	compact := "compact"
	resp, err := b.adm.CreateTopic(ctx, partitions, -1, map[string]*string{"cleanup.policy": &compact}, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.t.Fatalf("create %s: %v", name, err)
	}
}

// waitCommitted waits until the group's committed offsets of topic sum to
// want (the App consumed that many records of it).
func (b *testBroker) waitCommitted(group, topic string, want int64) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := b.adm.FetchOffsetsForTopics(ctx, group, topic)
		cancel()
		var sum int64
		if err == nil {
			resp.Each(func(o kadm.OffsetResponse) { sum += max(0, o.At) })
		}
		if sum >= want {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("group %s: committed %d records of %s, want %d (err %v)", group, sum, topic, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func produceCustomers(b *testBroker, n int, suffix string, ts time.Time) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "customers", Key: []byte(fmt.Sprint("c", i)),
			Value: []byte(fmt.Sprint("name", i, suffix)), Timestamp: ts}
	}
	b.produce(recs...)
}

// produceOrders writes orders from..from+n-1 for customers i%customers and
// returns the enriched value each must produce.
func produceOrders(b *testBroker, from, n, customers int, suffix string, ts time.Time, want map[string]string) {
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		c := i % customers
		o := fmt.Sprint("order", i)
		want[o] = fmt.Sprintf("%s@name%d%s", o, c, suffix)
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprint("c", c)), Value: []byte(o), Timestamp: ts})
	}
	b.produce(recs...)
}

// enrichedComplete: every wanted order appears in the output, and every
// output carries the wanted table value (duplicates allowed: at-least-once).
func enrichedComplete(t *testing.T, want map[string]string) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		seen := map[string]bool{}
		for _, r := range recs {
			o, _, _ := strings.Cut(string(r.Value), "@")
			if w, ok := want[o]; ok && w != string(r.Value) {
				t.Fatalf("order %s enriched as %q, want %q", o, r.Value, w)
			}
			seen[o] = true
		}
		for o := range want {
			if !seen[o] {
				return false
			}
		}
		return true
	}
}

func shopTopology(b *Builder) {
	orders := From(b, "orders", String(), String())
	customers := FromTable(b, "customers", String(), String(), "customers")
	Join(orders, customers, func(r Record[string, string], c string) (string, error) {
		return r.Value + "@" + c, nil
	}).To("enriched", String(), String())
}

// TestTableRestoredAfterRestart: a table's store is restored from its source
// topic, never from a changelog topic of its own. A restart on the same state
// directory replays nothing (the local checkpoint is at the committed
// offset); a restart on an empty one replays the source topic up to the
// committed offset only.
func TestTableRestoredAfterRestart(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { tableRestartRun(t, g) })
	}
}

func tableRestartRun(t *testing.T, g Guarantee) {
	b := startBrokerFor(t, g)
	committed := g == ExactlyOnce
	const parts, customers = 3, 10
	b.createCompacted("customers", parts)
	b.createTopic("orders", parts)
	b.createTopic("enriched", parts)
	dir := t.TempDir()
	opts := func(dir string) []Opt {
		return []Opt{testLogger(t), WithGuarantee(g), StateDir(dir), CommitInterval(20 * time.Millisecond)}
	}
	want := map[string]string{}

	a1 := b.run("shop", shopTopology, opts(dir)...)
	produceCustomers(b, customers, "", t0)
	b.waitCommitted("shop", "customers", customers)
	produceOrders(b, 0, 30, customers, "", t0.Add(time.Minute), want)
	b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
	if err := a1.stop(); err != nil {
		t.Fatal(err)
	}
	if n := counterValue(a1.a.metrics.restored); n != 0 {
		t.Fatalf("first start restored %v records, want 0 (nothing committed yet)", n)
	}

	a2 := b.run("shop", shopTopology, opts(dir)...)
	produceOrders(b, 30, 30, customers, "", t0.Add(2*time.Minute), want)
	b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
	if n := counterValue(a2.a.metrics.restored); n != 0 {
		t.Fatalf("restart on the same state restored %v records, want 0 (checkpoint = committed offset)", n)
	}
	// Table updates after the restart reach the store as a source.
	produceCustomers(b, customers, "-v2", t0.Add(3*time.Minute))
	b.waitCommitted("shop", "customers", 2*customers)
	produceOrders(b, 60, 30, customers, "-v2", t0.Add(4*time.Minute), want)
	b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
	if err := a2.stop(); err != nil {
		t.Fatal(err)
	}

	a3 := b.run("shop", shopTopology, opts(t.TempDir())...)
	produceOrders(b, 90, 30, customers, "-v2", t0.Add(5*time.Minute), want)
	b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
	if n := counterValue(a3.a.metrics.restored); n != 2*customers {
		t.Fatalf("restart on an empty state restored %v records, want %d (the table topic up to the committed offset)", n, 2*customers)
	}
	if err := a3.stop(); err != nil {
		t.Fatal(err)
	}
	topics, err := b.adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics.Names() {
		if strings.Contains(name, "changelog") {
			t.Fatalf("topic %s created: a table needs no changelog topic", name)
		}
	}
}

// TestJoinTwoInstancesKeepTasksTogether runs the join on one instance, adds a
// second and stops it again. Every assignment keeps a task's partitions (the
// same partition of orders and customers) on one member, and the moved tasks
// restore their table from the source topic: every order is enriched with
// the right customer.
func TestJoinTwoInstancesKeepTasksTogether(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { joinTwoInstancesRun(t, g) })
	}
}

func joinTwoInstancesRun(t *testing.T, g Guarantee) {
	b := startBrokerFor(t, g)
	committed := g == ExactlyOnce
	const parts, customers = 4, 20
	b.createCompacted("customers", parts)
	b.createTopic("orders", parts)
	b.createTopic("enriched", parts)

	var mu sync.Mutex
	var tables [][]taskOwner
	instances := 0
	start := func() *runningApp {
		bl := NewBuilder()
		shopTopology(bl)
		instances++
		owners := withTaskOwners([]byte(fmt.Sprintf("instance-%d", instances)), func(o []taskOwner) {
			mu.Lock()
			tables = append(tables, o)
			mu.Unlock()
		})
		a, err := NewApp("shop", bl, Brokers(b.seeds...), testLogger(t), WithGuarantee(g), StateDir(t.TempDir()),
			CommitInterval(20*time.Millisecond), MaxPollRecords(10), owners)
		if err != nil {
			t.Fatal(err)
		}
		return runPrepared(t, a, nil)
	}
	owned := func(r *runningApp) int {
		r.a.mu.Lock()
		defer r.a.mu.Unlock()
		return len(r.a.tasks) + len(r.a.assigned)
	}
	waitOwned := func(want map[*runningApp]int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok := true
			for r, n := range want {
				ok = ok && owned(r) == n
			}
			if ok {
				checkGroupTasksWhole(t, b)
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("assignment did not settle")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	want := map[string]string{}

	a1 := start()
	produceCustomers(b, customers, "", t0)
	b.waitCommitted("shop", "customers", customers)
	produceOrders(b, 0, 80, customers, "", t0.Add(time.Minute), want)
	b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
	waitOwned(map[*runningApp]int{a1: parts})

	a2 := start()
	waitOwned(map[*runningApp]int{a1: parts / 2, a2: parts / 2})
	// Both instances learn who owns what (for routing, e.g. queryable
	// state): each partition's owner is the instance running its task.
	deadline := time.Now().Add(10 * time.Second)
	for p := int32(0); p < parts; p++ {
		id, _ := a1.a.taskOf("orders", p)
		a1.a.mu.Lock()
		_, mine := a1.a.tasks[id]
		_, assigned := a1.a.assigned[id]
		a1.a.mu.Unlock()
		want := a2.a.memberUserData
		if mine || assigned {
			want = a1.a.memberUserData
		}
		for _, r := range []*runningApp{a1, a2} {
			for {
				got, ok := r.a.ownerOf("customers", p)
				if ok && string(got) == string(want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("partition %d: owner %q (found %v), want %q", p, got, ok, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	produceOrders(b, 80, 80, customers, "", t0.Add(2*time.Minute), want)
	b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
	if n := counterValue(a2.a.metrics.restored); n == 0 {
		t.Fatal("the second instance restored no table records for the tasks it took over")
	}
	if err := a2.stop(); err != nil {
		t.Fatal(err)
	}
	waitOwned(map[*runningApp]int{a1: parts})
	produceOrders(b, 160, 80, customers, "", t0.Add(3*time.Minute), want)
	b.waitForIso("enriched", committed, 30*time.Second, enrichedComplete(t, want))
	if err := a1.stop(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(tables) < 3 {
		t.Fatalf("%d assignments seen, want at least 3 (join, rebalance, leave)", len(tables))
	}
	for i, table := range tables {
		for _, o := range table {
			c := slices.Sorted(slices.Values(o.partitions["customers"]))
			ord := slices.Sorted(slices.Values(o.partitions["orders"]))
			if !slices.Equal(c, ord) {
				t.Fatalf("assignment %d: a member got customers %v but orders %v: a task was split", i, c, ord)
			}
		}
	}
}

// checkGroupTasksWhole asks the broker for every member's assignment and
// fails if one holds a partition of customers without the same partition of
// orders, or the reverse.
func checkGroupTasksWhole(t *testing.T, b *testBroker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	groups, err := b.adm.DescribeGroups(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range groups["shop"].Members {
		ka, ok := m.Assigned.AsConsumer()
		if !ok {
			t.Fatalf("member %s: assignment is not of the consumer protocol", m.MemberID)
		}
		got := map[string][]int32{}
		for _, tp := range ka.Topics {
			got[tp.Topic] = slices.Sorted(slices.Values(tp.Partitions))
		}
		if !slices.Equal(got["customers"], got["orders"]) {
			t.Fatalf("member %s assigned customers %v, orders %v: a task was split", m.MemberID, got["customers"], got["orders"])
		}
	}
}

// Run fails fast, before creating any topic or joining the group, when the
// inputs of a join are not co-partitioned.
func TestRunFailsOnCopartitionMismatch(t *testing.T) {
	b := startBroker(t)
	b.createCompacted("customers", 2)
	b.createTopic("orders", 3)
	b.createTopic("enriched", 3)
	bl := NewBuilder()
	shopTopology(bl)
	a, err := NewApp("shop", bl, Brokers(b.seeds...), testLogger(t), StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = a.Run(ctx)
	if !errors.Is(err, ErrPartitionMismatch) {
		t.Fatalf("Run = %v, want ErrPartitionMismatch", err)
	}
	for _, want := range []string{"customers (2 partitions)", "orders (3 partitions)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	topics, lerr := b.adm.ListTopics(ctx)
	if lerr != nil {
		t.Fatal(lerr)
	}
	for _, name := range topics.Names() {
		if strings.HasSuffix(name, ".dlq") {
			t.Errorf("topic %s created although Run failed its checks", name)
		}
	}
	groups, lerr := b.adm.ListGroups(ctx)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if slices.Contains(groups.Groups(), "shop") {
		t.Error("the App joined its group although Run failed its checks")
	}
}
