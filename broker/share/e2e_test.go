package share_test

// End-to-end tests: franz-go's share group consumer (kgo.ShareGroup) and
// raw KIP-932 requests against an in-process weir broker on 127.0.0.1:0.
// Every wait is bounded by a deadline; nothing asserts on speed.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker"
)

func startBroker(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.GroupInitialRebalanceDelay = -1
	b, err := broker.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, ctx context.Context, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// produceKeys produces keys 0..n-1 round-robin over the partitions.
func produceKeys(t *testing.T, ctx context.Context, addr, topic string, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func setGroupConfigs(t testing.TB, ctx context.Context, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("set group configs: %v (%v)", err, resp.Resources[0].ErrorMessage)
	}
}

// delivery is one record a member received.
type delivery struct {
	member string
	key    int
	count  int32
}

// consumeShare runs members share consumers of group until stop returns
// true or ctx ends; decide is asked, per record, how to acknowledge it.
// Once all members joined, ready runs (e.g. to produce).
func consumeShare(t *testing.T, ctx context.Context, addr, group, topic string, members int,
	decide func(r *kgo.Record) kgo.AckStatus, stop func([]delivery) bool, ready func()) []delivery {
	t.Helper()
	var (
		mu   sync.Mutex
		all  []delivery
		wg   sync.WaitGroup
		done = make(chan struct{})
		once sync.Once
	)
	for m := range members {
		name := fmt.Sprintf("m%d", m)
		cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ShareGroup(group), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ShareMaxRecords(25))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				default:
				}
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				fs := cl.PollFetches(pctx)
				cancel()
				fs.EachError(func(tp string, p int32, err error) {
					if err != context.DeadlineExceeded && err != context.Canceled {
						t.Errorf("%s: fetch %s/%d: %v", name, tp, p, err)
					}
				})
				n := 0
				fs.EachRecord(func(r *kgo.Record) {
					k, _ := strconv.Atoi(string(r.Key))
					r.Ack(decide(r))
					mu.Lock()
					all = append(all, delivery{name, k, r.DeliveryCount()})
					mu.Unlock()
					n++
				})
				if n > 0 {
					fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
					if err := cl.FlushAcks(fctx); err != nil && ctx.Err() == nil {
						t.Errorf("%s: flush acks: %v", name, err)
					}
					fcancel()
				}
				mu.Lock()
				if stop(all) {
					once.Do(func() { close(done) })
				}
				mu.Unlock()
			}
		}()
	}
	waitMembers(t, ctx, addr, group, members)
	ready()
	wg.Wait()
	if ctx.Err() != nil {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("deadline: %d deliveries so far", len(all))
	}
	return all
}

// Several members of one share group consume a 2-partition topic: every
// record is delivered exactly once (all accepted on first delivery), and
// the work is spread over more than one member.
func TestShareGroupMembersSplitRecords(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 60*time.Second)
	admin := newClient(t, b.Addr())
	const topic, group, n = "work", "workers", 400
	createTopic(t, ctx, admin, topic, 2)
	setGroupConfigs(t, ctx, admin, group, "share.auto.offset.reset", "earliest")
	got := consumeShare(t, ctx, b.Addr(), group, topic, 3,
		func(*kgo.Record) kgo.AckStatus { return kgo.AckAccept },
		func(all []delivery) bool { return len(all) >= n },
		func() { produceKeys(t, ctx, b.Addr(), topic, n) })
	seen := map[int]string{}
	members := map[string]int{}
	for _, d := range got {
		if prev, dup := seen[d.key]; dup {
			t.Fatalf("key %d delivered twice (to %s and %s) though accepted", d.key, prev, d.member)
		}
		if d.count != 1 {
			t.Fatalf("key %d delivery count %d, want 1", d.key, d.count)
		}
		seen[d.key] = d.member
		members[d.member]++
	}
	if len(seen) != n {
		t.Fatalf("%d distinct keys delivered, want %d", len(seen), n)
	}
	if len(members) < 2 {
		t.Fatalf("one member got everything: %v", members)
	}
	checkStartOffsets(t, ctx, admin, group, topic, map[int32]int64{0: n / 2, 1: n / 2})
}

// Released records are redelivered (delivery count 2), here to whichever
// member acquires them next; all end accepted, once.
func TestShareGroupReleasedRecordsRedelivered(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 60*time.Second)
	admin := newClient(t, b.Addr())
	const topic, group, n = "redo", "redoers", 100
	createTopic(t, ctx, admin, topic, 1)
	setGroupConfigs(t, ctx, admin, group, "share.auto.offset.reset", "earliest")
	produceKeys(t, ctx, b.Addr(), topic, n)

	accepted := map[int]int{}
	got := consumeShare(t, ctx, b.Addr(), group, topic, 2,
		func(r *kgo.Record) kgo.AckStatus {
			if r.DeliveryCount() == 1 {
				return kgo.AckRelease
			}
			return kgo.AckAccept
		},
		func(all []delivery) bool {
			acc := 0
			for _, d := range all {
				if d.count >= 2 {
					acc++
				}
			}
			return acc >= n
		}, func() {})
	for _, d := range got {
		if d.count >= 2 {
			accepted[d.key]++
		}
	}
	for k := range n {
		if accepted[k] != 1 {
			t.Fatalf("key %d accepted %d times, want 1 (deliveries %v)", k, accepted[k], got)
		}
	}
	checkStartOffsets(t, ctx, admin, group, topic, map[int32]int64{0: n})
}

// A record released on every delivery is delivered exactly
// share.delivery.count.limit times, then archived: the start offset moves
// past it and nobody sees it again.
func TestShareGroupDeliveryCountLimitArchives(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := startBroker(t, broker.Config{Registerer: reg})
	ctx := testCtx(t, 60*time.Second)
	admin := newClient(t, b.Addr())
	const topic, group, n, limit = "poison", "poisoned", 20, 3
	createTopic(t, ctx, admin, topic, 1)
	setGroupConfigs(t, ctx, admin, group, "share.auto.offset.reset", "earliest", "share.delivery.count.limit", strconv.Itoa(limit))
	produceKeys(t, ctx, b.Addr(), topic, n)

	got := consumeShare(t, ctx, b.Addr(), group, topic, 2,
		func(*kgo.Record) kgo.AckStatus { return kgo.AckRelease },
		func(all []delivery) bool { return len(all) >= n*limit }, func() {})
	per := map[int]int{}
	for _, d := range got {
		per[d.key]++
		if d.count > limit {
			t.Fatalf("key %d delivered with count %d > limit %d", d.key, d.count, limit)
		}
	}
	for k := range n {
		if per[k] != limit {
			t.Fatalf("key %d delivered %d times, want %d", k, per[k], limit)
		}
	}
	checkStartOffsets(t, ctx, admin, group, topic, map[int32]int64{0: n})
	// Nothing is left to deliver: a new member gets nothing.
	more := newClient(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ShareGroup(group), kgo.FetchMaxWait(200*time.Millisecond))
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if fs := more.PollFetches(pctx); fs.NumRecords() != 0 {
		t.Fatalf("archived records delivered again: %d", fs.NumRecords())
	}
	// The metrics count what happened.
	for name, want := range map[string]float64{
		"weir_share_records_acquired_total":                                       n * limit,
		"weir_share_records_redelivered_total":                                    n * (limit - 1),
		`weir_share_records_acknowledged_total{type="release"}`:                   n * limit,
		`weir_share_group_members{group="poisoned"}`:                              3,
		`weir_share_partition_lag{group="poisoned",partition="0",topic="poison"}`: 0,
	} {
		if got := gathered(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// gathered is the value of the metric named with its labels (sorted, as
// Prometheus prints them), or -1.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			id := mf.GetName()
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				id += "{" + strings.Join(ls, ",") + "}"
			}
			if id != name {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

// waitMembers waits until group has n members that all know the current
// assignment (member epoch = assignment epoch, ShareGroupDescribe): until
// then an early member still fetches what it was assigned alone.
func waitMembers(t *testing.T, ctx context.Context, addr, group string, n int) {
	t.Helper()
	cl := newClient(t, addr)
	for {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("describe %s: %v", group, err)
		}
		if g := resp.Groups[0]; g.ErrorCode == 0 && len(g.Members) == n {
			current := true
			for _, m := range g.Members {
				current = current && m.MemberEpoch == g.AssignmentEpoch
			}
			if current {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s never had %d members", group, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func checkStartOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic = topic
	for p := range want {
		rt.Partitions = append(rt.Partitions, p)
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int32]int64{}
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			got[p.Partition] = p.StartOffset
			if p.Lag != 0 {
				got[p.Partition] = -100 - p.Lag
			}
		}
		ok := true
		for p, o := range want {
			ok = ok && got[p] == o
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("start offsets %v (lag as -100-lag), want %v with lag 0", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
