package streamtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/streamtest"
)

// TestQueryDriverStores: a Driver's App answers queries on its stores, for
// every partition, also after a Restart (the stores are restored from the
// changelogs on first use).
func TestQueryDriverStores(t *testing.T) {
	b := stream.NewBuilder()
	in := stream.From(b, "rides", stream.String(), stream.String())
	stream.Count(stream.GroupByKey(in, stream.Codecs(stream.String(), stream.String())), stream.StoreConfig{Name: "per-zone", TTL: time.Hour})
	d := streamtest.New(t, "q", b, streamtest.Partitions("rides", 3))
	rides := streamtest.NewInput(d, "rides", stream.String(), stream.String())
	want := map[string]int64{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 60 {
		zone := []string{"north", "south", "east", "west", "center"}[i%5]
		if i%7 == 0 {
			zone = "north"
		}
		want[zone]++
		rides.Pipe(zone, "r", t0.Add(time.Duration(i)*time.Second))
	}
	d.Process()
	check := func(when string) {
		t.Helper()
		q, err := stream.QueryStore[string, int64](d.App(), "per-zone")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for zone, n := range want {
			got, found, err := q.Get(ctx, zone)
			if err != nil || !found || got != n {
				t.Errorf("%s: %s = %d, %v, %v; want %d", when, zone, got, found, err, n)
			}
		}
		if _, found, err := q.Get(ctx, "nowhere"); found || err != nil {
			t.Errorf("%s: absent key: %v %v", when, found, err)
		}
		all, err := q.All(ctx, 0)
		if err != nil || len(all) != len(want) {
			t.Fatalf("%s: all = %v, %v", when, all, err)
		}
		for i := 1; i < len(all); i++ {
			if all[i-1].Key >= all[i].Key {
				t.Errorf("%s: entries out of order: %v", when, all)
			}
		}
	}
	check("after processing")
	d.Restart()
	check("after a restart")
}

// TestQueryDriverRepartitionedStore: a store behind a repartition topic
// (KeyBy) is queried by its new key.
func TestQueryDriverRepartitionedStore(t *testing.T) {
	b := stream.NewBuilder()
	rides := stream.From(b, "rides", stream.String(), stream.String()) // key: rider, value: zone
	byZone := stream.KeyBy(rides, func(r stream.Record[string, string]) (string, error) { return r.Value, nil })
	stream.Count(stream.GroupByKey(byZone, stream.Codecs(stream.String(), stream.String())), stream.StoreConfig{Name: "per-zone", TTL: time.Hour})
	d := streamtest.New(t, "q", b, streamtest.Partitions("rides", 4))
	in := streamtest.NewInput(d, "rides", stream.String(), stream.String())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, zone := range []string{"north", "south", "north", "north", "east"} {
		in.Pipe(string(rune('a'+i)), zone, t0)
	}
	d.Process()
	q, err := stream.QueryStore[string, int64](d.App(), "per-zone")
	if err != nil {
		t.Fatal(err)
	}
	for zone, want := range map[string]int64{"north": 3, "south": 1, "east": 1} {
		if got, found, err := q.Get(context.Background(), zone); err != nil || !found || got != want {
			t.Errorf("%s = %d, %v, %v; want %d", zone, got, found, err, want)
		}
	}
}
