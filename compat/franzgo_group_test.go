package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go consumer groups, eager (range) and cooperative-sticky: two
// members of one group over a 6-partition topic under steady produce; c1
// reads alone, c2 joins, c2 leaves. Each member polls with
// BlockRebalanceOnPoll and commits what it polled synchronously before
// allowing a rebalance, so no record may be read twice. Checked: the
// partitions are split evenly between the live members; with the eager
// balancer the join revokes all of c1's partitions, with cooperative-sticky
// only those that move; every acknowledged record is consumed exactly once,
// in offset order; the group ends committed at the end offsets.
func TestFranzGoGroupJoinLeave(t *testing.T) {
	for _, tc := range []struct {
		name        string
		balancer    kgo.GroupBalancer
		cooperative bool
	}{
		{"eager-range", kgo.RangeBalancer(), false},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), true},
	} {
		t.Run(tc.name, func(t *testing.T) { testFranzGoGroup(t, tc.balancer, tc.cooperative) })
	}
}

func testFranzGoGroup(t *testing.T, balancer kgo.GroupBalancer, cooperative bool) {
	addr := startWeir(t).Addr()
	const topic, group = "compat-franz-go-group", "weir-compat-franz-go-group"
	createTopic(t, addr, topic, numPartitions)
	g := &groupRun{t: t, members: map[string]*groupMember{}}
	prod := startSteadyProducer(t, addr, topic)

	var mu sync.Mutex
	revokedDuringJoin := map[string][]int32{}
	joining := false

	start := func(name string) func() {
		m := g.member(name)
		onAssigned := func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			g.mu.Lock()
			m.claims = append(m.claims, a[topic]...)
			g.mu.Unlock()
		}
		onRevoked := func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			mu.Lock()
			if joining {
				revokedDuringJoin[name] = append(revokedDuringJoin[name], r[topic]...)
			}
			mu.Unlock()
			g.mu.Lock()
			drop := map[int32]bool{}
			for _, p := range r[topic] {
				drop[p] = true
			}
			var keep []int32
			for _, p := range m.claims {
				if !drop[p] {
					keep = append(keep, p)
				}
			}
			m.claims = keep
			g.mu.Unlock()
		}
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(addr), kgo.ClientID(name),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(balancer),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.HeartbeatInterval(300*time.Millisecond), kgo.SessionTimeout(6*time.Second),
			kgo.FetchMaxWait(100*time.Millisecond),
			kgo.OnPartitionsAssigned(onAssigned), kgo.OnPartitionsRevoked(onRevoked),
			kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, l map[string][]int32) {
				g.fail(fmt.Errorf("%s: partitions lost: %v", name, l))
				onRevoked(ctx, cl, l)
			}),
		)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					cl.AllowRebalance()
					return
				}
				fs.EachError(func(_ string, p int32, err error) { g.fail(fmt.Errorf("%s: fetch %d: %w", name, p, err)) })
				var recs []*kgo.Record
				fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
				if len(recs) > 0 {
					// Not ctx: a stop while the commit is under way must not
					// cancel it, or the next owner reads the records again
					// (correct at-least-once, but this test checks that a
					// clean leave hands over without duplicates).
					cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := cl.CommitRecords(cctx, recs...)
					ccancel()
					if err != nil {
						g.fail(fmt.Errorf("%s: commit: %w", name, err))
					}
					for _, r := range recs {
						g.consumed(m, record{Key: string(r.Key), Value: string(r.Value), Partition: r.Partition, Offset: r.Offset})
					}
				}
				cl.AllowRebalance()
			}
		}()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				<-done
				cl.Close() // LeaveGroup
			})
		}
		t.Cleanup(stop)
		return stop
	}

	start("c1")
	alone := g.waitSplit("c1 alone", "c1")
	mu.Lock()
	joining = true
	mu.Unlock()
	stop2 := start("c2")
	joined := g.waitSplit("c2 joined", "c1", "c2")
	mu.Lock()
	joining = false
	gaveUp := sorted(revokedDuringJoin["c1"])
	mu.Unlock()
	if cooperative {
		if fmt.Sprint(gaveUp) != fmt.Sprint(joined["c2"]) {
			t.Errorf("c2 joined: c1 revoked %v of %v, c2 got %v; cooperative-sticky revokes only what moves", gaveUp, alone["c1"], joined["c2"])
		}
	} else if fmt.Sprint(gaveUp) != fmt.Sprint(allPartitions()) {
		t.Errorf("c2 joined: c1 revoked %v; the eager protocol revokes everything", gaveUp)
	}
	stop2()
	left := g.waitSplit("c2 left", "c1")

	acked := prod.stop()
	g.waitConsumed(acked)
	g.check(acked)
	checkGroupCommitted(t, addr, group, topic)
	t.Logf("%d records acknowledged and consumed once; c1 alone %v; c2 joined %v (c1 revoked %v); c2 left %v",
		len(acked), alone, joined, gaveUp, left)
}
