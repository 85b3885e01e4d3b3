package stream

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// joinTopology: orders (key customer, value order) enriched with the
// customers table, inner and left.
func joinTopology(b *Builder) {
	orders := From(b, "orders", String(), String())
	customers := FromTable(b, "customers", String(), String(), "customers")
	Join(orders, customers, func(r Record[string, string], c string) (string, error) {
		return r.Value + "@" + c, nil
	}).To("enriched", String(), String())
	LeftJoin(orders, customers, func(r Record[string, string], c string, found bool) (string, error) {
		if !found {
			c = "none"
		}
		return r.Value + "@" + c, nil
	}).To("enriched-left", String(), String())
}

func newJoinDriver(t *testing.T, build func(*Builder), parts map[string]int32) *Driver {
	t.Helper()
	b := NewBuilder()
	build(b)
	d, err := NewDriver("shop", b, parts, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// perKey groups a topic's records by key, in write order (the order that
// is guaranteed: per key within a partition).
func perKey(d *Driver, topic string) map[string][]string {
	out := map[string][]string{}
	for _, r := range d.Records(topic) {
		out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
	}
	return out
}

// TestJoinMatchesModel pipes random table updates, tombstones and stream
// records (timestamps increasing in pipe order) over three co-partitioned
// partitions, processing and restarting (which restores the table from its
// source topic) at random points, and compares the inner and left join
// outputs with a sequential model.
func TestJoinMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			d := newJoinDriver(t, joinTopology, map[string]int32{"orders": 3, "customers": 3})
			table := map[string]string{}
			inner, left := map[string][]string{}, map[string][]string{}
			ts := t0
			for i := range 600 {
				ts = ts.Add(time.Millisecond)
				k := fmt.Sprint("c", rng.IntN(12))
				switch x := rng.IntN(10); {
				case x < 3:
					v := fmt.Sprint("name", i)
					table[k] = v
					if _, err := d.Pipe("customers", []byte(k), []byte(v), ts); err != nil {
						t.Fatal(err)
					}
				case x < 4:
					delete(table, k)
					if _, err := d.Pipe("customers", []byte(k), nil, ts); err != nil {
						t.Fatal(err)
					}
				default:
					o := fmt.Sprint("order", i)
					if v, ok := table[k]; ok {
						inner[k] = append(inner[k], o+"@"+v)
						left[k] = append(left[k], o+"@"+v)
					} else {
						left[k] = append(left[k], o+"@none")
					}
					if _, err := d.Pipe("orders", []byte(k), []byte(o), ts); err != nil {
						t.Fatal(err)
					}
				}
				if rng.IntN(50) == 0 {
					if err := d.Process(); err != nil {
						t.Fatal(err)
					}
				}
				if rng.IntN(150) == 0 {
					if err := d.Process(); err != nil {
						t.Fatal(err)
					}
					if err := d.Restart(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := d.Process(); err != nil {
				t.Fatal(err)
			}
			compareKeyed(t, "enriched", perKey(d, "enriched"), inner)
			compareKeyed(t, "enriched-left", perKey(d, "enriched-left"), left)
		})
	}
}

func compareKeyed(t *testing.T, topic string, got, want map[string][]string) {
	t.Helper()
	for k, w := range want {
		if strings.Join(got[k], ",") != strings.Join(w, ",") {
			t.Errorf("%s key %s:\n got %v\nwant %v", topic, k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s key %s: unexpected %v", topic, k, g)
		}
	}
}

// Within one task, records are taken by timestamp across its partitions: a
// table update piped after a stream record but with an earlier timestamp is
// applied first.
func TestJoinTimestampOrderAcrossTopics(t *testing.T) {
	d := newJoinDriver(t, joinTopology, nil)
	d.Pipe("orders", []byte("c1"), []byte("o1"), t0.Add(2*time.Second))
	d.Pipe("customers", []byte("c1"), []byte("ann"), t0.Add(time.Second))
	d.Pipe("orders", []byte("c1"), []byte("o2"), t0.Add(3*time.Second))
	d.Pipe("customers", []byte("c1"), []byte("bob"), t0.Add(3*time.Second)) // same ts: table first
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	compareKeyed(t, "enriched", perKey(d, "enriched"), map[string][]string{"c1": {"o1@ann", "o2@bob"}})
}

// A stream whose key changed (KeyBy) is repartitioned to the table's
// partition count before the join.
func TestJoinRepartitionsAfterKeyChange(t *testing.T) {
	build := func(b *Builder) {
		// orders keyed by order id, value "customer|item".
		orders := From(b, "orders", String(), String())
		byCustomer := KeyBy(orders, func(r Record[string, string]) (string, error) {
			c, _, _ := strings.Cut(r.Value, "|")
			return c, nil
		})
		customers := FromTable(b, "customers", String(), String(), "customers")
		Join(byCustomer, customers, func(r Record[string, string], c string) (string, error) {
			_, item, _ := strings.Cut(r.Value, "|")
			return r.Key + ":" + item + "@" + c, nil
		}, RepartitionValues(String())).To("enriched", String(), String())
	}
	d := newJoinDriver(t, build, map[string]int32{"orders": 2, "customers": 4})
	if n := d.partitions("shop-customers-join-0-repartition"); n != 4 {
		t.Fatalf("repartition topic has %d partitions, want the table's 4", n)
	}
	for i := range 8 {
		d.Pipe("customers", []byte(fmt.Sprint("c", i)), []byte(fmt.Sprint("name", i)), t0)
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		d.Pipe("orders", []byte(fmt.Sprint("o", i)), []byte(fmt.Sprintf("c%d|item%d", i%10, i)), t0.Add(time.Second))
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for i := range 20 {
		if c := i % 10; c < 8 {
			k := fmt.Sprint("c", c)
			want[k] = append(want[k], fmt.Sprintf("%s:item%d@name%d", k, i, c))
		}
	}
	compareKeyed(t, "enriched", perKey(d, "enriched"), want)
	if len(d.Records("shop-customers-join-0-repartition")) != 20 {
		t.Fatalf("repartition topic holds %d records, want 20", len(d.Records("shop-customers-join-0-repartition")))
	}
}

func TestJoinDeclarationErrors(t *testing.T) {
	b := NewBuilder()
	// int values have no inferred codec: the repartition needs one.
	orders := KeyBy(From(b, "orders", String(), JSON[int]()), func(r Record[string, int]) (string, error) { return "c", nil })
	customers := FromTable(b, "customers", String(), String(), "customers")
	Join(orders, customers, func(r Record[string, int], c string) (string, error) { return c, nil })
	FromTable(b, "customers", String(), String(), "other")
	FromTable(b, "more", String(), String(), "customers")
	_, err := NewApp("shop", b, Brokers("127.0.0.1:1"))
	for _, want := range []string{"RepartitionValues", `source "customers" declared twice`, `store "customers" declared twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewApp error %v lacks %q", err, want)
		}
	}
}

// The inputs of a sub-topology joining a table must be co-partitioned.
func TestJoinCopartitionMismatch(t *testing.T) {
	b := NewBuilder()
	joinTopology(b)
	_, err := NewDriver("shop", b, map[string]int32{"orders": 3, "customers": 2}, StateDir(t.TempDir()))
	if !errors.Is(err, ErrPartitionMismatch) {
		t.Fatalf("err = %v, want ErrPartitionMismatch", err)
	}
	for _, want := range []string{"customers (2 partitions)", "orders (3 partitions)", "co-partitioned"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// A keyed operator after a join of a single source needs no repartition:
// the table's sub-topology is co-partitioned. Tombstones delete table keys.
func TestCountAfterJoinAndTombstones(t *testing.T) {
	build := func(b *Builder) {
		orders := From(b, "orders", String(), String())
		customers := FromTable(b, "customers", String(), String(), "customers")
		joined := Join(orders, customers, func(r Record[string, string], c string) (string, error) { return c, nil })
		Count(GroupByKey(joined, Codecs(String(), String())), StoreConfig{Name: "per-customer", TTL: time.Hour}).
			ToStream().To("counts", String(), Int64())
	}
	d := newJoinDriver(t, build, map[string]int32{"orders": 2, "customers": 2})
	d.Pipe("customers", []byte("c1"), []byte("ann"), t0)
	d.Pipe("orders", []byte("c1"), []byte("o1"), t0.Add(time.Second))
	d.Pipe("customers", []byte("c1"), nil, t0.Add(2*time.Second))
	d.Pipe("orders", []byte("c1"), []byte("o2"), t0.Add(3*time.Second))
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range d.Topics() {
		if strings.HasSuffix(topic, "-repartition") {
			t.Fatalf("unexpected repartition topic %s", topic)
		}
	}
	if got := len(d.Records("counts")); got != 1 {
		t.Fatalf("%d counts, want 1 (the order after the tombstone finds no customer)", got)
	}
	desc := d.App().Describe()
	for _, want := range []string{"sub-topology 0 (tasks 0_0..0_1, inputs co-partitioned): customers (table customers), orders",
		"store customers: changelog customers; table"} {
		if !strings.Contains(desc, want) {
			t.Errorf("Describe lacks %q:\n%s", want, desc)
		}
	}
}

// A table record that does not decode goes to the table topic's DLQ and is
// not in the table, before and after a restore; a nil key is skipped.
func TestTableBadRecords(t *testing.T) {
	type tier struct {
		Level int `json:"level"`
	}
	build := func(b *Builder) {
		orders := From(b, "orders", String(), String())
		tiers := FromTable(b, "tiers", String(), JSON[tier](), "tiers")
		LeftJoin(orders, tiers, func(r Record[string, string], tv tier, found bool) (string, error) {
			return fmt.Sprint(r.Value, " ", found, " ", tv.Level), nil
		}).To("out", String(), String())
	}
	d := newJoinDriver(t, build, nil)
	d.Pipe("tiers", []byte("a"), []byte(`{"level":1}`), t0)
	d.Pipe("tiers", []byte("b"), []byte(`{"level":`), t0) // does not decode
	d.Pipe("tiers", nil, []byte(`{"level":3}`), t0)       // no key: skipped
	d.Pipe("orders", []byte("a"), []byte("o1"), t0.Add(time.Second))
	d.Pipe("orders", []byte("b"), []byte("o2"), t0.Add(time.Second))
	d.Pipe("orders", []byte(""), []byte("o3"), t0.Add(time.Second))
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	d.Pipe("orders", []byte("a"), []byte("o4"), t0.Add(2*time.Second))
	d.Pipe("orders", []byte("b"), []byte("o5"), t0.Add(2*time.Second))
	d.Pipe("orders", []byte(""), []byte("o6"), t0.Add(2*time.Second))
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	compareKeyed(t, "out", perKey(d, "out"), map[string][]string{
		"a": {"o1 true 1", "o4 true 1"}, "b": {"o2 false 0", "o5 false 0"}, "": {"o3 false 0", "o6 false 0"},
	})
	if dlq := d.Records("shop.dlq"); len(dlq) != 1 || string(dlq[0].Key) != "b" {
		t.Fatalf("shop.dlq = %v, want the undecodable record of b", dlq)
	}
}

// Merged sources form one sub-topology whose task count is the largest
// source's partition count; the task for partition p reads partition p of
// every source that has it.
func TestMergedSourcesShareTasks(t *testing.T) {
	build := func(b *Builder) {
		a := From(b, "a", String(), String())
		c := From(b, "b", String(), String())
		a.Merge(c).To("out", String(), String())
	}
	d := newJoinDriver(t, build, map[string]int32{"a": 3, "b": 1})
	for i := range 30 {
		d.Pipe("a", []byte(fmt.Sprint("k", i)), []byte("a"), t0.Add(time.Duration(i)*time.Millisecond))
		d.Pipe("b", []byte(fmt.Sprint("k", i)), []byte("b"), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	if n := len(d.Records("out")); n != 60 {
		t.Fatalf("%d outputs, want 60", n)
	}
	if len(d.tasks) != 3 {
		t.Fatalf("%d tasks, want 3 (one per partition of the larger input)", len(d.tasks))
	}
	for _, tp := range []topicPartition{{"a", 0}, {"b", 0}} {
		if id, _ := d.a.taskOf(tp.topic, tp.partition); id != (taskID{0, 0}) {
			t.Fatalf("%s-%d read by task %s, want 0_0", tp.topic, tp.partition, id)
		}
	}
	if desc := d.App().Describe(); !strings.Contains(desc, "sub-topology 0 (tasks 0_0..0_2): a, b") {
		t.Fatalf("Describe:\n%s", desc)
	}
}

// mergeByTimestamp (an App's round) keeps each partition's order, takes the
// smallest timestamp head first, and a table's record first on a tie.
func TestMergeByTimestamp(t *testing.T) {
	rec := func(topic string, off int64, sec int) *kgo.Record {
		return &kgo.Record{Topic: topic, Offset: off, Timestamp: t0.Add(time.Duration(sec) * time.Second)}
	}
	orders := []*kgo.Record{rec("orders", 0, 1), rec("orders", 1, 5), rec("orders", 2, 3), rec("orders", 3, 9)}
	table := []*kgo.Record{rec("customers", 0, 0), rec("customers", 1, 5), rec("customers", 2, 8)}
	got := mergeByTimestamp([][]*kgo.Record{orders, table}, func(topic string) bool { return topic == "customers" })
	var order []string
	for _, r := range got {
		order = append(order, fmt.Sprintf("%s@%d", r.Topic, r.Offset))
	}
	want := "customers@0 orders@0 customers@1 orders@1 orders@2 customers@2 orders@3"
	if s := strings.Join(order, " "); s != want {
		t.Fatalf("merged order\n got %s\nwant %s", s, want)
	}
}
