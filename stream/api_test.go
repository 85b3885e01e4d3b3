package stream

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Defect 1 of issue 16: a declaration error (a join that must repartition
// values it has no codec for) followed by any operator carries its error to
// NewApp instead of panicking while the topology is declared.
func TestInvalidStreamCarriesErrorToNewApp(t *testing.T) {
	chains := map[string]func(s Stream[string, string]){
		"to": func(s Stream[string, string]) { s.To("out", String(), String()) },
		"filter": func(s Stream[string, string]) {
			s.Filter(func(Record[string, string]) (bool, error) { return true, nil })
		},
		"map": func(s Stream[string, string]) {
			Map(s, func(r Record[string, string]) (int64, error) { return 1, nil })
		},
		"count":    func(s Stream[string, string]) { Count(GroupByKey(s), StoreConfig{Name: "n", TTL: time.Hour}) },
		"to-table": func(s Stream[string, string]) { s.ToTable(StoreConfig{Name: "t", TTL: time.Hour}).ToStream().Peek(nil) },
		"split": func(s Stream[string, string]) {
			s.Split(Route[string, string]{Name: "a", When: nil})["a"].FilterNot(nil)
		},
		"merge": func(s Stream[string, string]) {
			s.Merge(s).Branch()[0].To("out", String(), String())
		},
		"group-by": func(s Stream[string, string]) {
			Aggregate(GroupBy(s, func(r Record[string, string]) (string, error) { return r.Value, nil }),
				StoreConfig{Name: "agg", NoExpiry: "test"}, func() int64 { return 0 },
				func(Record[string, string], int64) (int64, error) { return 0, nil }).ToStream().To("out", String(), Int64())
		},
	}
	for name, chain := range chains {
		t.Run(name, func(t *testing.T) {
			b := NewBuilder()
			orders := KeyBy(From(b, "orders", String(), JSON[int]()),
				func(r Record[string, int]) (string, error) { return "c", nil })
			customers := FromTable(b, "customers", String(), String(), "customers")
			joined := Join(orders, customers, func(r Record[string, int], c string) (string, error) { return c, nil })
			chain(joined)
			_, err := NewApp("shop", b, Brokers("127.0.0.1:1"))
			if err == nil || !strings.Contains(err.Error(), "RepartitionValues") {
				t.Fatalf("NewApp error %v, want the join's declaration error", err)
			}
		})
	}
}

// A table's updates are collapsed per round: one changelog record and one
// downstream update per key per round, with the key's latest value; the
// store still sees every update at once.
func TestTableUpdatesCollapsedPerRound(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	counts := Count(GroupByKey(in), StoreConfig{Name: "c", TTL: time.Hour})
	var seen []int64
	counts.ToStream().Peek(func(r Record[string, int64]) { seen = append(seen, r.Value) }).To("counts", String(), Int64())
	h := newHarness(t, b)
	tk := h.task("in", 0)
	for i, k := range []string{"a", "b", "a", "a", "b", "a"} {
		if err := tk.handle(context.Background(), &kgo.Record{Topic: "in", Key: []byte(k), Value: []byte("v"),
			Offset: int64(i), Timestamp: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.topic("counts")) + len(h.topic("app-c-changelog")); n != 0 {
		t.Fatalf("%d records written before the round ended, want 0", n)
	}
	if err := tk.endBatch(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"counts", "app-c-changelog"} {
		if got, want := values(h.topic(topic)), []string{"a=" + enc64(4), "b=" + enc64(2)}; !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q (latest value per key, in first-update order)", topic, got, want)
		}
	}
	if !slices.Equal(seen, []int64{4, 2}) {
		t.Errorf("downstream saw %v, want [4 2]", seen)
	}
	// The next round starts empty.
	if err := tk.endBatch(); err != nil || len(h.topic("counts")) != 2 {
		t.Fatalf("second empty round: err %v, %d records", err, len(h.topic("counts")))
	}
}

func enc64(n int64) string { b, _ := Int64().Encode(n); return string(b) }

// An aggregate's table is joinable: orders keyed by customer are enriched
// with the customer's running total, and GroupBy infers the codecs of a
// struct value (JSON) and a string key.
func TestJoinWithAggregateTable(t *testing.T) {
	type order struct {
		Customer string
		Amount   int64
	}
	b := NewBuilder()
	orders := From(b, "orders", String(), JSON[order]())
	byCustomer := GroupBy(orders, func(r Record[string, order]) (string, error) { return r.Value.Customer, nil })
	totals := Aggregate(byCustomer, StoreConfig{Name: "totals", NoExpiry: "one key per customer"},
		func() int64 { return 0 },
		func(r Record[string, order], sum int64) (int64, error) { return sum + r.Value.Amount, nil })
	// Joined in the aggregate's sub-topology: the re-keyed orders are
	// repartitioned with the totals' partition count (JSON inferred).
	rekeyed := KeyBy(orders, func(r Record[string, order]) (string, error) { return r.Value.Customer, nil })
	LeftJoin(rekeyed, totals, func(r Record[string, order], total int64, found bool) (int64, error) {
		return total, nil
	}).To("seen-total", String(), Int64())
	d, err := NewDriver("shop", b, map[string]int32{"orders": 3}, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i, o := range []order{{"ann", 5}, {"bob", 1}, {"ann", 7}} {
		v, _ := JSON[order]().Encode(o)
		if _, err := d.Pipe("orders", []byte{byte('x' + i)}, v, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := d.Process(); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for _, r := range d.Records("seen-total") {
		n, _ := Int64().Decode(r.Value)
		got[string(r.Key)] += " " + itoa(n)
	}
	// Each order sees the total of the customer's earlier orders: its copy
	// on the join's repartition topic and its copy on the aggregate's have
	// the same timestamp, and ties go by topic name
	// ("shop-totals-join-0-repartition" first).
	if got["ann"] != " 0 5" || got["bob"] != " 0" {
		t.Fatalf("seen totals = %q", got)
	}
	if n := d.partitions("shop-totals-join-0-repartition"); n != 3 {
		t.Fatalf("join repartition has %d partitions, want the totals' 3", n)
	}
	q, err := QueryStore[string, int64](d.App(), "totals")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := q.Get(context.Background(), "ann"); err != nil || !ok || v != 12 {
		t.Fatalf("query totals[ann] = %d %v %v, want 12", v, ok, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Every store states its bound; NoExpiry is reported as a risk and never
// expires a key.
func TestNoExpiryIsAWrittenChoice(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	Count(GroupByKey(in), StoreConfig{Name: "unbounded"})
	Count(GroupByKey(in), StoreConfig{Name: "both", TTL: time.Hour, NoExpiry: "x"})
	_, err := NewApp("app", b, Brokers("127.0.0.1:1"))
	for _, want := range []string{`store "unbounded": no bound`, `store "both": TTL 1h0m0s and NoExpiry "x"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewApp error %v lacks %q", err, want)
		}
	}

	b = NewBuilder()
	in = From(b, "in", String(), String())
	Count(GroupByKey(in), StoreConfig{Name: "categories", NoExpiry: "categories are a fixed list"}).
		ToStream().To("out", String(), Int64())
	h := newHarness(t, b)
	if d := h.a.Describe(); !strings.Contains(d, `store categories: RISK no expiry, keys are kept until deleted (stated reason: "categories are a fixed list")`) {
		t.Errorf("Describe does not report the risk:\n%s", d)
	}
	h.feed("in", 0, "old", "v", t0)
	h.feed("in", 0, "new", "v", t0.Add(1000*24*time.Hour))
	tk := h.task("in", 0)
	if err := tk.expire(100); err != nil {
		t.Fatal(err)
	}
	if err := tk.flushState(); err != nil {
		t.Fatal(err)
	}
	tk.txn = tk.db.Begin()
	if _, _, found, _ := tk.txn.Get("categories", []byte("old")); !found {
		t.Fatal("a NoExpiry store expired a key")
	}
}

// Errors not worth retrying go to the dead-letter topic at once; Permanent
// overrides a retriable error; RetryIf and an operator's Retry change the
// policy.
func TestErrorPolicy(t *testing.T) {
	timeout := &timeoutErr{}
	cases := []struct {
		name     string
		err      error
		appOpts  []Opt
		opOpts   []OpOpt
		attempts string
	}{
		{"plain error: not retried", errors.New("bad order"), nil, nil, "1"},
		{"retriable", Retriable(errors.New("db down")), nil, nil, "4"},
		{"timeout is retriable", timeout, nil, nil, "4"},
		{"permanent wins", Permanent(timeout), nil, nil, "1"},
		{"app RetryIf", errors.New("x"), []Opt{RetryIf(func(error) bool { return true })}, nil, "4"},
		{"operator Retry", Retriable(errors.New("x")), nil, []OpOpt{Retry{Attempts: 2}}, "2"},
		{"operator Retry.If", errors.New("x"), nil, []OpOpt{Retry{If: func(error) bool { return true }}}, "4"},
		{"permanent beats RetryIf", Permanent(errors.New("x")), []Opt{RetryIf(func(error) bool { return true })}, nil, "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder()
			calls := 0
			Map(From(b, "in", String(), String()), func(r Record[string, string]) (string, error) {
				calls++
				return "", c.err
			}, append(c.opOpts, Named("check"))...).To("out", String(), String())
			h := newHarness(t, b, append([]Opt{MaxAttempts(4), RetryBackoff(time.Second, time.Second)}, c.appOpts...)...)
			start := h.clock.Now()
			h.feed("in", 0, "k", "v", t0)
			dlq := h.topic("app.dlq")
			if len(dlq) != 1 {
				t.Fatalf("dlq = %d records", len(dlq))
			}
			if n, _ := header(dlq[0], HeaderDLQAttempts); n != c.attempts || itoa(int64(calls)) != c.attempts {
				t.Fatalf("attempts header %s, calls %d, want %s", n, calls, c.attempts)
			}
			if op, _ := header(dlq[0], HeaderDLQOperator); op != "check" {
				t.Fatalf("operator header %q, want check", op)
			}
			if c.attempts == "1" && !h.clock.Now().Equal(start) {
				t.Fatalf("a record not retried waited %v", h.clock.Now().Sub(start))
			}
		})
	}
}

type timeoutErr struct{}

func (*timeoutErr) Error() string { return "timed out" }
func (*timeoutErr) Timeout() bool { return true }

// A failure after a repartition names the original input record (topic,
// partition, offset) in the dead-letter headers, not the repartition
// topic's; the repartition record's origin header is not passed on.
func TestDLQAfterRepartitionNamesOriginalRecord(t *testing.T) {
	b := NewBuilder()
	in := From(b, "orders", String(), String())
	var origins []Origin
	Aggregate(GroupBy(in, func(r Record[string, string]) (string, error) { return r.Value, nil }),
		StoreConfig{Name: "agg", TTL: time.Hour}, func() string { return "" },
		func(r Record[string, string], agg string) (string, error) {
			origins = append(origins, r.Origin)
			if r.Key == "bad" {
				return "", errors.New("bad category")
			}
			return agg + r.Value, nil
		}).ToStream().To("out", String(), String())
	d, err := NewDriver("shop", b, map[string]int32{"orders": 2}, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Pipe("orders", []byte("o1"), []byte("good"), t0)
	o, _ := d.Pipe("orders", []byte("o2"), []byte("bad"), t0)
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	dlq := d.Records("shop.dlq")
	if len(dlq) != 1 {
		t.Fatalf("dlq = %d records", len(dlq))
	}
	h := map[string]string{}
	for _, x := range dlq[0].Headers {
		h[x.Key] = string(x.Value)
	}
	if h[HeaderDLQTopic] != "orders" || h[HeaderDLQPartition] != itoa(int64(o.Partition)) ||
		h[HeaderDLQOffset] != itoa(o.Offset) || h[HeaderDLQOperator] != "aggregate-agg" {
		t.Fatalf("dlq headers %v, want orders/%d/%d and operator aggregate-agg", h, o.Partition, o.Offset)
	}
	if _, ok := h[headerOrigin]; ok {
		t.Fatal("the internal origin header leaked into the dead-letter record")
	}
	for _, org := range origins {
		if org.Topic != "orders" {
			t.Fatalf("record after the repartition has origin %+v, want the orders record", org)
		}
	}
	for _, r := range d.Records("out") {
		for _, x := range r.Headers {
			if x.Key == headerOrigin {
				t.Fatal("the internal origin header leaked into an output")
			}
		}
	}
}

func TestSplitAndFilterNot(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), Int64())
	br := in.FilterNot(func(r Record[string, int64]) (bool, error) { return r.Value == 0, nil }).Split(
		Route[string, int64]{Name: "negative", When: func(r Record[string, int64]) (bool, error) { return r.Value < 0, nil }},
		Route[string, int64]{Name: "even", When: func(r Record[string, int64]) (bool, error) { return r.Value%2 == 0, nil }},
	)
	if len(br) != 3 {
		t.Fatalf("branches %v", br)
	}
	br["negative"].To("neg", String(), Int64())
	br["even"].To("even", String(), Int64())
	br[DefaultBranch].To("other", String(), Int64())
	h := newHarness(t, b)
	for _, v := range []int64{-2, 0, 4, 3} {
		h.feed("in", 0, "k", enc64(v), t0)
	}
	for topic, want := range map[string][]string{"neg": {"k=" + enc64(-2)}, "even": {"k=" + enc64(4)}, "other": {"k=" + enc64(3)}} {
		if got := values(h.topic(topic)); !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q", topic, got, want)
		}
	}
	if d := h.a.Describe(); !strings.Contains(d, "split-negative") || !strings.Contains(d, "split-default") {
		t.Errorf("Describe lacks the branch names:\n%s", d)
	}
	b = NewBuilder()
	From(b, "in", String(), Int64()).Split(Route[string, int64]{Name: DefaultBranch, When: func(Record[string, int64]) (bool, error) { return true, nil }})
	if _, err := NewApp("app", b, Brokers("127.0.0.1:1")); err == nil || !strings.Contains(err.Error(), "split") {
		t.Fatalf("NewApp error %v, want the split's", err)
	}
}

var update = flag.Bool("update", false, "rewrite testdata golden files")

// The orders topology's Describe output, compared with a golden file
// (go test -run TestDescribeGolden -update rewrites it).
func TestDescribeGolden(t *testing.T) {
	b := NewBuilder()
	buildOrders(b)
	a, err := NewApp("orders-app", b, Brokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	got := a.Describe()
	path := filepath.Join("testdata", "describe_orders.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("Describe differs from %s:\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

type testOrder struct {
	Customer string
	Category string
	Amount   int64
}

type testCustomer struct{ Name, Tier string }

type testEnriched struct {
	testOrder
	Tier string
}

// buildOrders is the orders application of issue 16 in the package's own
// terms: orders re-keyed by customer, joined with the customers table, a
// running total per customer and a count per category.
func buildOrders(b *Builder) {
	orders := From(b, "orders", String(), JSON[testOrder]()).
		Filter(func(r Record[string, testOrder]) (bool, error) {
			if r.Value.Customer == "" || r.Value.Amount <= 0 {
				return false, Permanent(errors.New("malformed order"))
			}
			return true, nil
		}, Named("validate"))
	customers := FromTable(b, "customers", String(), JSON[testCustomer](), "customers")
	byCustomer := KeyBy(orders, func(r Record[string, testOrder]) (string, error) { return r.Value.Customer, nil })
	enriched := LeftJoin(byCustomer, customers,
		func(r Record[string, testOrder], c testCustomer, _ bool) (testEnriched, error) {
			return testEnriched{r.Value, c.Tier}, nil
		})
	Aggregate(GroupByKey(enriched), StoreConfig{Name: "spend", NoExpiry: "one key per customer"},
		func() int64 { return 0 },
		func(r Record[string, testEnriched], sum int64) (int64, error) { return sum + r.Value.Amount, nil }).
		ToStream().To("spend-per-customer", String(), Int64())
	Count(GroupBy(orders, func(r Record[string, testOrder]) (string, error) { return r.Value.Category, nil }),
		StoreConfig{Name: "per-category", TTL: 30 * 24 * time.Hour}).
		ToStream().To("orders-per-category", String(), Int64())
}
