package stream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/stream/internal/state"
)

// gate lets a test stall an instance's processing: while closed, the first
// order record processed blocks until it opens.
type gate struct {
	mu      sync.Mutex
	closed  bool
	open    chan struct{}
	blocked chan struct{} // closed once a record waits
	once    sync.Once
}

func newGate() *gate { return &gate{open: make(chan struct{}), blocked: make(chan struct{})} }

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
}

func (g *gate) pass() {
	g.mu.Lock()
	if !g.closed {
		g.mu.Unlock()
		return
	}
	ch := g.open
	g.once.Do(func() { close(g.blocked) })
	g.mu.Unlock()
	<-ch
}

// gatedShopTopology is shopTopology with the orders passing g first.
func gatedShopTopology(g *gate) func(*Builder) {
	return func(b *Builder) {
		orders := From(b, "orders", String(), String()).Peek(func(Record[string, string]) { g.pass() })
		customers := FromTable(b, "customers", String(), String(), "customers")
		Join(orders, customers, func(r Record[string, string], c string) (string, error) {
			return r.Value + "@" + c, nil
		}).To("enriched", String(), String())
	}
}

// committedOffsets returns the group's committed offsets of topic by
// partition.
func (b *testBroker) committedOffsets(group, topic string) map[int32]int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		b.t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) { out[o.Partition] = max(0, o.At) })
	return out
}

// standbyFetched returns how far the running standby of id fetched (and
// applied) its changelogs; nil if none runs.
func standbyFetched(m *standbyManager, id taskID) (fetched, applied map[string]int64) {
	m.mu.Lock()
	st := m.running[id]
	m.mu.Unlock()
	if st == nil {
		return nil, nil
	}
	return st.fetched(), st.positions()
}

// TestStandbyTableTakeover runs the stream-table join on two instances with
// one standby replica each, under both guarantees. The first instance
// stalls in the middle of its orders (nothing more committed), and the table
// gets updates it has not processed; the second instance's standby copies
// of the first's tasks fetch them but never apply (or checkpoint) them past
// the group's committed offset. The first instance is then killed: the
// second restores only the table records committed since its standby's last
// checkpoint (not the whole table), and every order, before and after the
// takeover, is joined with the table as of its own position.
func TestStandbyTableTakeover(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { standbyTableTakeoverRun(t, g) })
	}
}

func standbyTableTakeoverRun(t *testing.T, g Guarantee) {
	b := startBrokerFor(t, g)
	committed := g == ExactlyOnce
	const parts, customers = 2, 60
	b.createCompacted("customers", parts)
	b.createTopic("orders", parts)
	b.createTopic("enriched", parts)

	// Every standby checkpoint of the table is at most the group's
	// committed offset read right after it (committed offsets only grow).
	var mu sync.Mutex
	checkpoints := map[*App]map[int32][]int64{}
	start := func(gt *gate) *runningApp {
		bl := NewBuilder()
		gatedShopTopology(gt)(bl)
		var a *App
		onCheckpoint := withStandbyCheckpoints(func(id taskID, cp state.Checkpoint) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := b.adm.FetchOffsetsForTopics(ctx, "shop", "customers")
			if err != nil {
				return // the broker is closing: nothing to compare with
			}
			var at int64
			if o, ok := resp.Lookup("customers", id.partition); ok {
				at = max(0, o.At)
			}
			if cp["customers"] > at {
				t.Errorf("standby %s checkpointed customers at %d, past the group's committed offset %d",
					id, cp["customers"], at)
			}
			mu.Lock()
			checkpoints[a][id.partition] = append(checkpoints[a][id.partition], cp["customers"])
			mu.Unlock()
		})
		killed := new(atomic.Bool)
		var err error
		a, err = NewApp("shop", bl, Brokers(b.seeds...), testLogger(t), WithGuarantee(g), StateDir(t.TempDir()),
			CommitInterval(20*time.Millisecond), StandbyReplicas(1), QueryServer("127.0.0.1:0"), onCheckpoint,
			withKillSwitch(killed))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		checkpoints[a] = map[int32][]int64{}
		mu.Unlock()
		return runPrepared(t, a, killed)
	}
	gate1 := newGate()
	a1 := start(gate1)
	a2 := start(newGate())
	want := map[string]string{}

	produceCustomers(b, customers, "", t0)
	produceCustomers(b, customers, "-v1", t0.Add(time.Second))
	b.waitCommitted("shop", "customers", 2*customers)
	produceOrders(b, 0, 40, customers, "-v1", t0.Add(time.Minute), want)
	b.waitForIso("enriched", committed, 60*time.Second, enrichedComplete(t, want))
	waitSplit(t, parts, a1.a, a2.a)
	moved := localPartitions(a1.a)
	spec := a1.a.stores["customers"]

	// a2's standbys of a1's tasks catch up with the committed offsets.
	ends := map[int32]int64{}
	var frozen map[int32]int64 // the group's committed offsets of customers
	waitStandbys := func(what string, ok func(p int32, fetched, applied map[string]int64) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			done := true
			for _, p := range moved {
				f, ap := standbyFetched(a2.a.standbys, a2.a.storeTask(spec, p))
				done = done && f != nil && ok(p, f, ap)
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				var state []string
				for _, p := range moved {
					f, ap := standbyFetched(a2.a.standbys, a2.a.storeTask(spec, p))
					state = append(state, fmt.Sprintf("partition %d: fetched %v applied %v committed %d end %d", p, f, ap, frozen[p], ends[p]))
				}
				t.Fatalf("a2's standbys of a1's tasks: %s not reached: %v", what, state)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	frozen = b.committedOffsets("shop", "customers")
	waitStandbys("caught up", func(p int32, _, applied map[string]int64) bool {
		return applied["customers"] == frozen[p]
	})

	// The table is queryable: a2 answers keys of a1's tasks from its
	// standby copies with AllowStale, else from a1.
	checked := 0
	queryDeadline := time.Now().Add(30 * time.Second)
	for i := range customers {
		k := fmt.Sprint("c", i)
		if !slices.Contains(moved, keyPartition([]byte(k), parts)) {
			continue
		}
		for _, stale := range []bool{true, false} {
			var opts []QueryOpt
			if stale {
				opts = append(opts, AllowStale())
			}
			// Not found yet is retried too: an ExactlyOnce owner writes its
			// table to its store (checkpoint) once its transaction
			// committed, just after the committed offsets became visible.
			var e StoreEntry
			var err error
			for {
				var found bool
				e, err = retryQuery(t, "get "+k, func(ctx context.Context) (StoreEntry, error) {
					e, f, err := a2.a.Get(ctx, "customers", []byte(k), opts...)
					found = f
					return e, err
				})
				if err == nil && !found {
					err = fmt.Errorf("%s not found", k)
				}
				if err == nil || time.Now().After(queryDeadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if want := fmt.Sprint("name", i, "-v1"); err != nil || string(e.Value) != want || e.Stale != stale {
				t.Errorf("get %s (stale allowed %v): %q stale %v, %v; want %q", k, stale, e.Value, e.Stale, err, want)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no key of a1's tasks")
	}

	// a1 stalls on its next order: its committed offsets stop moving.
	gate1.close()
	produceOrders(b, 40, 20, customers, "-v1", t0.Add(2*time.Minute), want)
	select {
	case <-gate1.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("a1 processed no order")
	}
	for stable := 0; stable < 3; {
		time.Sleep(50 * time.Millisecond)
		now := b.committedOffsets("shop", "customers")
		if maps.Equal(now, frozen) {
			stable++
		} else {
			frozen, stable = now, 0
		}
	}
	// Table updates a1 has not processed: a2's standbys fetch them.
	produceCustomers(b, customers, "-v2", t0.Add(3*time.Minute))
	endResp, err := b.adm.ListEndOffsets(context.Background(), "customers")
	if err != nil {
		t.Fatal(err)
	}
	endResp.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	waitStandbys("fetched the unprocessed updates", func(p int32, fetched, _ map[string]int64) bool {
		return fetched["customers"] >= ends[p]
	})
	for _, p := range moved {
		if _, applied := standbyFetched(a2.a.standbys, a2.a.storeTask(spec, p)); applied["customers"] > frozen[p] {
			t.Errorf("a2's standby of partition %d applied customers up to %d, past the committed offset %d",
				p, applied["customers"], frozen[p])
		}
	}

	restoredBefore := counterValue(a2.a.metrics.restored)
	a1.killed.Store(true)
	gate1.release()
	if err := a1.kill(); err != nil {
		t.Fatal(err)
	}
	waitSplit(t, parts, a2.a)
	produceOrders(b, 60, 40, customers, "-v2", t0.Add(4*time.Minute), want)
	b.waitForIso("enriched", committed, 60*time.Second, enrichedComplete(t, want))

	mu.Lock()
	defer mu.Unlock()
	var tail, full int64
	for _, p := range moved {
		cps := checkpoints[a2.a][p]
		if len(cps) == 0 {
			t.Fatalf("a2's standby of partition %d never checkpointed", p)
		}
		last := cps[len(cps)-1]
		tail += frozen[p] - last
		full += frozen[p]
	}
	restored := int64(counterValue(a2.a.metrics.restored) - restoredBefore)
	t.Logf("takeover of partitions %v restored %d table records; committed since the standbys' checkpoints %d; table up to the committed offsets %d",
		moved, restored, tail, full)
	if restored != tail || restored >= full {
		t.Errorf("takeover restored %d table records, want exactly the %d committed since the standbys' last checkpoints "+
			"(less than the %d up to the committed offsets)", restored, tail, full)
	}
}
