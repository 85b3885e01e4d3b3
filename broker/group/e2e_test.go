package group_test

// End-to-end tests: franz-go consumer groups against an in-process weir
// broker (broker.Start on 127.0.0.1:0). Every wait is bounded by a
// deadline; nothing asserts on speed.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
)

func startBroker(t testing.TB, dir string) *broker.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{
		DataDir:                    dir,
		KafkaAddr:                  "127.0.0.1:0",
		GroupInitialRebalanceDelay: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newAdmin(t testing.TB, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func produce(t *testing.T, addr, topic string, n, partitions int, tag string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", tag, i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// seen records which offsets of which partitions were consumed.
type seen struct {
	mu sync.Mutex
	m  map[string]map[int32]map[int64]int
}

func (s *seen) add(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[int32]map[int64]int{}
	}
	if s.m[r.Topic] == nil {
		s.m[r.Topic] = map[int32]map[int64]int{}
	}
	if s.m[r.Topic][r.Partition] == nil {
		s.m[r.Topic][r.Partition] = map[int64]int{}
	}
	s.m[r.Topic][r.Partition][r.Offset]++
}

// missing counts offsets below end not consumed by anyone.
func (s *seen) missing(ends kadm.ListedOffsets) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	ends.Each(func(e kadm.ListedOffset) {
		for o := int64(0); o < e.Offset; o++ {
			if s.m[e.Topic][e.Partition][o] == 0 {
				n++
			}
		}
	})
	return n
}

// consumer is a group member polling in the background.
type consumer struct {
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	revoked  int // partitions revoked or lost over the member's life
	consumed int
}

func startConsumer(t *testing.T, addr, group, topic string, s *seen, opts ...kgo.Opt) *consumer {
	t.Helper()
	c := &consumer{done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			for _, ps := range m {
				c.revoked += len(ps)
			}
			c.mu.Unlock()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			for _, ps := range m {
				c.revoked += len(ps)
			}
			c.mu.Unlock()
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				s.add(r)
				c.mu.Lock()
				c.consumed++
				c.mu.Unlock()
			})
		}
	}()
	return c
}

func (c *consumer) revokedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.revoked
}

// stop commits what was consumed and closes the client (which leaves the
// group unless the member is static).
func (c *consumer) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Logf("final commit: %v", err)
	}
	c.cl.Close()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
}

func committedEqualsEnd(t *testing.T, adm *kadm.Client, group, topic string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	ok := true
	ends.Each(func(e kadm.ListedOffset) {
		o, found := offs.Lookup(e.Topic, e.Partition)
		if !found || o.At != e.Offset {
			ok = false
		}
	})
	return ok
}

func endOffsets(t *testing.T, adm *kadm.Client, topic string) kadm.ListedOffsets {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return ends
}

// runJoinLeave: one member, a second joins under produce, the first
// leaves; nothing is lost and the final commits reach the log end.
func runJoinLeave(t *testing.T, wantType string, opts ...kgo.Opt) {
	b := startBroker(t, t.TempDir())
	defer b.Close()
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "orders", 6)
	var s seen
	produce(t, b.Addr(), "orders", 300, 6, "a")
	c1 := startConsumer(t, b.Addr(), "g", "orders", &s, opts...)
	produce(t, b.Addr(), "orders", 300, 6, "b")
	c2 := startConsumer(t, b.Addr(), "g", "orders", &s, opts...)
	produce(t, b.Addr(), "orders", 300, 6, "c")
	waitFor(t, "all records consumed by two members", 60*time.Second, func() bool {
		return s.missing(endOffsets(t, adm, "orders")) == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := lg["g"]; g.GroupType != wantType {
		t.Fatalf("group type %q, want %q", g.GroupType, wantType)
	}
	// Both members get partitions: keep producing small batches until the
	// second member consumes some (the first may have consumed everything
	// produced before the rebalance completed).
	c2.mu.Lock()
	c2before := c2.consumed
	c2.mu.Unlock()
	waitFor(t, "the second member to consume", 60*time.Second, func() bool {
		produce(t, b.Addr(), "orders", 12, 6, "more")
		time.Sleep(200 * time.Millisecond)
		c2.mu.Lock()
		defer c2.mu.Unlock()
		return c2.consumed > c2before
	})
	c1.mu.Lock()
	if c1.consumed == 0 {
		t.Error("first member consumed nothing")
	}
	c1.mu.Unlock()
	c1.stop(t)
	produce(t, b.Addr(), "orders", 300, 6, "d")
	waitFor(t, "records after the leave consumed", 60*time.Second, func() bool {
		return s.missing(endOffsets(t, adm, "orders")) == 0
	})
	waitFor(t, "commits at the log end", 30*time.Second, func() bool {
		return committedEqualsEnd(t, adm, "g", "orders")
	})
	c2.stop(t)
	if !committedEqualsEnd(t, adm, "g", "orders") {
		t.Fatal("committed offsets moved away from the log end")
	}
}

func TestE2EEagerRange(t *testing.T) {
	runJoinLeave(t, "classic", kgo.Balancers(kgo.RangeBalancer()))
}

func TestE2ECooperativeSticky(t *testing.T) {
	runJoinLeave(t, "classic", kgo.Balancers(kgo.CooperativeStickyBalancer()))
}

func TestE2EKIP848(t *testing.T) {
	runJoinLeave(t, "consumer", kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
}

func TestE2EOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "t", 3)
	produce(t, b.Addr(), "t", 90, 3, "x")
	var s seen
	c := startConsumer(t, b.Addr(), "g", "t", &s)
	waitFor(t, "consumed", 30*time.Second, func() bool { return s.missing(endOffsets(t, adm, "t")) == 0 })
	c.stop(t)
	if !committedEqualsEnd(t, adm, "g", "t") {
		t.Fatal("not committed before restart")
	}
	b.Close()
	b2 := startBroker(t, dir)
	defer b2.Close()
	adm2 := newAdmin(t, b2.Addr())
	if !committedEqualsEnd(t, adm2, "g", "t") {
		t.Fatal("committed offsets lost across a restart")
	}
}

func TestE2EStaticMemberRestartWithoutRebalance(t *testing.T) {
	b := startBroker(t, t.TempDir())
	defer b.Close()
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "t", 4)
	produce(t, b.Addr(), "t", 100, 4, "x")
	var s seen
	eager := kgo.Balancers(kgo.RangeBalancer())
	a := startConsumer(t, b.Addr(), "g", "t", &s, eager, kgo.InstanceID("a"))
	bm := startConsumer(t, b.Addr(), "g", "t", &s, eager, kgo.InstanceID("b"))
	waitFor(t, "both members assigned", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := adm.DescribeGroups(ctx, "g")
		if err != nil {
			return false
		}
		g := d["g"]
		if g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			if a, ok := m.Assigned.AsConsumer(); !ok || len(a.Topics) == 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, "consumed", 30*time.Second, func() bool { return s.missing(endOffsets(t, adm, "t")) == 0 })
	before := bm.revokedCount()
	// Restart "a": a static member does not leave on close; the new
	// process rejoins with the same instance ID within the session.
	a.stop(t)
	a2 := startConsumer(t, b.Addr(), "g", "t", &s, eager, kgo.InstanceID("a"))
	defer a2.stop(t)
	produce(t, b.Addr(), "t", 100, 4, "y")
	waitFor(t, "consumed after restart", 30*time.Second, func() bool { return s.missing(endOffsets(t, adm, "t")) == 0 })
	if got := bm.revokedCount(); got != before {
		t.Fatalf("the other member was revoked %d partitions: the restart rebalanced", got-before)
	}
	bm.stop(t)
}

// A live consumer keeps going across a broker restart on the same
// address: the classic group comes back Stable from its persisted
// metadata (the member's heartbeats keep working), a KIP-848 member
// rejoins; either way nothing is lost.
func TestE2ELiveConsumerAcrossRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"cooperative", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := startBroker(t, dir)
			addr := b.Addr()
			adm := newAdmin(t, addr)
			createTopic(t, adm, "t", 3)
			produce(t, addr, "t", 60, 3, "x")
			var s seen
			c := startConsumer(t, addr, "g", "t", &s, tc.opts...)
			waitFor(t, "consumed before restart", 30*time.Second, func() bool { return s.missing(endOffsets(t, adm, "t")) == 0 })
			waitFor(t, "committed before restart", 30*time.Second, func() bool { return committedEqualsEnd(t, adm, "g", "t") })
			b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var b2 *broker.Broker
			var err error
			// The old listener's port may take a moment to be reusable.
			for range 50 {
				b2, err = broker.Start(ctx, broker.Config{DataDir: dir, KafkaAddr: addr, GroupInitialRebalanceDelay: -1})
				if err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b2.Close()
			produce(t, addr, "t", 60, 3, "y")
			waitFor(t, "consumed after restart", 60*time.Second, func() bool { return s.missing(endOffsets(t, adm, "t")) == 0 })
			waitFor(t, "committed after restart", 30*time.Second, func() bool { return committedEqualsEnd(t, adm, "g", "t") })
			c.stop(t)
		})
	}
}

// ownLog records partition ownership changes reported by members.
type ownLog struct {
	mu     sync.Mutex
	owner  map[int32]int // partition -> member
	errors []string
}

func (o *ownLog) opts(member int) []kgo.Opt {
	change := func(assigned bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, p := range m["t"] {
				cur, owned := o.owner[p]
				switch {
				case assigned && owned && cur != member:
					o.errors = append(o.errors, fmt.Sprintf("partition %d assigned to %d while owned by %d", p, member, cur))
				case assigned:
					o.owner[p] = member
				case owned && cur == member:
					delete(o.owner, p)
				}
			}
		}
	}
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(change(true)),
		kgo.OnPartitionsRevoked(change(false)),
		kgo.OnPartitionsLost(change(false)),
	}
}

// TestE2EChurnNoDoubleOwnership: members join and leave while records are
// produced. No record is lost, and no partition is ever assigned to a
// member while another still owns it (so no offset is committed by two
// members for the same stretch).
func TestE2EChurnNoDoubleOwnership(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"eager", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"cooperative", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, t.TempDir())
			defer b.Close()
			adm := newAdmin(t, b.Addr())
			createTopic(t, adm, "t", 8)
			var s seen
			ol := &ownLog{owner: map[int32]int{}}
			live := map[int]*consumer{}
			next := 0
			add := func() {
				live[next] = startConsumer(t, b.Addr(), "g", "t", &s, append(slices.Clone(tc.opts), ol.opts(next)...)...)
				next++
			}
			add()
			add()
			for round := range 4 {
				produce(t, b.Addr(), "t", 80, 8, fmt.Sprint(round))
				if round%2 == 0 {
					add()
				} else {
					for id, c := range live {
						c.stop(t)
						delete(live, id)
						break
					}
				}
				time.Sleep(300 * time.Millisecond)
			}
			produce(t, b.Addr(), "t", 80, 8, "last")
			waitFor(t, "everything consumed", 60*time.Second, func() bool { return s.missing(endOffsets(t, adm, "t")) == 0 })
			waitFor(t, "commits at the log end", 60*time.Second, func() bool { return committedEqualsEnd(t, adm, "g", "t") })
			for _, c := range live {
				c.stop(t)
			}
			ol.mu.Lock()
			defer ol.mu.Unlock()
			for _, e := range ol.errors {
				t.Error(e)
			}
		})
	}
}

// A KIP-848 static member (group.instance.id) restarting keeps its
// partitions and the other member is not disturbed.
func TestE2EKIP848StaticRestart(t *testing.T) {
	b := startBroker(t, t.TempDir())
	defer b.Close()
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "t", 4)
	produce(t, b.Addr(), "t", 100, 4, "x")
	var s seen
	opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}
	a := startConsumer(t, b.Addr(), "g", "t", &s, append(slices.Clone(opts), kgo.InstanceID("a"))...)
	bm := startConsumer(t, b.Addr(), "g", "t", &s, append(slices.Clone(opts), kgo.InstanceID("b"))...)
	describe := func() map[string]int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := adm.DescribeConsumerGroups(ctx, "g")
		if err != nil {
			return nil
		}
		out := map[string]int{}
		for _, m := range d["g"].Members {
			if m.InstanceID != nil {
				n := 0
				for _, ps := range m.Assignment {
					n += len(ps)
				}
				out[*m.InstanceID] = n
			}
		}
		return out
	}
	waitFor(t, "both static members assigned", 30*time.Second, func() bool {
		d := describe()
		return d["a"] == 2 && d["b"] == 2
	})
	waitFor(t, "consumed", 30*time.Second, func() bool { return s.missing(endOffsets(t, adm, "t")) == 0 })
	before := bm.revokedCount()
	a.stop(t)
	// Longer than b's heartbeat interval (1s): had a left for good, b would
	// take its partitions now and give them back when a returns.
	time.Sleep(2500 * time.Millisecond)
	if d := describe(); d["b"] != 2 {
		t.Fatalf("b took the static member's partitions while it was away: %v", d)
	}
	a2 := startConsumer(t, b.Addr(), "g", "t", &s, append(slices.Clone(opts), kgo.InstanceID("a"))...)
	defer a2.stop(t)
	produce(t, b.Addr(), "t", 100, 4, "y")
	waitFor(t, "consumed after the restart", 30*time.Second, func() bool { return s.missing(endOffsets(t, adm, "t")) == 0 })
	if d := describe(); d["a"] != 2 || d["b"] != 2 {
		t.Fatalf("assignment after restart: %v", d)
	}
	if got := bm.revokedCount(); got != before {
		t.Fatalf("the other member lost %d partitions during the static restart", got-before)
	}
	bm.stop(t)
}

// Exactly-once consume-transform-produce with franz-go's
// GroupTransactSession: input offsets are committed inside the producer's
// transactions (TxnOffsetCommit + markers in __consumer_offsets), so the
// committed offsets and the read_committed output agree: every input
// record appears exactly once downstream.
func TestE2ETransactionalOffsets(t *testing.T) {
	b := startBroker(t, t.TempDir())
	defer b.Close()
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "in", 2)
	createTopic(t, adm, "out", 2)
	produce(t, b.Addr(), "in", 200, 2, "x")

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(b.Addr()),
		kgo.TransactionalID("eos"),
		kgo.ConsumerGroup("eos-group"),
		kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	moved := 0
	for moved < 200 && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollFetches(pctx)
		pcancel()
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: "out", Partition: r.Partition, Value: r.Value}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			moved += fs.NumRecords()
		}
	}
	if moved != 200 {
		t.Fatalf("moved %d records", moved)
	}
	if !committedEqualsEnd(t, adm, "eos-group", "in") {
		t.Fatal("input offsets not committed by the transactions")
	}
	// read_committed output: exactly the 200 input values.
	rc, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	vals := map[string]int{}
	for len(vals) < 200 && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { vals[string(r.Value)]++ })
		pcancel()
	}
	for v, n := range vals {
		if n != 1 {
			t.Fatalf("%s delivered %d times", v, n)
		}
	}
	if len(vals) != 200 {
		t.Fatalf("%d distinct output records", len(vals))
	}
}
