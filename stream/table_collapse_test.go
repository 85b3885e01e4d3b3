package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A task run by an App collapses its tables' updates across rounds until a
// commit flushes them: rounds end without a table output, the commit's flush
// writes one changelog record and one downstream update per key with its
// latest value; an aborted transaction's collapsed updates are dropped.
func TestTableUpdatesCollapsedUntilCommit(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	Count(GroupByKey(in), StoreConfig{Name: "c", TTL: time.Hour}).ToStream().To("counts", String(), Int64())
	h := newHarness(t, b)
	tk := h.task("in", 0)
	tk.tablesAtCommit = true
	off := int64(0)
	round := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if err := tk.handle(context.Background(), &kgo.Record{Topic: "in", Key: []byte(k), Value: []byte("v"),
				Offset: off, Timestamp: t0}); err != nil {
				t.Fatal(err)
			}
			off++
		}
		if err := tk.endBatch(); err != nil {
			t.Fatal(err)
		}
		if err := tk.flushState(); err != nil {
			t.Fatal(err)
		}
	}
	round("a", "b", "a")
	round("a", "c")
	round("b")
	if n := len(h.topic("counts")) + len(h.topic("app-c-changelog")); n != 0 {
		t.Fatalf("%d records written by rounds without a commit, want 0", n)
	}
	if err := flushTablesForCommit([]*task{tk}, true); err != nil {
		t.Fatal(err)
	}
	want := []string{"a=" + enc64(3), "b=" + enc64(2), "c=" + enc64(1)}
	for _, topic := range []string{"counts", "app-c-changelog"} {
		if got := values(h.topic(topic)); !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q (latest per key since the last commit)", topic, got, want)
		}
	}
	// Under ExactlyOnce an abort drops what the transaction collapsed.
	tk.beginRound()
	round("a", "a")
	tk.abortRound()
	if err := flushTablesForCommit([]*task{tk}, true); err != nil {
		t.Fatal(err)
	}
	if n := len(h.topic("counts")); n != 3 {
		t.Fatalf("%d outputs after an aborted round's flush, want still 3", n)
	}
}

// The collapsed updates are bounded by an eighth of StoreCache: past it,
// the round ends with a flush.
func TestTableUpdatesFlushedAtCacheBound(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	Count(GroupByKey(in), StoreConfig{Name: "c", TTL: time.Hour}).ToStream().To("counts", String(), Int64())
	h := newHarness(t, b, StoreCache(8*2000))
	tk := h.task("in", 0)
	tk.tablesAtCommit = true
	for i := range 40 {
		k := fmt.Sprint("key-", i)
		if err := tk.handle(context.Background(), &kgo.Record{Topic: "in", Key: []byte(k), Value: []byte("v"),
			Offset: int64(i), Timestamp: t0}); err != nil {
			t.Fatal(err)
		}
		if err := tk.endBatch(); err != nil {
			t.Fatal(err)
		}
		if p := tk.tablesPending(); p > 2000 {
			t.Fatalf("after round %d: %d bytes collapsed, bound 2000", i, p)
		}
	}
	if n := len(h.topic("counts")); n == 0 || n == 40 {
		t.Fatalf("%d outputs for 40 keys with a 2000-byte bound, want some flushed, not every round", n)
	}
}

// ToStream forwards deletions: a table topic's tombstone, a key expired by
// the store's TTL and a key deleted by ToTable reach a sink as records with
// a null value; and a deletion is not forwarded for a key downstream never
// saw.
func TestToStreamForwardsDeletions(t *testing.T) {
	d := newJoinDriver(t, func(b *Builder) {
		FromTable(b, "customers", String(), String(), "customers").ToStream().To("customers-out", String(), String())
		in := From(b, "in", String(), String())
		Count(GroupByKey(in), StoreConfig{Name: "n", TTL: time.Minute}).ToStream().To("counts", String(), Int64())
		// A table of a table's stream: a tombstone deletes the key.
		FromTable(b, "profiles", String(), String(), "profiles").ToStream().
			ToTable(StoreConfig{Name: "copy", NoExpiry: "test"}).ToStream().To("copy-out", String(), String())
	}, nil)
	pipe := func(topic, k string, v []byte, ts time.Time) {
		t.Helper()
		if _, err := d.Pipe(topic, []byte(k), v, ts); err != nil {
			t.Fatal(err)
		}
		if err := d.Process(); err != nil {
			t.Fatal(err)
		}
	}
	pipe("customers", "ann", []byte("Ann"), t0)
	pipe("customers", "ann", nil, t0)
	pipe("customers", "bob", nil, t0) // never existed: nothing forwarded
	pipe("in", "x", []byte("v"), t0)
	pipe("in", "y", []byte("v"), t0.Add(2*time.Minute)) // stream time passes x's TTL
	pipe("profiles", "p", []byte("P1"), t0)
	pipe("profiles", "p", nil, t0)

	show := func(topic string) []string {
		var out []string
		for _, r := range d.Records(topic) {
			if r.Value == nil {
				out = append(out, string(r.Key)+"=<nil>")
			} else {
				out = append(out, string(r.Key)+"="+string(r.Value))
			}
		}
		return out
	}
	if got, want := show("customers-out"), []string{"ann=Ann", "ann=<nil>"}; !slices.Equal(got, want) {
		t.Errorf("customers-out = %q, want %q", got, want)
	}
	if got, want := show("counts"), []string{"x=" + enc64(1), "y=" + enc64(1), "x=<nil>"}; !slices.Equal(got, want) {
		t.Errorf("counts = %q, want %q (x expired)", got, want)
	}
	if got, want := show("copy-out"), []string{"p=P1", "p=<nil>"}; !slices.Equal(got, want) {
		t.Errorf("copy-out = %q, want %q", got, want)
	}
	if got, want := show("shop-copy-changelog"), []string{"p=P1", "p=<nil>"}; !slices.Equal(got, want) {
		t.Errorf("copy changelog = %q, want %q", got, want)
	}
}

// Changes carries each update's previous value as downstream saw it: summing
// New-Old over a table's changes gives the table's final sum, however its
// updates were collapsed between commits, with deletions (TTL) included.
func TestChangesDeltasExactWhenCollapsed(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), Int64())
	latest := in.ToTable(StoreConfig{Name: "latest", TTL: time.Minute})
	var sum int64
	var changes, deletions int
	Changes(latest).Peek(func(r Record[string, Change[int64]]) {
		changes++
		if !r.Value.HasNew {
			deletions++
		}
		if r.Value.HasOld {
			sum -= r.Value.Old
		}
		if r.Value.HasNew {
			sum += r.Value.New
		}
	})
	h := newHarness(t, b)
	tk := h.task("in", 0)
	tk.tablesAtCommit = true
	rng := rand.New(rand.NewPCG(3, 4))
	truth := map[string]int64{}
	lastSeen := map[string]int64{}
	now := t0
	for i := range 400 {
		k := fmt.Sprint("k", rng.IntN(12))
		v := rng.Int64N(100)
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		vb, _ := Int64().Encode(v)
		if err := tk.handle(context.Background(), &kgo.Record{Topic: "in", Key: []byte(k), Value: vb,
			Offset: int64(i), Timestamp: now}); err != nil {
			t.Fatal(err)
		}
		truth[k] = v
		lastSeen[k] = now.UnixMilli()
		if rng.IntN(5) == 0 {
			if err := tk.endBatch(); err != nil {
				t.Fatal(err)
			}
			if err := tk.flushState(); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(40) == 0 {
			if err := flushTablesForCommit([]*task{tk}, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tk.endBatch(); err != nil {
		t.Fatal(err)
	}
	if err := flushTablesForCommit([]*task{tk}, true); err != nil {
		t.Fatal(err)
	}
	// The store's state: what expiry left.
	tk.txn = tk.db.Begin()
	var want int64
	for k, v := range truth {
		raw, found, err := tk.store("latest").get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if found {
			got, _ := Int64().Decode(raw)
			if got != v {
				t.Fatalf("store[%s] = %d, want %d", k, got, v)
			}
			want += v
		}
	}
	if sum != want {
		t.Fatalf("sum of deltas = %d, want the table's sum %d", sum, want)
	}
	if deletions == 0 || changes >= 400 {
		t.Fatalf("%d changes, %d deletions for 400 updates: want some expired and some collapsed", changes, deletions)
	}
}

// A bounded run ends only once every table update reached the operators
// after it: the changes of counts per key (New-Old), re-keyed to one key (a
// second sub-topology after a repartition) and summed, come out as the
// number of events at the end of RunBounded, under both guarantees (a table
// collapsing until the final commit would leave the sum short).
func TestRunBoundedFlushesTables(t *testing.T) {
	type delta struct{ N int64 }
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			b := startBrokerFor(t, g)
			b.createTopic("events", 3)
			b.createTopic("out", 3)
			var recs []*kgo.Record
			for i := range 90 {
				recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(key(i % 9)), Value: []byte("e"),
					Timestamp: t0.Add(time.Duration(i) * time.Millisecond)})
			}
			b.produce(recs...)
			bl := NewBuilder()
			perKey := Count(GroupByKey(From(bl, "events", String(), String())), StoreConfig{Name: "per-key", NoExpiry: "9 keys"})
			deltas := MapValues(Changes(perKey), func(r Record[string, Change[int64]]) (delta, error) {
				return delta{N: r.Value.New - r.Value.Old}, nil
			})
			all := GroupBy(deltas, func(Record[string, delta]) (string, error) { return "all", nil })
			Aggregate(all, StoreConfig{Name: "total", NoExpiry: "one key"}, func() int64 { return 0 },
				func(r Record[string, delta], sum int64) (int64, error) { return sum + r.Value.N, nil }).
				ToStream().To("out", String(), Int64())
			a, err := NewApp("bounded-tables", bl, testLogger(t), Brokers(b.seeds...), Delivery(g), StateDir(t.TempDir()),
				CommitInterval(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := a.RunBounded(ctx); err != nil {
				t.Fatalf("RunBounded: %v", err)
			}
			out := b.readCommitted("out")
			if len(out) == 0 {
				t.Fatal("no output after the bounded run")
			}
			if n, _ := Int64().Decode(out[len(out)-1].Value); n != 90 {
				t.Fatalf("sum of the count changes = %d at the end of the run, want 90", n)
			}
		})
	}
}
