package orders

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/streamtest"
	"github.com/weirhq/weir/weirtest"
)

func TestMain(m *testing.M) {
	// A child process of the kill -9 tests runs the App, not the tests.
	weirtest.RunChildRole(map[string]func() int{"orders": runChild})
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// workload returns n orders over a few customers and categories, every
// tenth one malformed (no category), and the expected totals.
func workload(n int) (orders []Order, spend map[string]Spend, perCategory map[string]int64, bad int) {
	spend, perCategory = map[string]Spend{}, map[string]int64{}
	tiers := map[string]string{"c0": "gold", "c1": "silver", "c2": "gold", "c3": "", "c4": "silver"}
	cats := []string{"books", "games", "garden"}
	for i := range n {
		o := Order{ID: fmt.Sprintf("o%04d", i), Customer: fmt.Sprintf("c%d", i%5), Category: cats[i%3], Amount: int64(100 + i)}
		if i%10 == 9 {
			o.Category = ""
			bad++
		} else {
			s := spend[o.Customer]
			spend[o.Customer] = Spend{Customer: o.Customer, Tier: tiers[o.Customer], Orders: s.Orders + 1, Total: s.Total + o.Amount}
			perCategory[o.Category]++
		}
		orders = append(orders, o)
	}
	return orders, spend, perCategory, bad
}

var customers = map[string]Customer{"c0": {"Ann", "gold"}, "c1": {"Bob", "silver"}, "c2": {"Cy", "gold"}, "c4": {"Di", "silver"}}

// TestOrdersStreamtest runs the topology without a broker: exact totals per
// customer (enriched with the tier, "" for the unknown customer c3), exact
// counts per category, and every malformed order — invalid JSON and a
// missing category — in the App's dead-letter topic naming its operator and
// original position.
func TestOrdersStreamtest(t *testing.T) {
	b := stream.NewBuilder()
	Build(b)
	d := streamtest.New(t, AppID, b, streamtest.Partitions(OrdersTopic, 3), streamtest.Partitions(CustomersTopic, 3))
	cin := streamtest.NewInput(d, CustomersTopic, stream.String(), stream.JSON[Customer]())
	for id, c := range customers {
		cin.Pipe(id, c, t0)
	}
	oin := streamtest.NewInput(d, OrdersTopic, stream.String(), stream.JSON[Order]())
	orders, wantSpend, wantCats, bad := workload(300)
	for i, o := range orders {
		oin.Pipe(o.ID, o, t0.Add(time.Duration(i+1)*time.Millisecond))
	}
	junk := oin.PipeRaw([]byte("o-junk"), []byte(`{"id":`), t0.Add(time.Second))
	d.Process()

	spend := streamtest.Latest(streamtest.NewOutput(d, SpendTopic, stream.String(), stream.JSON[Spend]()))
	if len(spend) != len(wantSpend) {
		t.Fatalf("spend for %d customers, want %d", len(spend), len(wantSpend))
	}
	for c, w := range wantSpend {
		if spend[c] != w {
			t.Errorf("spend[%s] = %+v, want %+v", c, spend[c], w)
		}
	}
	cats := streamtest.Latest(streamtest.NewOutput(d, PerCategoryTopic, stream.String(), stream.Int64()))
	for c, w := range wantCats {
		if cats[c] != w {
			t.Errorf("orders in %s = %d, want %d", c, cats[c], w)
		}
	}
	dlq := d.Records(stream.DLQTopic(AppID))
	if len(dlq) != bad+1 {
		t.Fatalf("dead-letter topic holds %d records, want %d", len(dlq), bad+1)
	}
	ops := map[string]int{}
	for _, r := range dlq {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		ops[h[stream.HeaderDLQOperator]]++
		if h[stream.HeaderDLQTopic] != OrdersTopic || h[stream.HeaderDLQAttempts] != "1" {
			t.Errorf("dead letter %s: headers %v", r.Key, h)
		}
		if string(r.Key) == "o-junk" && h[stream.HeaderDLQOffset] != fmt.Sprint(junk.Offset) {
			t.Errorf("junk order's offset header %s, want %d", h[stream.HeaderDLQOffset], junk.Offset)
		}
	}
	if ops["validate"] != bad || ops["source"] != 1 {
		t.Errorf("dead letters by operator %v, want validate %d, source 1", ops, bad)
	}
	q, err := stream.QueryStore[string, Spend](d.App(), "spend")
	if err != nil {
		t.Fatal(err)
	}
	if s, ok, err := q.Get(context.Background(), "c0"); err != nil || !ok || s != wantSpend["c0"] {
		t.Fatalf("query spend[c0] = %+v %v %v", s, ok, err)
	}
}

// TestOrdersOnWeir runs the App against a real in-process weir broker under
// each guarantee and reads the outputs until they hold the exact totals
// (read_committed under ExactlyOnce); then checks the dead-letter topic.
func TestOrdersOnWeir(t *testing.T) {
	for _, g := range []stream.Guarantee{stream.AtLeastOnce, stream.ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { onWeir(t, g) })
	}
}

func onWeir(t *testing.T, g stream.Guarantee) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := weirtest.Start(t, weirtest.Topic(OrdersTopic, 3), weirtest.Topic(CustomersTopic, 3, "cleanup.policy", "compact"),
		weirtest.Topic(SpendTopic, 3), weirtest.Topic(PerCategoryTopic, 3))
	var recs []*kgo.Record
	for id, c := range customers {
		v, _ := stream.JSON[Customer]().Encode(c)
		recs = append(recs, &kgo.Record{Topic: CustomersTopic, Key: []byte(id), Value: v, Timestamp: t0})
	}
	if err := b.Client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	orders, wantSpend, wantCats, bad := workload(600)
	recs = recs[:0]
	for i, o := range orders {
		v, _ := stream.JSON[Order]().Encode(o)
		recs = append(recs, &kgo.Record{Topic: OrdersTopic, Key: []byte(o.ID), Value: v,
			Timestamp: t0.Add(time.Duration(i+1) * time.Millisecond)})
	}

	builder := stream.NewBuilder()
	Build(builder)
	app, err := stream.NewApp(AppID, builder, stream.Brokers(b.Addr()), stream.StateDir(t.TempDir()),
		stream.CommitInterval(50*time.Millisecond), stream.Delivery(g), stream.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	appDone := make(chan error, 1)
	go func() { appDone <- app.Run(appCtx) }()
	// Customers first (by timestamp), then the orders.
	time.Sleep(200 * time.Millisecond)
	if err := b.Client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	spend := map[string]Spend{}
	cats := map[string]int64{}
	var dlq []*kgo.Record
	cl := b.Client(kgo.ConsumeTopics(SpendTopic, PerCategoryTopic, stream.DLQTopic(AppID)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	done := func() bool {
		for c, w := range wantSpend {
			if spend[c] != w {
				return false
			}
		}
		for c, w := range wantCats {
			if cats[c] != w {
				return false
			}
		}
		return len(dlq) >= bad
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("outputs never matched: spend %+v (want %+v), categories %v (want %v), %d dead letters (want %d)",
				spend, wantSpend, cats, wantCats, len(dlq), bad)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch r.Topic {
			case SpendTopic:
				s, err := stream.JSON[Spend]().Decode(r.Value)
				if err != nil {
					t.Fatal(err)
				}
				spend[string(r.Key)] = s
			case PerCategoryTopic:
				n, err := stream.Int64().Decode(r.Value)
				if err != nil {
					t.Fatal(err)
				}
				cats[string(r.Key)] = n
			default:
				dlq = append(dlq, r)
			}
		})
	}
	stopApp()
	if err := <-appDone; err != nil {
		t.Fatalf("app.Run: %v", err)
	}
	for c, w := range wantSpend {
		if spend[c] != w {
			t.Errorf("spend[%s] = %+v, want %+v", c, spend[c], w)
		}
	}
	if len(dlq) != bad {
		t.Errorf("%d dead letters, want %d", len(dlq), bad)
	}
}
