package orders

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

// The kill -9 tests run the orders App in a child process (this test
// binary, re-executed in the weirtest child role "orders"), kill it
// with SIGKILL — no shutdown code runs — and restart it on the same state
// directory, with default options but the broker, the state directory and
// the guarantee.
const (
	childEnv       = "ORDERS_KILL_CHILD" // the guarantee
	childBrokerEnv = "ORDERS_KILL_BROKER"
	childDirEnv    = "ORDERS_KILL_DIR"
)

func runChild() int {
	g := stream.AtLeastOnce
	if os.Getenv(childEnv) == stream.ExactlyOnce.String() {
		g = stream.ExactlyOnce
	}
	b := stream.NewBuilder()
	Build(b)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []stream.Opt{stream.Brokers(os.Getenv(childBrokerEnv)),
		stream.StateDir(os.Getenv(childDirEnv)), stream.Delivery(g), stream.Logger(logger)}
	app, err := stream.NewApp(AppID, b, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := weirtest.ChildContext()
	defer stop()
	if err := app.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChild starts the orders App (runChild) in a child process on the
// broker at addr with guarantee g and state directory dir.
func startChild(t testing.TB, addr string, g stream.Guarantee, dir string) *weirtest.Child {
	t.Helper()
	return weirtest.StartChild(t, "orders", childEnv+"="+g.String(), childBrokerEnv+"="+addr, childDirEnv+"="+dir)
}

// outputs is what the App wrote, read from the start.
type outputs struct {
	spend map[string][]Spend // per customer, in write order
	cats  map[string][]int64 // per category, in write order
	dlq   int
}

// reader reads the App's outputs (read_committed if committed) from the
// start, accumulating them.
type reader struct {
	t   testing.TB
	cl  *kgo.Client
	out outputs
}

func newReader(t testing.TB, b *weirtest.Broker, committed bool) *reader {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := b.Client(kgo.ConsumeTopics(SpendTopic, PerCategoryTopic, stream.DLQTopic(AppID)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	return &reader{t: t, cl: cl, out: outputs{spend: map[string][]Spend{}, cats: map[string][]int64{}}}
}

// poll adds what arrives within d.
func (rd *reader) poll(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	rd.cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
		switch r.Topic {
		case SpendTopic:
			s, err := stream.JSON[Spend]().Decode(r.Value)
			if err != nil {
				rd.t.Fatalf("spend value %q: %v", r.Value, err)
			}
			rd.out.spend[string(r.Key)] = append(rd.out.spend[string(r.Key)], s)
		case PerCategoryTopic:
			n, err := stream.Int64().Decode(r.Value)
			if err != nil {
				rd.t.Fatalf("category value: %v", err)
			}
			rd.out.cats[string(r.Key)] = append(rd.out.cats[string(r.Key)], n)
		default:
			rd.out.dlq++
		}
	})
}

// last returns the latest value per key.
func last[V any](m map[string][]V) map[string]V {
	out := map[string]V{}
	for k, vs := range m {
		out[k] = vs[len(vs)-1]
	}
	return out
}

// TestOrdersKill9 runs the orders App as a real process on a weir broker,
// kills it with SIGKILL four times while orders keep arriving, restarts it
// each time on its state directory, and checks the outputs against the
// truth computed from the input:
//   - ExactlyOnce (read_committed): every customer's total and order count
//     and every category's count exact; no committed output ever exceeds the
//     truth (nothing counted twice, even transiently); exactly one dead
//     letter per malformed order;
//   - AtLeastOnce: no total and no count below the truth (replays may count
//     an order twice), and every malformed order in the dead-letter topic.
func TestOrdersKill9(t *testing.T) {
	for _, g := range []stream.Guarantee{stream.ExactlyOnce, stream.AtLeastOnce} {
		t.Run(g.String(), func(t *testing.T) { kill9Run(t, g) })
	}
}

func kill9Run(t *testing.T, g stream.Guarantee) {
	b := weirtest.Start(t, weirtest.Topic(OrdersTopic, 3), weirtest.Topic(CustomersTopic, 3, "cleanup.policy", "compact"),
		weirtest.Topic(SpendTopic, 3), weirtest.Topic(PerCategoryTopic, 3))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	produceCustomers(ctx, t, b)
	const batches, perBatch = 5, 3000
	orders, wantSpend, wantCats, bad := workload(batches * perBatch)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(16, uint64(g)))
	committed := g == stream.ExactlyOnce
	adm := b.Admin()
	c := startChild(t, b.Addr(), g, dir)
	midBatch := 0 // kills before the batch was committed whole
	for i := range batches {
		produceOrders(ctx, t, b, orders[i*perBatch:(i+1)*perBatch], i*perBatch)
		if i == batches-1 {
			break
		}
		// Kill while it works: a random time after the batch was
		// written (the first time, once the App is up).
		if i == 0 {
			waitConsumed(ctx, t, adm, 1, c)
		}
		time.Sleep(time.Duration(200+rng.IntN(1000)) * time.Millisecond)
		c.Kill()
		if n := consumed(ctx, adm); n < int64((i+1)*perBatch) {
			midBatch++
		}
		c = startChild(t, b.Addr(), g, dir)
	}
	deadline := time.Now().Add(90 * time.Second)
	rd := newReader(t, b, committed)
	defer rd.cl.Close()
	for {
		rd.poll(200 * time.Millisecond)
		out := rd.out
		spend, cats := last(out.spend), last(out.cats)
		complete := out.dlq >= bad
		for cu, w := range wantSpend {
			s := spend[cu]
			if committed && (s.Total > w.Total || s.Orders > w.Orders) {
				t.Fatalf("customer %s: committed total %+v beyond the truth %+v", cu, s, w)
			}
			complete = complete && s.Total >= w.Total && s.Orders >= w.Orders
		}
		for cat, w := range wantCats {
			if committed && cats[cat] > w {
				t.Fatalf("category %s: committed count %d beyond the truth %d", cat, cats[cat], w)
			}
			complete = complete && cats[cat] >= w
		}
		if complete {
			rd.poll(time.Second) // anything beyond the truth?
			out = rd.out
			if committed {
				checkExactlyOnce(t, out, wantSpend, wantCats, bad)
			}
			replayed := 0 // customers whose total counts an order twice (at-least-once)
			for cu, w := range wantSpend {
				if spend[cu].Orders > w.Orders {
					replayed++
				}
			}
			t.Logf("%s: outputs complete after %d kills (%d before their batch was committed whole): "+
				"%d spend, %d category, %d dead-letter records; %d customers with replayed orders",
				g, batches-1, midBatch, count(out.spend), count(out.cats), out.dlq, replayed)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outputs incomplete: spend %+v want %+v; categories %v want %v; %d dead letters want %d; "+
				"the App's log:\n%s", spend, wantSpend, cats, wantCats, out.dlq, bad, c.Logs())
		}
	}
}

// checkExactlyOnce: every committed output is exact — each customer's
// totals never go beyond the truth and never backwards, and end at it; the
// same for the counts; one dead letter per malformed order.
func checkExactlyOnce(t *testing.T, out outputs, wantSpend map[string]Spend, wantCats map[string]int64, bad int) {
	t.Helper()
	for cu, ss := range out.spend {
		for i := 1; i < len(ss); i++ {
			if ss[i].Orders <= ss[i-1].Orders || ss[i].Total <= ss[i-1].Total {
				t.Errorf("customer %s: committed totals not increasing: %+v then %+v", cu, ss[i-1], ss[i])
			}
		}
		if ss[len(ss)-1] != wantSpend[cu] {
			t.Errorf("customer %s: final %+v, want %+v", cu, ss[len(ss)-1], wantSpend[cu])
		}
	}
	for cat, ns := range out.cats {
		for i := 1; i < len(ns); i++ {
			if ns[i] <= ns[i-1] {
				t.Errorf("category %s: committed counts not increasing: %d then %d", cat, ns[i-1], ns[i])
			}
		}
		if ns[len(ns)-1] != wantCats[cat] {
			t.Errorf("category %s: final %d, want %d", cat, ns[len(ns)-1], wantCats[cat])
		}
	}
	if out.dlq != bad {
		t.Errorf("%d dead letters, want exactly %d", out.dlq, bad)
	}
}

func count[V any](m map[string][]V) int {
	n := 0
	for _, vs := range m {
		n += len(vs)
	}
	return n
}

func produceCustomers(ctx context.Context, t testing.TB, b *weirtest.Broker) {
	t.Helper()
	var recs []*kgo.Record
	for id, c := range customers {
		v, _ := stream.JSON[Customer]().Encode(c)
		recs = append(recs, &kgo.Record{Topic: CustomersTopic, Key: []byte(id), Value: v, Timestamp: t0})
	}
	if err := b.Client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// produceOrders writes orders, the first being the from-th of the workload
// (its timestamp).
func produceOrders(ctx context.Context, t testing.TB, b *weirtest.Broker, orders []Order, from int) {
	t.Helper()
	recs := make([]*kgo.Record, len(orders))
	for i, o := range orders {
		v, _ := stream.JSON[Order]().Encode(o)
		recs[i] = &kgo.Record{Topic: OrdersTopic, Key: []byte(o.ID), Value: v,
			Timestamp: t0.Add(time.Duration(from+i+1) * time.Millisecond)}
	}
	cl := b.Client()
	defer cl.Close()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumed is the sum of the App's committed offsets of the orders topic.
func consumed(ctx context.Context, adm *kadm.Client) int64 {
	resp, err := adm.FetchOffsetsForTopics(ctx, AppID, OrdersTopic)
	var sum int64
	if err == nil {
		resp.Each(func(o kadm.OffsetResponse) { sum += max(0, o.At) })
	}
	return sum
}

// waitConsumed waits until the App's committed offsets of the orders topic
// sum to at least n.
func waitConsumed(ctx context.Context, t testing.TB, adm *kadm.Client, n int64, c *weirtest.Child) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		sum := consumed(ctx, adm)
		if sum >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the App committed %d orders, want %d within 60s; its log:\n%s", sum, n, c.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkOrdersKill9Recovery reports how long after the restart of a
// killed (SIGKILL) orders App with default options its outputs hold every
// order again: the process's start, its rejoin as the same static member,
// the restore of its changelog tails and the processing of the orders that
// arrived while it was down (600).
func BenchmarkOrdersKill9Recovery(bm *testing.B) {
	for _, g := range []stream.Guarantee{stream.AtLeastOnce, stream.ExactlyOnce} {
		bm.Run(strings.ReplaceAll(g.String(), "-", ""), func(bm *testing.B) {
			var total time.Duration
			for range bm.N {
				total += recoverOnce(bm, g)
			}
			bm.ReportMetric(total.Seconds()/float64(bm.N), "recovery-s")
		})
	}
}

func recoverOnce(t testing.TB, g stream.Guarantee) time.Duration {
	b := weirtest.Start(t, weirtest.Topic(OrdersTopic, 3), weirtest.Topic(CustomersTopic, 3, "cleanup.policy", "compact"),
		weirtest.Topic(SpendTopic, 3), weirtest.Topic(PerCategoryTopic, 3))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	produceCustomers(ctx, t, b)
	orders, wantSpend, _, _ := workload(1200)
	dir := t.TempDir()
	committed := g == stream.ExactlyOnce
	c := startChild(t, b.Addr(), g, dir)
	produceOrders(ctx, t, b, orders[:600], 0)
	waitConsumed(ctx, t, b.Admin(), 600, c)
	c.Kill()
	produceOrders(ctx, t, b, orders[600:], 600)
	start := time.Now()
	c = startChild(t, b.Addr(), g, dir)
	rd := newReader(t, b, committed)
	defer rd.cl.Close()
	for {
		rd.poll(20 * time.Millisecond)
		spend := last(rd.out.spend)
		done := true
		for cu, w := range wantSpend {
			done = done && spend[cu].Orders >= w.Orders
		}
		if done {
			return time.Since(start)
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("outputs incomplete 2 minutes after the restart; the App's log:\n%s", c.Logs())
		}
	}
}

// TestOrdersTableUpdatesCollapsed runs the orders App on weir over the same
// 10,000 orders (7 categories, 5 customers), written while it runs in 200
// batches of 50 (a live trickle: small rounds), twice per guarantee: with
// StoreCache(0), which flushes its tables at the end of every processing
// round (how tables behaved before they collapsed per commit), and with the
// default cache, which collapses each key's updates until the next commit
// (every second in both runs). Both
// must reach the exact totals; the default run must write fewer output and
// changelog records. The figures are logged.
func TestOrdersTableUpdatesCollapsed(t *testing.T) {
	for _, g := range []stream.Guarantee{stream.AtLeastOnce, stream.ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			// One commit interval for both runs and both guarantees (under
			// ExactlyOnce the default, 100 ms, is about one round on a
			// loaded machine: there would be nothing to collapse).
			commit := stream.CommitInterval(time.Second)
			perRound := tableRecords(t, g, commit, stream.StoreCache(0))
			perCommit := tableRecords(t, g, commit)
			t.Logf("%s: per round: %d category + %d changelog, %d spend + %d changelog; "+
				"per commit: %d + %d, %d + %d", g, perRound[0], perRound[1], perRound[2], perRound[3],
				perCommit[0], perCommit[1], perCommit[2], perCommit[3])
			if perCommit[0]+perCommit[1] >= perRound[0]+perRound[1] {
				t.Errorf("collapsing per commit wrote %d category records, per round %d: want fewer",
					perCommit[0]+perCommit[1], perRound[0]+perRound[1])
			}
		})
	}
}

// tableRecords runs the App until its outputs are exact and returns the
// records in the per-category output, its changelog, the spend output and
// its changelog (a changelog's end offset: under ExactlyOnce it counts the
// transaction markers too).
func tableRecords(t *testing.T, g stream.Guarantee, opts ...stream.Opt) [4]int {
	b := weirtest.Start(t, weirtest.Topic(OrdersTopic, 3), weirtest.Topic(CustomersTopic, 3, "cleanup.policy", "compact"),
		weirtest.Topic(SpendTopic, 3), weirtest.Topic(PerCategoryTopic, 3))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	produceCustomers(ctx, t, b)
	cats := []string{"books", "games", "garden", "music", "toys", "food", "tools"}
	const n = 10000
	orders := make([]Order, n)
	wantCats := map[string]int64{}
	wantOrders := map[string]int64{}
	for i := range orders {
		orders[i] = Order{ID: fmt.Sprintf("o%05d", i), Customer: fmt.Sprintf("c%d", i%5), Category: cats[i%7], Amount: 1}
		wantCats[orders[i].Category]++
		wantOrders[orders[i].Customer]++
	}
	bl := stream.NewBuilder()
	Build(bl)
	app, err := stream.NewApp(AppID, bl, append([]stream.Opt{stream.Brokers(b.Addr()), stream.StateDir(t.TempDir()),
		stream.Delivery(g), stream.Logger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	appCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(appCtx) }()
	for i := 0; i < n; i += 50 {
		produceOrders(ctx, t, b, orders[i:i+50], i)
	}
	rd := newReader(t, b, g == stream.ExactlyOnce)
	defer rd.cl.Close()
	for {
		rd.poll(100 * time.Millisecond)
		complete := true
		for c, w := range wantCats {
			vs := rd.out.cats[c]
			complete = complete && len(vs) > 0 && vs[len(vs)-1] == w
		}
		for c, w := range wantOrders {
			vs := rd.out.spend[c]
			complete = complete && len(vs) > 0 && vs[len(vs)-1].Orders == w
		}
		if complete {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("outputs never exact: %v", last(rd.out.cats))
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rd.poll(500 * time.Millisecond)
	ends, err := b.Admin().ListEndOffsets(context.Background(), AppID+"-per-category-changelog", AppID+"-spend-changelog")
	if err != nil {
		t.Fatal(err)
	}
	var cl [2]int
	ends.Each(func(o kadm.ListedOffset) {
		if strings.Contains(o.Topic, "per-category") {
			cl[0] += int(o.Offset)
		} else {
			cl[1] += int(o.Offset)
		}
	})
	return [4]int{count(rd.out.cats), cl[0], count(rd.out.spend), cl[1]}
}
