package group_test

// BenchmarkRebalance is the measurement: a group of 4 consumers
// over 48 partitions under steady produce; a 5th member joins, then one of
// the first four leaves. For each protocol (eager range, cooperative-sticky,
// KIP-848 with the server-side uniform assignor) it reports, per event:
//
//	paused     partitions revoked from (or lost by) a member during the
//	           event window, from the clients' rebalance callbacks
//	unowned    for those, the time from revoke to the next assignment
//	           (max and median)
//	max gap    the longest stretch without a consumed record on any
//	           partition (normal: a few produce ticks)
//	lag-spike  the largest rise of the group's lag (records produced and
//	           not yet consumed) over its level before the event
//
// Run: go test -run XXX -bench Rebalance -benchtime 1x ./broker/group
// Times are wall clock on a shared machine: compare protocols within one
// run, not across machines.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	benchPartitions = 48
	produceTick     = 20 * time.Millisecond
	pauseThreshold  = 5 * produceTick
	eventWindow     = 12 * time.Second
)

// tracker records, per partition, when records were consumed.
type tracker struct {
	mu       sync.Mutex
	times    [benchPartitions][]time.Time
	seen     [benchPartitions]map[int64]bool
	dups     int
	consumed atomic.Int64 // unique records
	owner    []ownEvent   // assignment changes from the members' callbacks
}

type ownEvent struct {
	at        time.Time
	member    int
	partition int32
	assigned  bool // false: revoked or lost
}

func (t *tracker) own(member int, m map[string][]int32, assigned bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range m["bench"] {
		t.owner = append(t.owner, ownEvent{now, member, p, assigned})
	}
}

// owners replays the ownership events: partition -> member.
func (t *tracker) owners() map[int32]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := map[int32]int{}
	for _, e := range t.owner {
		if e.assigned {
			cur[e.partition] = e.member
		} else if o, ok := cur[e.partition]; ok && o == e.member {
			delete(cur, e.partition)
		}
	}
	return cur
}

// unowned returns, for each partition revoked in [from, to], how long it
// stayed without an owner (until the next assignment, or to).
func (t *tracker) unowned(from, to time.Time) map[int32]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int32]time.Duration{}
	revokedAt := map[int32]time.Time{}
	for _, e := range t.owner {
		if e.at.Before(from) || e.at.After(to) {
			continue
		}
		if !e.assigned {
			if _, ok := revokedAt[e.partition]; !ok {
				revokedAt[e.partition] = e.at
			}
			continue
		}
		if r, ok := revokedAt[e.partition]; ok {
			out[e.partition] = max(out[e.partition], e.at.Sub(r))
			delete(revokedAt, e.partition)
		}
	}
	for p, r := range revokedAt {
		out[p] = max(out[p], to.Sub(r))
	}
	return out
}

func newTracker() *tracker {
	t := &tracker{}
	for i := range t.seen {
		t.seen[i] = map[int64]bool{}
	}
	return t
}

func (t *tracker) add(r *kgo.Record, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := r.Partition
	if t.seen[p][r.Offset] {
		t.dups++
		return
	}
	t.seen[p][r.Offset] = true
	t.times[p] = append(t.times[p], now)
	t.consumed.Add(1)
}

// gaps returns, per partition, the longest interval without consumption
// within [from, to] (counting from the last consumption before from).
func (t *tracker) gaps(from, to time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Duration, benchPartitions)
	for p := range benchPartitions {
		last := from
		for _, ts := range t.times[p] {
			if ts.Before(from) {
				last = ts
				continue
			}
			if ts.After(to) {
				break
			}
			out[p] = max(out[p], ts.Sub(last))
			last = ts
		}
		out[p] = max(out[p], to.Sub(last))
	}
	return out
}

type benchMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startBenchMember(b *testing.B, addr string, tr *tracker, idx int, opts ...kgo.Opt) *benchMember {
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup("bench"),
		kgo.ConsumeTopics("bench"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(time.Second),
		kgo.SessionTimeout(10 * time.Second),
		kgo.AutoCommitInterval(500 * time.Millisecond),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.own(idx, m, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.own(idx, m, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.own(idx, m, false) }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &benchMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) { tr.add(r, now) })
		}
	}()
	return m
}

func (m *benchMember) stop() {
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.cl.CommitUncommittedOffsets(ctx)
	m.cl.Close() // leaves the group
}

type eventResult struct {
	paused            int           // partitions revoked (stopped) during the window
	maxUnowned, p50   time.Duration // revoke -> next assignment, over paused partitions
	maxGap            time.Duration // longest stretch without a consumed record, any partition
	lagSpike, lagBase int64
}

func measure(tr *tracker, produced *atomic.Int64, at time.Time, lagSamples *[]lagSample, mu *sync.Mutex) eventResult {
	var r eventResult
	un := tr.unowned(at, at.Add(eventWindow))
	var ds []time.Duration
	for _, d := range un {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	r.paused = len(ds)
	if len(ds) > 0 {
		r.maxUnowned, r.p50 = ds[len(ds)-1], ds[len(ds)/2]
	}
	r.maxGap = slices.Max(tr.gaps(at, at.Add(eventWindow)))
	mu.Lock()
	defer mu.Unlock()
	var before []int64
	var peak int64
	for _, s := range *lagSamples {
		switch {
		case s.at.Before(at) && s.at.After(at.Add(-3*time.Second)):
			before = append(before, s.lag)
		case !s.at.Before(at) && s.at.Before(at.Add(eventWindow)):
			peak = max(peak, s.lag)
		}
	}
	if len(before) > 0 {
		slices.Sort(before)
		r.lagBase = before[len(before)/2]
	}
	r.lagSpike = max(peak-r.lagBase, 0)
	return r
}

type lagSample struct {
	at  time.Time
	lag int64
}

func runRebalanceScenario(b *testing.B, name string, opts ...kgo.Opt) (join, leave eventResult, dups int) {
	bk := startBroker(b, b.TempDir())
	defer bk.Close()
	addr := bk.Addr()
	adm := newAdmin(b, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := adm.CreateTopic(ctx, benchPartitions, 1, nil, "bench"); err != nil {
		b.Fatal(err)
	}
	cancel()

	tr := newTracker()
	var produced atomic.Int64
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	stopProduce := make(chan struct{})
	var wg sync.WaitGroup
	var lagMu sync.Mutex
	var samples []lagSample
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(produceTick)
		defer tick.Stop()
		for {
			select {
			case <-stopProduce:
				return
			case <-tick.C:
			}
			for p := range int32(benchPartitions) {
				prod.Produce(context.Background(), &kgo.Record{Topic: "bench", Partition: p, Value: []byte("x")}, func(_ *kgo.Record, err error) {
					if err == nil {
						produced.Add(1)
					}
				})
			}
		}
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopProduce:
				return
			case now := <-tick.C:
				lagMu.Lock()
				samples = append(samples, lagSample{now, produced.Load() - tr.consumed.Load()})
				lagMu.Unlock()
			}
		}
	}()

	// Members start 300ms apart so their heartbeats (1s) are spread over
	// the interval, as in a real deployment; started together they would
	// heartbeat in lockstep and every rebalance would look instantaneous.
	var members []*benchMember
	for i := range 4 {
		members = append(members, startBenchMember(b, addr, tr, i, opts...))
		time.Sleep(300 * time.Millisecond)
	}
	// steady: every partition owned, by as many members as are live, and
	// consumed continuously for the last 2s.
	steady := func(live int) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			time.Sleep(250 * time.Millisecond)
			now := time.Now()
			own := tr.owners()
			distinct := map[int]bool{}
			for _, m := range own {
				distinct[m] = true
			}
			if len(own) == benchPartitions && len(distinct) == live && slices.Max(tr.gaps(now.Add(-2*time.Second), now)) < pauseThreshold {
				return
			}
			if now.After(deadline) {
				b.Fatalf("%s: group of %d never became steady (%d partitions owned by %d members)", name, live, len(own), len(distinct))
			}
		}
	}
	steady(4)
	time.Sleep(150 * time.Millisecond) // off the warm-up's phase
	joinAt := time.Now()
	members = append(members, startBenchMember(b, addr, tr, 4, opts...))
	time.Sleep(eventWindow)
	steady(5)
	time.Sleep(150 * time.Millisecond)
	leaveAt := time.Now()
	members[0].stop()
	time.Sleep(eventWindow)

	join = measure(tr, &produced, joinAt, &samples, &lagMu)
	leave = measure(tr, &produced, leaveAt, &samples, &lagMu)
	close(stopProduce)
	wg.Wait()
	for _, m := range members[1:] {
		m.stop()
	}
	tr.mu.Lock()
	dups = tr.dups
	tr.mu.Unlock()
	return join, leave, dups
}

func BenchmarkRebalance(b *testing.B) {
	protocols := []struct {
		name string
		opts []kgo.Opt
	}{
		{"eager-range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848-uniform", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}},
	}
	var table []string
	for _, p := range protocols {
		b.Run(p.name, func(b *testing.B) {
			for range b.N {
				join, leave, dups := runRebalanceScenario(b, p.name, p.opts...)
				b.ReportMetric(float64(join.paused), "join-paused")
				b.ReportMetric(float64(join.maxUnowned.Milliseconds()), "join-max-unowned-ms")
				b.ReportMetric(float64(join.lagSpike), "join-lag-spike")
				b.ReportMetric(float64(join.maxGap.Milliseconds()), "join-max-gap-ms")
				b.ReportMetric(float64(leave.maxGap.Milliseconds()), "leave-max-gap-ms")
				b.ReportMetric(float64(leave.paused), "leave-paused")
				b.ReportMetric(float64(leave.maxUnowned.Milliseconds()), "leave-max-unowned-ms")
				b.ReportMetric(float64(leave.lagSpike), "leave-lag-spike")
				for _, ev := range []struct {
					name string
					r    eventResult
				}{{"join 5th", join}, {"leave 1", leave}} {
					table = append(table, fmt.Sprintf("| %s | %s | %d/48 | %v | %v | %v | %d (base %d) |", p.name, ev.name, ev.r.paused,
						ev.r.maxUnowned.Round(time.Millisecond), ev.r.p50.Round(time.Millisecond), ev.r.maxGap.Round(time.Millisecond), ev.r.lagSpike, ev.r.lagBase))
				}
				table = append(table, fmt.Sprintf("| %s | duplicates delivered | %d | | | | |", p.name, dups))
			}
		})
	}
	b.Logf("\n| protocol | event | partitions paused | max unowned | median unowned | max consume gap | lag spike (records) |\n|---|---|---|---|---|---|---|\n%s",
		joinLines(table))
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += l + "\n"
	}
	return out
}
