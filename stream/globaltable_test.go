package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// globalTopology enriches orders (key: order id; value "<product>|<n>")
// with the global products table, inner and left.
func globalTopology(b *Builder) {
	orders := From(b, "orders", String(), String())
	products := FromGlobalTable(b, "products", String(), String(), "products")
	product := func(r Record[string, string]) (string, error) { p, _, _ := strings.Cut(r.Value, "|"); return p, nil }
	JoinGlobal(orders, products, product, func(r Record[string, string], p string) (string, error) {
		return r.Value + "@" + p, nil
	}).To("enriched", String(), String())
	LeftJoinGlobal(orders, products, product, func(r Record[string, string], p string, found bool) (string, error) {
		if !found {
			p = "none"
		}
		return r.Value + "@" + p, nil
	}).To("enriched-left", String(), String())
}

// TestGlobalTableJoinMatchesModel: orders on 3 partitions keyed by order
// id, a products global table on 2 (no co-partitioning), random product
// updates and deletions between orders, restarts (the global table restored
// from its topic); every order's enrichment equals the product's value when
// it was processed, and Get reads the replica.
func TestGlobalTableJoinMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			d := newJoinDriver(t, globalTopology, map[string]int32{"orders": 3, "products": 2})
			var products GlobalTable[string, string]
			for _, g := range d.App().b.globals {
				products = GlobalTable[string, string]{b: d.App().b, g: g, key: String(), value: String()}
			}
			table := map[string]string{}
			inner, left := map[string][]string{}, map[string][]string{}
			ts := t0
			for i := range 400 {
				ts = ts.Add(time.Millisecond)
				p := fmt.Sprint("p", rng.IntN(8))
				switch x := rng.IntN(10); {
				case x < 3:
					v := fmt.Sprint("name", i)
					table[p] = v
					if _, err := d.Pipe("products", []byte(p), []byte(v), ts); err != nil {
						t.Fatal(err)
					}
				case x < 4:
					delete(table, p)
					if _, err := d.Pipe("products", []byte(p), nil, ts); err != nil {
						t.Fatal(err)
					}
				default:
					o := fmt.Sprintf("%s|%d", p, i)
					key := fmt.Sprint("o", i)
					if v, ok := table[p]; ok {
						inner[key] = append(inner[key], o+"@"+v)
						left[key] = append(left[key], o+"@"+v)
					} else {
						left[key] = append(left[key], o+"@none")
					}
					if _, err := d.Pipe("orders", []byte(key), []byte(o), ts); err != nil {
						t.Fatal(err)
					}
					if err := d.Process(); err != nil {
						t.Fatal(err)
					}
				}
				if rng.IntN(80) == 0 {
					if err := d.Restart(); err != nil {
						t.Fatal(err)
					}
					if err := d.Process(); err != nil {
						t.Fatal(err)
					}
				}
			}
			compareKeyed(t, "enriched", perKey(d, "enriched"), inner)
			compareKeyed(t, "enriched-left", perKey(d, "enriched-left"), left)
			for p, want := range table {
				if v, ok, err := products.Get(d.App(), p); err != nil || !ok || v != want {
					t.Fatalf("Get(%s) = %q %v %v, want %q", p, v, ok, err, want)
				}
			}
			if _, ok, err := products.Get(d.App(), "absent"); ok || err != nil {
				t.Fatalf("Get(absent) = %v %v", ok, err)
			}
			for p, want := range table {
				e, ok, err := d.App().Get(context.Background(), "products", []byte(p))
				if err != nil || !ok || string(e.Value) != want {
					t.Fatalf("App.Get(products, %s) = %q %v %v, want %q", p, e.Value, ok, err, want)
				}
			}
			if desc := d.App().Describe(); !strings.Contains(desc, "global table products (store products)") {
				t.Fatalf("Describe does not state the global table:\n%s", desc)
			}
		})
	}
}

// TestGlobalTableOnWeirRestart runs the global join as an App on weir under
// each guarantee. While it is down (killed: nothing more committed), the
// products change and new orders arrive; the restarted App restores the
// global table to the topic's end before processing, so every new order sees
// the new values. Under ExactlyOnce each order is enriched exactly once
// (read_committed); under AtLeastOnce at least once, and never with a value
// other than the one its product had when it was written.
func TestGlobalTableOnWeirRestart(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(g.String(), func(t *testing.T) {
			b := startBrokerOn(t, weirBroker)
			b.createCompacted("products", 2)
			b.createTopic("orders", 3)
			b.createTopic("enriched", 3)
			b.createTopic("enriched-left", 3)
			committed := g == ExactlyOnce
			want := map[string]string{}
			products := func(suffix string) {
				var recs []*kgo.Record
				for p := range 6 {
					recs = append(recs, &kgo.Record{Topic: "products", Key: []byte(fmt.Sprint("p", p)),
						Value: []byte(fmt.Sprint("name", p, suffix)), Timestamp: t0})
				}
				b.produce(recs...)
			}
			orders := func(from, n int, suffix string) {
				var recs []*kgo.Record
				for i := from; i < from+n; i++ {
					o := fmt.Sprintf("p%d|%d", i%7, i) // p6 is no product
					if i%7 < 6 {
						want[fmt.Sprint("o", i)] = o + "@name" + fmt.Sprint(i%7) + suffix
					}
					recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprint("o", i)), Value: []byte(o),
						Timestamp: t0.Add(time.Minute)})
				}
				b.produce(recs...)
			}
			// Under AtLeastOnce an order of the first batch whose offset was
			// not committed before the crash is processed again after the
			// restart, and then sees the products' new values.
			replayed := map[string]string{}
			check := func(recs []*kgo.Record) bool {
				seen := map[string]int{}
				for _, r := range recs {
					if w := want[string(r.Key)]; w != string(r.Value) && (committed || replayed[string(r.Key)] != string(r.Value)) {
						t.Fatalf("order %s enriched %q, want %q", r.Key, r.Value, w)
					}
					seen[string(r.Key)]++
				}
				for o := range want {
					if seen[o] == 0 {
						return false
					}
					if committed && seen[o] > 1 {
						t.Fatalf("order %s enriched %d times under ExactlyOnce", o, seen[o])
					}
				}
				return true
			}
			dir := t.TempDir()
			opts := []Opt{testLogger(t), Delivery(g), StateDir(dir), CommitInterval(30 * time.Millisecond)}
			products("")
			a := b.run("glob", globalTopology, opts...)
			orders(0, 70, "")
			b.waitForIso("enriched", committed, 60*time.Second, check)
			if err := a.kill(); err != nil {
				t.Fatal(err)
			}
			for k, v := range want {
				replayed[k] = strings.Replace(v, "@name"+v[1:2], "@name"+v[1:2]+"-v2", 1)
			}
			products("-v2")
			// What Run does before it joins the group: once startGlobals
			// returns, the replica holds the topic up to its end.
			bl := NewBuilder()
			globalTopology(bl)
			pre, err := NewApp("glob", bl, append([]Opt{Brokers(b.seeds...)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			stop, err := pre.startGlobals(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			gt := GlobalTable[string, string]{b: bl, g: bl.globals[0], key: String(), value: String()}
			for p := range 6 {
				if v, ok, err := gt.Get(pre, fmt.Sprint("p", p)); err != nil || !ok || v != fmt.Sprint("name", p, "-v2") {
					stop()
					t.Fatalf("after the restore, Get(p%d) = %q %v %v, want name%d-v2", p, v, ok, err, p)
				}
			}
			stop()
			orders(70, 70, "-v2")
			a = b.run("glob", globalTopology, opts...)
			b.waitForIso("enriched", committed, 60*time.Second, check)
			gt = GlobalTable[string, string]{b: a.a.b, g: a.a.b.globals[0], key: String(), value: String()}
			if v, ok, err := gt.Get(a.a, "p3"); err != nil || !ok || v != "name3-v2" {
				t.Fatalf("Get(p3) = %q %v %v, want name3-v2", v, ok, err)
			}
			if err := a.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A global table's topic is read once per topology, and its store name is
// unique: both declaration errors reach NewApp.
func TestGlobalTableDeclarationErrors(t *testing.T) {
	b := NewBuilder()
	From(b, "products", String(), String()).To("out", String(), String())
	FromGlobalTable(b, "products", String(), String(), "p")
	if _, err := NewApp("app", b, Brokers("127.0.0.1:1")); err == nil || !strings.Contains(err.Error(), "already a source") {
		t.Fatalf("NewApp: %v, want the topic read twice", err)
	}
	b = NewBuilder()
	FromTable(b, "t", String(), String(), "store")
	FromGlobalTable(b, "g", String(), String(), "store")
	if _, err := NewApp("app", b, Brokers("127.0.0.1:1")); err == nil || !strings.Contains(err.Error(), "declared twice") {
		t.Fatalf("NewApp: %v, want the store declared twice", err)
	}
	b = NewBuilder()
	FromGlobalTable(b, "g", String(), String(), "store")
	Count(GroupByKey(From(b, "in", String(), String())), StoreConfig{Name: "store", NoExpiry: "x"})
	From(b, "g", String(), String())
	_, err := NewApp("app", b, Brokers("127.0.0.1:1"))
	if err == nil || !strings.Contains(err.Error(), "a global table's") || !strings.Contains(err.Error(), "read once") {
		t.Fatalf("NewApp: %v, want the store declared twice and the topic read twice", err)
	}
}
