package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sarama consumer group with the sticky balance strategy (an eager
// protocol: every rebalance revokes everything, the strategy hands the
// same partitions back). Three members of one group over a 6-partition
// topic under steady produce: c1 reads alone, c2 joins, c3 joins, c3
// leaves. Checked:
//
//   - every generation splits the partitions between the live members,
//     disjointly and evenly, all members agreeing on the generation;
//   - stickiness: on a join each old member keeps a subset of what it had;
//     on the leave each remaining member keeps everything it had;
//   - every acknowledged record is consumed exactly once (each is committed
//     synchronously right after it is read, so no new owner re-reads it),
//     in offset order, and the group ends with committed = end offset.
func TestSaramaStickyGroup(t *testing.T) {
	b := startWeir(t)
	addr := b.Addr()
	const topic, group = "compat-sarama-sticky", "weir-compat-sarama-sticky"
	createTopic(t, addr, topic, numPartitions)

	g := &groupRun{t: t, members: map[string]*groupMember{}}
	prod := startSteadyProducer(t, addr, topic)

	cfg := sarama.NewConfig()
	cfg.ClientID = "weir-compat"
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false // committed synchronously per record
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond

	start := func(name string) func() {
		cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
		if err != nil {
			t.Fatalf("%s: consumer group: %v", name, err)
		}
		m := g.member(name)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, (*saramaMember)(m)); err != nil && ctx.Err() == nil {
					g.fail(fmt.Errorf("%s: consume: %w", name, err))
					return
				}
			}
		}()
		go func() {
			for err := range cg.Errors() {
				g.fail(fmt.Errorf("%s: %w", name, err))
			}
		}()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				<-done
				if err := cg.Close(); err != nil { // LeaveGroup
					t.Errorf("%s: close: %v", name, err)
				}
			})
		}
		t.Cleanup(stop)
		return stop
	}

	start("c1")
	gen1 := g.waitSplit("c1 alone", "c1")
	start("c2")
	gen2 := g.waitSplit("c2 joined", "c1", "c2")
	stop3 := start("c3")
	gen3 := g.waitSplit("c3 joined", "c1", "c2", "c3")
	stop3()
	gen4 := g.waitSplit("c3 left", "c1", "c2")

	for _, c := range []string{"c1", "c2"} {
		if !subset(gen3[c], gen2[c]) {
			t.Errorf("c3 joined: %s went from %v to %v; the sticky strategy keeps a subset", c, gen2[c], gen3[c])
		}
		if !subset(gen3[c], gen4[c]) {
			t.Errorf("c3 left: %s went from %v to %v; the sticky strategy keeps what it had", c, gen3[c], gen4[c])
		}
	}
	if !subset(gen2["c1"], gen1["c1"]) {
		t.Errorf("c2 joined: c1 went from %v to %v", gen1["c1"], gen2["c1"])
	}

	acked := prod.stop()
	g.waitConsumed(acked)
	g.check(acked)
	checkGroupCommitted(t, addr, group, topic)
	t.Logf("%d records acknowledged and consumed once; assignments: alone %v, c2 joined %v, c3 joined %v, c3 left %v",
		len(acked), gen1, gen2, gen3, gen4)
}

// steadyProducer produces keyed records to a topic, one at a time with
// acks=all, until stopped, and remembers where each one was acknowledged.
type steadyProducer struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan struct{}
	acked  []record
	err    error
}

func startSteadyProducer(t *testing.T, addr, topic string) *steadyProducer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &steadyProducer{t: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cl.Close()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(fmt.Sprintf("value-%d", i))}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				p.err = fmt.Errorf("produce key-%d: %w", i, err)
				return
			}
			p.acked = append(p.acked, record{Key: string(r.Key), Value: string(r.Value), Partition: r.Partition, Offset: r.Offset})
		}
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

// stop ends production and returns every acknowledged record.
func (p *steadyProducer) stop() []record {
	p.cancel()
	<-p.done
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return p.acked
}

// groupRun records what the members of one group owned and read.
type groupRun struct {
	t       *testing.T
	mu      sync.Mutex
	members map[string]*groupMember
	read    map[[2]int64]string // (partition, offset) -> member that read it
	ordered []record
	errs    []error
}

type groupMember struct {
	run    *groupRun
	name   string
	gen    int32
	claims []int32 // nil between generations
	n      int     // records read
}

func (g *groupRun) member(name string) *groupMember {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := &groupMember{run: g, name: name}
	g.members[name] = m
	return m
}

func (g *groupRun) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, err)
}

// consumed records that member m read r; a record read twice is an error.
func (g *groupRun) consumed(m *groupMember, r record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.read == nil {
		g.read = map[[2]int64]string{}
	}
	at := [2]int64{int64(r.Partition), r.Offset}
	if by, dup := g.read[at]; dup {
		g.errs = append(g.errs, fmt.Errorf("partition %d offset %d read twice (by %s, then %s)", r.Partition, r.Offset, by, m.name))
	}
	g.read[at] = m.name
	g.ordered = append(g.ordered, r)
	m.n++
}

// waitSplit waits until exactly the named members own the partitions, in
// one generation, disjointly and evenly, and each has read records since;
// it returns each one's partitions.
func (g *groupRun) waitSplit(what string, names ...string) map[string][]int32 {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var snap map[string][]int32
	var readAt map[string]int
	for {
		g.mu.Lock()
		errs := g.errs
		cur, gen, ok := map[string][]int32{}, int32(-1), true
		owners := map[int32]int{}
		for name, m := range g.members {
			if len(m.claims) == 0 {
				continue
			}
			cur[name] = sorted(m.claims)
			if gen != -1 && m.gen != gen {
				ok = false
			}
			gen = m.gen
			for _, p := range m.claims {
				owners[p]++
			}
		}
		ok = ok && len(cur) == len(names) && len(owners) == numPartitions
		for _, name := range names {
			ok = ok && len(cur[name]) == numPartitions/len(names)
		}
		for _, c := range owners {
			ok = ok && c == 1
		}
		counts := map[string]int{}
		for name, m := range g.members {
			counts[name] = m.n
		}
		g.mu.Unlock()
		if len(errs) > 0 {
			g.t.Fatalf("%s: %v", what, errs)
		}
		switch {
		case !ok:
			snap, readAt = nil, nil
		case snap == nil || fmt.Sprint(snap) != fmt.Sprint(cur):
			snap, readAt = cur, counts
		default:
			all := true
			for _, name := range names {
				all = all && counts[name] >= readAt[name]+3
			}
			if all {
				return snap
			}
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: partitions not split between %v and read within 30s (owned: %v)", what, names, cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitConsumed waits until every acknowledged record was read.
func (g *groupRun) waitConsumed(acked []record) {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g.mu.Lock()
		missing := 0
		for _, r := range acked {
			if _, ok := g.read[[2]int64{int64(r.Partition), r.Offset}]; !ok {
				missing++
			}
		}
		errs := g.errs
		g.mu.Unlock()
		if len(errs) > 0 {
			g.t.Fatal(errs)
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%d of %d acknowledged records not read within 30s", missing, len(acked))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check asserts that what was read is exactly what was acknowledged, in
// offset order per partition.
func (g *groupRun) check(acked []record) {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) > 0 {
		g.t.Fatal(g.errs)
	}
	want := map[[2]int64]record{}
	for _, r := range acked {
		want[[2]int64{int64(r.Partition), r.Offset}] = r
	}
	last := map[int32]int64{}
	for _, r := range g.ordered {
		w, ok := want[[2]int64{int64(r.Partition), r.Offset}]
		if !ok {
			// Read after production stopped? Only acknowledged records exist.
			g.t.Fatalf("read partition %d offset %d (%s), never acknowledged", r.Partition, r.Offset, r.Key)
		}
		if w.Key != r.Key || w.Value != r.Value {
			g.t.Fatalf("partition %d offset %d: read %s=%s, acknowledged %s=%s", r.Partition, r.Offset, r.Key, r.Value, w.Key, w.Value)
		}
		if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
			g.t.Fatalf("partition %d: offset %d read after %d", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
	}
}

// saramaMember is a groupMember as a sarama.ConsumerGroupHandler.
type saramaMember groupMember

func (h *saramaMember) Setup(sess sarama.ConsumerGroupSession) error {
	m := (*groupMember)(h)
	m.run.mu.Lock()
	defer m.run.mu.Unlock()
	m.gen = sess.GenerationID()
	for _, ps := range sess.Claims() {
		m.claims = append(m.claims, ps...)
	}
	return nil
}

func (h *saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	m := (*groupMember)(h)
	m.run.mu.Lock()
	defer m.run.mu.Unlock()
	m.claims = nil
	return nil
}

// ConsumeClaim reads, records and commits synchronously one record at a
// time, and stops at once when the generation ends: a record it did not
// commit is left for the next owner.
func (h *saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	m := (*groupMember)(h)
	for {
		select {
		case <-sess.Context().Done():
			return nil
		case msg, ok := <-claim.Messages():
			if !ok || sess.Context().Err() != nil {
				return nil
			}
			sess.MarkMessage(msg, "")
			sess.Commit() // errors arrive on the group's Errors channel
			m.run.consumed(m, record{Key: string(msg.Key), Value: string(msg.Value), Partition: msg.Partition, Offset: msg.Offset})
		}
	}
}

// subset reports whether every partition of a is in b.
func subset(a, b []int32) bool {
	in := map[int32]bool{}
	for _, p := range b {
		in[p] = true
	}
	for _, p := range a {
		if !in[p] {
			return false
		}
	}
	return true
}
