package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tableJoinTopology joins tables "left" and "right" (string values) three
// ways; each result table goes to an output topic through ToStream, so the
// latest record per key of an output (a null value: deleted) is the result
// table.
func tableJoinTopology(b *Builder) {
	l := FromTable(b, "left", String(), String(), "left")
	r := FromTable(b, "right", String(), String(), "right")
	JoinTables(l, r, StoreConfig{Name: "inner", NoExpiry: "test"}, func(k, lv, rv string) (string, error) {
		return lv + "+" + rv, nil
	}).ToStream().To("inner", String(), String())
	LeftJoinTables(l, r, StoreConfig{Name: "leftj", NoExpiry: "test"}, func(k, lv, rv string, rok bool) (string, error) {
		if !rok {
			rv = "-"
		}
		return lv + "+" + rv, nil
	}).ToStream().To("leftj", String(), String())
	OuterJoinTables(l, r, StoreConfig{Name: "outer", NoExpiry: "test"},
		func(k, lv string, lok bool, rv string, rok bool) (string, error) {
			if !lok {
				lv = "-"
			}
			if !rok {
				rv = "-"
			}
			return lv + "+" + rv, nil
		}).ToStream().To("outer", String(), String())
}

// batchTableJoins computes the three joins of two tables from scratch.
func batchTableJoins(l, r map[string]string) (inner, left, outer map[string]string) {
	inner, left, outer = map[string]string{}, map[string]string{}, map[string]string{}
	for k, lv := range l {
		rv, ok := r[k]
		if ok {
			inner[k] = lv + "+" + rv
			left[k] = lv + "+" + rv
			outer[k] = lv + "+" + rv
		} else {
			left[k] = lv + "+-"
			outer[k] = lv + "+-"
		}
	}
	for k, rv := range r {
		if _, ok := l[k]; !ok {
			outer[k] = "-+" + rv
		}
	}
	return inner, left, outer
}

// tableOf folds an upsert topic into its table: the latest value per key, a
// null value deleting the key.
func tableOf(recs []Record[[]byte, []byte]) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		if r.Value == nil {
			delete(out, string(r.Key))
		} else {
			out[string(r.Key)] = string(r.Value)
		}
	}
	return out
}

// TestTableJoinsMatchBatch pipes random updates and tombstones into two
// co-partitioned tables (three partitions), processing and restarting (the
// stores restored from their topics and changelogs) at random points, and
// checks after every processing that each join's output topic, read as a
// table, equals the join computed from scratch over the two tables' current
// contents; and that every result store agrees.
func TestTableJoinsMatchBatch(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 15))
			d := newJoinDriver(t, tableJoinTopology, map[string]int32{"left": 3, "right": 3})
			l, r := map[string]string{}, map[string]string{}
			ts := t0
			check := func() {
				t.Helper()
				if err := d.Process(); err != nil {
					t.Fatal(err)
				}
				inner, left, outer := batchTableJoins(l, r)
				for name, want := range map[string]map[string]string{"inner": inner, "leftj": left, "outer": outer} {
					if got := tableOf(d.Records(name)); !maps.Equal(got, want) {
						t.Fatalf("%s join:\n got %v\nwant %v", name, got, want)
					}
					q, err := QueryStore[string, string](d.App(), name)
					if err != nil {
						t.Fatal(err)
					}
					for k, w := range want {
						if v, ok, err := q.Get(context.Background(), k); err != nil || !ok || v != w {
							t.Fatalf("%s store[%s] = %q %v %v, want %q", name, k, v, ok, err, w)
						}
					}
				}
			}
			for i := range 500 {
				ts = ts.Add(time.Duration(rng.IntN(3)) * time.Millisecond) // ties too
				k := fmt.Sprint("k", rng.IntN(15))
				side, m := "left", l
				if rng.IntN(2) == 0 {
					side, m = "right", r
				}
				var v []byte
				if rng.IntN(4) == 0 {
					delete(m, k)
				} else {
					v = []byte(fmt.Sprint(side[:1], i))
					m[k] = string(v)
				}
				if _, err := d.Pipe(side, []byte(k), v, ts); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(20) == 0 {
					check()
				}
				if rng.IntN(100) == 0 {
					check()
					if err := d.Restart(); err != nil {
						t.Fatal(err)
					}
				}
			}
			check()
		})
	}
}

// Two aggregate tables from different topics, re-keyed (so each is
// repartitioned), joined: both repartition topics land in the join's
// co-partitioned sub-topology, and the result follows both aggregates.
func TestJoinTablesOfAggregates(t *testing.T) {
	d := newJoinDriver(t, func(b *Builder) {
		clicks := GroupBy(From(b, "clicks", String(), String()),
			func(r Record[string, string]) (string, error) { return r.Value, nil })
		buys := GroupBy(From(b, "buys", String(), String()),
			func(r Record[string, string]) (string, error) { return r.Value, nil })
		nc := Count(clicks, StoreConfig{Name: "clicks-per-item", NoExpiry: "test"})
		nb := Count(buys, StoreConfig{Name: "buys-per-item", NoExpiry: "test"})
		JoinTables(nc, nb, StoreConfig{Name: "conversion", NoExpiry: "test"}, func(_ string, c, b int64) (string, error) {
			return fmt.Sprintf("%d/%d", b, c), nil
		}).ToStream().To("conversion", String(), String())
	}, map[string]int32{"clicks": 2, "buys": 4})
	pipe := func(topic, user, item string) {
		if _, err := d.Pipe(topic, []byte(user), []byte(item), t0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		pipe("clicks", fmt.Sprint("u", i), fmt.Sprint("item", i%3))
	}
	for i := range 5 {
		pipe("buys", fmt.Sprint("u", i), fmt.Sprint("item", i%2))
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	got := tableOf(d.Records("conversion"))
	want := map[string]string{"item0": "3/7", "item1": "2/7"}
	if !maps.Equal(got, want) {
		t.Fatalf("conversion = %v, want %v", got, want)
	}
}

// Declaring a join of tables from different builders, or with a result
// codec that cannot be inferred, is an error NewApp returns; nothing panics.
func TestJoinTablesDeclarationErrors(t *testing.T) {
	b1, b2 := NewBuilder(), NewBuilder()
	l := FromTable(b1, "l", String(), String(), "l")
	r := FromTable(b2, "r", String(), String(), "r")
	JoinTables(l, r, StoreConfig{Name: "j", NoExpiry: "x"}, func(k, a, b string) (string, error) { return a, nil }).
		ToStream().To("out", String(), String())
	if _, err := NewApp("app", b1, Brokers("127.0.0.1:1")); err == nil {
		t.Fatal("NewApp accepted a join of tables from two builders")
	}
	b := NewBuilder()
	l = FromTable(b, "l", String(), String(), "l")
	r = FromTable(b, "r", String(), String(), "r")
	JoinTables(l, r, StoreConfig{Name: "j", NoExpiry: "x"}, func(k, a, b string) (chan int, error) { return nil, nil }).
		ToStream().Peek(func(Record[string, chan int]) {})
	if _, err := NewApp("app", b, Brokers("127.0.0.1:1")); err == nil {
		t.Fatal("NewApp accepted a result type with no codec")
	}
}

// TestTableJoinsOnWeirRestart runs the three table joins as an App on weir's
// broker under each guarantee: updates and tombstones of both tables, a
// crash (nothing more committed or checkpointed) in the middle, more updates,
// a restart on the same state directory, and a second crash and restart on
// an empty one (restored from the changelogs and the tables' topics). Each
// join's output topic read as a table (read_committed under ExactlyOnce)
// must equal the join computed from scratch over the final tables.
func TestTableJoinsOnWeirRestart(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(g.String(), func(t *testing.T) {
			b := startBrokerOn(t, weirBroker)
			b.createCompacted("left", 3)
			b.createCompacted("right", 3)
			for _, o := range []string{"inner", "leftj", "outer"} {
				b.createTopic(o, 3)
			}
			committed := g == ExactlyOnce
			rng := rand.New(rand.NewPCG(21, uint64(g)))
			l, r := map[string]string{}, map[string]string{}
			i := 0
			produce := func(n int) {
				var recs []*kgo.Record
				for range n {
					i++
					k := fmt.Sprint("k", rng.IntN(40))
					side, m := "left", l
					if rng.IntN(2) == 0 {
						side, m = "right", r
					}
					var v []byte
					if rng.IntN(4) == 0 {
						delete(m, k)
					} else {
						v = []byte(fmt.Sprint(side[:1], i))
						m[k] = string(v)
					}
					recs = append(recs, &kgo.Record{Topic: side, Key: []byte(k), Value: v, Timestamp: t0.Add(time.Duration(i) * time.Millisecond)})
				}
				b.produce(recs...)
			}
			crashRestartRuns(t, b, "tj", tableJoinTopology, g, rng, produce, func() {
				inner, left, outer := batchTableJoins(l, r)
				b.waitTables(committed, 60*time.Second, map[string]map[string]string{"inner": inner, "leftj": left, "outer": outer})
			})
		})
	}
}

// Tables joined on their key must be co-partitioned: tables of topics with
// different partition counts are refused at start, naming both.
func TestJoinTablesCopartitionChecked(t *testing.T) {
	b := NewBuilder()
	tableJoinTopology(b)
	_, err := NewDriver("shop", b, map[string]int32{"left": 3, "right": 2}, StateDir(t.TempDir()))
	if !errors.Is(err, ErrPartitionMismatch) || !strings.Contains(err.Error(), "left (3 partitions)") ||
		!strings.Contains(err.Error(), "right (2 partitions)") {
		t.Fatalf("NewDriver: %v, want ErrPartitionMismatch naming both topics", err)
	}
}
