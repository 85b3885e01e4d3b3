package streamtest_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/streamtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type ride struct {
	Zone  string `json:"zone"`
	Rider string `json:"rider"`
}

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

func surge(b *stream.Builder) {
	rides := stream.From(b, "rides", stream.String(), stream.JSON[ride]())
	valid := rides.Filter(func(r stream.Record[string, ride]) (bool, error) {
		if r.Value.Zone == "" {
			return false, errors.New("ride without zone")
		}
		return true, nil
	})
	byZone := stream.KeyBy(valid, func(r stream.Record[string, ride]) (string, error) { return r.Value.Zone, nil })
	stream.Count(stream.GroupByKey(byZone, stream.Codecs(stream.String(), stream.JSON[ride]())),
		stream.StoreConfig{Name: "rides-per-zone", TTL: time.Hour}).
		ToStream().To("rides-per-zone", stream.String(), stream.Int64())
}

func TestDriverCountsAcrossRepartition(t *testing.T) {
	b := stream.NewBuilder()
	surge(b)
	d := streamtest.New(t, "surge", b, streamtest.Partitions("rides", 4), streamtest.Partitions("rides-per-zone", 4),
		streamtest.AppOpts(stream.MaxAttempts(2)))
	rides := streamtest.NewInput(d, "rides", stream.String(), stream.JSON[ride]())
	want := map[string]int64{}
	for i := range 200 {
		zone := fmt.Sprintf("zone-%d", i%7)
		want[zone]++
		rides.Pipe(fmt.Sprintf("rider-%d", i%13), ride{Zone: zone, Rider: fmt.Sprint(i)}, t0.Add(time.Duration(i)*time.Second))
	}
	rides.Pipe("rider-x", ride{}, t0)                 // processing error: retried, then dead-lettered
	rides.PipeRaw([]byte("rider-y"), []byte("{"), t0) // does not decode
	d.Process()

	out := streamtest.NewOutput(d, "rides-per-zone", stream.String(), stream.Int64())
	got := streamtest.Latest(out)
	for zone, n := range want {
		if got[zone] != n {
			t.Errorf("%s: count %d, want %d", zone, got[zone], n)
		}
	}
	// Per zone the updates are 1, 2, 3, ... and every zone stays in one
	// partition of the output.
	seen := map[string]int64{}
	part := map[string]int32{}
	for _, r := range out.Records() {
		if r.Value != seen[r.Key]+1 {
			t.Fatalf("%s: update %d after %d", r.Key, r.Value, seen[r.Key])
		}
		seen[r.Key] = r.Value
		if p, ok := part[r.Key]; ok && p != r.Origin.Partition {
			t.Fatalf("%s in partitions %d and %d", r.Key, p, r.Origin.Partition)
		}
		part[r.Key] = r.Origin.Partition
	}
	dlq := d.Records("surge.dlq")
	if len(dlq) != 2 {
		t.Fatalf("dlq has %d records, want 2", len(dlq))
	}
	topics := d.Topics()
	for _, want := range []string{"rides", "surge-rides-per-zone-repartition", "surge-rides-per-zone-changelog", "rides-per-zone", "surge.dlq"} {
		if !slices.Contains(topics, want) {
			t.Errorf("topics %v lack %s", topics, want)
		}
	}
}

// The driver is deterministic: the same input gives byte-identical output.
func TestDriverDeterministic(t *testing.T) {
	run := func() []stream.Record[[]byte, []byte] {
		b := stream.NewBuilder()
		surge(b)
		d := streamtest.New(t, "surge", b, streamtest.Partitions("rides", 3))
		in := streamtest.NewInput(d, "rides", stream.String(), stream.JSON[ride]())
		for i := range 100 {
			in.Pipe(fmt.Sprint("r", i%9), ride{Zone: fmt.Sprint("z", i%5)}, t0.Add(time.Duration(i)*time.Millisecond))
		}
		d.Process()
		return d.Records("rides-per-zone")
	}
	a, b := run(), run()
	if len(a) != len(b) || len(a) != 100 {
		t.Fatalf("runs produced %d and %d records, want 100", len(a), len(b))
	}
	for i := range a {
		if string(a[i].Key) != string(b[i].Key) || string(a[i].Value) != string(b[i].Value) || a[i].Origin != b[i].Origin {
			t.Fatalf("record %d differs: %v vs %v", i, a[i], b[i])
		}
	}
}

// State survives Restart (rebuilt from the changelogs alone): the same
// input with and without restarts in between gives the same outputs.
func TestRestartRestoresFromChangelog(t *testing.T) {
	run := func(restart bool) []stream.Record[[]byte, []byte] {
		b := stream.NewBuilder()
		rides := stream.From(b, "rides", stream.String(), stream.JSON[ride]())
		byZone := stream.KeyBy(rides, func(r stream.Record[string, ride]) (string, error) { return r.Value.Zone, nil })
		g := stream.GroupByKey(byZone, stream.Codecs(stream.String(), stream.JSON[ride]()))
		stream.Count(g, stream.StoreConfig{Name: "n", TTL: time.Minute}).ToStream().To("n", stream.String(), stream.Int64())
		stream.Reduce(g, stream.StoreConfig{Name: "last", TTL: time.Minute},
			func(_, v ride) (ride, error) { return v, nil }).ToStream().To("last", stream.String(), stream.JSON[ride]())
		d := streamtest.New(t, "app", b, streamtest.Partitions("rides", 3))
		in := streamtest.NewInput(d, "rides", stream.String(), stream.JSON[ride]())
		for i := range 300 {
			// Event time jumps now and then, so TTL expiry (tombstones) is
			// part of what the changelog must reproduce.
			// Zones z4-z6 pause across the jump and a restart, so they
			// must come back expired (their tombstones restored) rather
			// than with their old state.
			ts := t0.Add(time.Duration(i) * time.Second)
			zone := i % 7
			if i > 150 {
				ts = ts.Add(10 * time.Minute)
				if i < 260 {
					zone = i % 4
				}
			}
			in.Pipe(fmt.Sprint("r", i%11), ride{Zone: fmt.Sprint("z", zone), Rider: fmt.Sprint(i)}, ts)
			if i%37 == 36 { // same processing cadence in both runs: same interleaving
				d.Process()
				if restart {
					d.Restart()
				}
			}
		}
		d.Process()
		return append(d.Records("n"), d.Records("last")...)
	}
	perKey := func(rs []stream.Record[[]byte, []byte]) map[string][]string {
		m := map[string][]string{}
		for _, r := range rs {
			k := r.Origin.Topic + "/" + string(r.Key)
			m[k] = append(m[k], fmt.Sprintf("%x", r.Value))
		}
		return m
	}
	want, got := perKey(run(false)), perKey(run(true))
	if len(want) != len(got) {
		t.Fatalf("%d keys with restarts, %d without", len(got), len(want))
	}
	for k, w := range want {
		if !slices.Equal(w, got[k]) {
			t.Fatalf("%s: %v with restarts, %v without", k, got[k], w)
		}
	}
}

type customer struct {
	Name string `json:"name"`
	Tier string `json:"tier"`
}

// An order stream enriched with a customers table: table updates and
// deletes, a restart that restores the table from its topic, and the
// co-partitioning the driver checks like an App.
func TestDriverStreamTableJoin(t *testing.T) {
	build := func(b *stream.Builder) {
		orders := stream.From(b, "orders", stream.String(), stream.Int64()) // key: customer id, value: amount
		customers := stream.FromTable(b, "customers", stream.String(), stream.JSON[customer](), "customers")
		stream.LeftJoin(orders, customers, func(r stream.Record[string, int64], c customer, found bool) (string, error) {
			if !found {
				return fmt.Sprintf("%d by unknown", r.Value), nil
			}
			return fmt.Sprintf("%d by %s (%s)", r.Value, c.Name, c.Tier), nil
		}).To("orders-enriched", stream.String(), stream.String())
	}
	b := stream.NewBuilder()
	build(b)
	d := streamtest.New(t, "shop", b, streamtest.Partitions("orders", 3), streamtest.Partitions("customers", 3))
	customers := streamtest.NewInput(d, "customers", stream.String(), stream.JSON[customer]())
	orders := streamtest.NewInput(d, "orders", stream.String(), stream.Int64())
	out := streamtest.NewOutput(d, "orders-enriched", stream.String(), stream.String())

	customers.Pipe("c1", customer{Name: "Ann", Tier: "gold"}, t0)
	customers.Pipe("c2", customer{Name: "Bob", Tier: "basic"}, t0)
	orders.Pipe("c1", 10, t0.Add(time.Minute))
	orders.Pipe("c3", 5, t0.Add(time.Minute))
	d.Process()
	d.Restart()                                   // the table is restored from the customers topic
	orders.Pipe("c1", 15, t0.Add(90*time.Second)) // before the next update: sees the restored value
	customers.Pipe("c1", customer{Name: "Ann", Tier: "platinum"}, t0.Add(2*time.Minute))
	customers.Delete("c2", t0.Add(2*time.Minute))
	orders.Pipe("c2", 7, t0.Add(3*time.Minute))
	orders.Pipe("c1", 20, t0.Add(3*time.Minute))
	d.Process()

	var got []string
	for _, r := range out.Records() {
		got = append(got, r.Key+": "+r.Value)
	}
	slices.Sort(got)
	want := []string{"c1: 10 by Ann (gold)", "c1: 15 by Ann (gold)", "c1: 20 by Ann (platinum)", "c2: 7 by unknown", "c3: 5 by unknown"}
	if !slices.Equal(got, want) {
		t.Fatalf("enriched orders:\n got %q\nwant %q", got, want)
	}

	b2 := stream.NewBuilder()
	build(b2)
	if _, err := stream.NewDriver("shop", b2, map[string]int32{"orders": 3, "customers": 1}, stream.StateDir(t.TempDir())); !errors.Is(err, stream.ErrPartitionMismatch) {
		t.Fatalf("NewDriver with 3 order and 1 customer partitions: %v, want ErrPartitionMismatch", err)
	}
}
