package stream_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/weirhq/weir/stream"
)

// Counting rides per zone across a repartition, without a broker (package
// streamtest wraps the Driver for tests). With a broker, the same Builder
// goes to stream.NewApp and app.Run.
func ExampleNewDriver() {
	b := stream.NewBuilder()
	rides := stream.From(b, "rides", stream.String(), stream.String()) // key: rider, value: zone
	byZone := stream.KeyBy(rides, func(r stream.Record[string, string]) (string, error) { return r.Value, nil })
	stream.Count(stream.GroupByKey(byZone, stream.Codecs(stream.String(), stream.String())),
		stream.StoreConfig{Name: "per-zone", TTL: time.Hour}).
		ToStream().To("per-zone", stream.String(), stream.Int64())

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("surge", b, map[string]int32{"rides": 3}, stream.StateDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	at := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	for i, zone := range []string{"north", "south", "north", "north"} {
		d.Pipe("rides", []byte(fmt.Sprint("rider-", i)), []byte(zone), at.Add(time.Duration(i)*time.Minute))
	}
	if err := d.Process(); err != nil {
		fmt.Println(err)
		return
	}
	var updates []string
	for _, r := range d.Records("per-zone") {
		n, _ := stream.Int64().Decode(r.Value)
		updates = append(updates, fmt.Sprintf("%s=%d", r.Key, n))
	}
	fmt.Println(strings.Join(updates, " "))
	fmt.Print(d.App().Describe())
	// Output:
	// north=1 south=1 north=2 north=3
	// app surge (at-least-once)
	//   sub-topology 0 (tasks 0_0..0_2): rides
	//     operators: source-0(rides)>1 keyby-1>2 repartition-2(per-zone-repartition)
	//   sub-topology 1 (tasks 1_0..1_2): surge-per-zone-repartition
	//     operators: source-3(surge-per-zone-repartition)>4 count-per-zone>5 to-5(per-zone)
	//   repartition surge-per-zone-repartition: at-least-once — idempotent producer (acks=all); input offsets committed after every output is acknowledged; a crash replays uncommitted input: duplicates visible after a crash; order: per key within a partition (murmur2 key partitioning, idempotent producer keeps order across retries)
	//   output      per-zone: at-least-once — idempotent producer (acks=all); input offsets committed after every output is acknowledged; a crash replays uncommitted input: duplicates visible after a crash; order: per key within a partition (murmur2 key partitioning, idempotent producer keeps order across retries)
	//   changelog   surge-per-zone-changelog: at-least-once — idempotent producer (acks=all); input offsets committed after every output is acknowledged; a crash replays uncommitted input: duplicates visible after a crash; the store may count a replayed record twice (state >= true state); order: per key; written to the task's partition
	//   dead-letter surge.dlq: at-least-once — idempotent producer (acks=all); input offsets committed after every output is acknowledged; a crash replays uncommitted input: duplicates visible after a crash; permanent failures (decode errors, panics, errors not worth retrying) at once, retriable ones after 3 attempts; order: none across keys; headers name the failing operator and the original topic/partition/offset
	//   store per-zone: TTL 1h0m0s (event time), changelog surge-per-zone-changelog; local Pebble store per task; on assignment replays the changelog from the local checkpoint (written at each commit), or from the start if there is none
	//   event time: watermark = largest event time - 0s per source partition, never idle; task watermark = minimum over its inputs, never backwards, kept with the committed offsets
	//   event time through surge-per-zone-repartition: no markers (Driver): the largest event time read, as a source
}

// Enriching orders with a customers table (both keyed by customer id,
// co-partitioned), without a broker. The customers topic is the table's
// changelog: no other topic is created for it.
func ExampleLeftJoin() {
	b := stream.NewBuilder()
	orders := stream.From(b, "orders", stream.String(), stream.Int64())                  // key: customer, value: amount
	tiers := stream.FromTable(b, "customers", stream.String(), stream.String(), "tiers") // value: tier
	stream.LeftJoin(orders, tiers, func(r stream.Record[string, int64], tier string, found bool) (string, error) {
		if !found {
			tier = "new"
		}
		return fmt.Sprintf("%d (%s)", r.Value, tier), nil
	}).To("orders-by-tier", stream.String(), stream.String())

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("shop", b, map[string]int32{"orders": 2, "customers": 2}, stream.StateDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	at := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	amount := func(n int64) []byte { v, _ := stream.Int64().Encode(n); return v }
	d.Pipe("customers", []byte("ann"), []byte("gold"), at)
	d.Pipe("orders", []byte("ann"), amount(30), at.Add(time.Minute))
	d.Pipe("orders", []byte("bob"), amount(12), at.Add(time.Minute))
	d.Pipe("customers", []byte("ann"), nil, at.Add(2*time.Minute)) // tombstone: ann leaves the table
	d.Pipe("orders", []byte("ann"), amount(5), at.Add(3*time.Minute))
	if err := d.Process(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range d.Records("orders-by-tier") {
		fmt.Printf("%s: %s\n", r.Key, r.Value)
	}
	fmt.Print(strings.SplitAfter(d.App().Describe(), "\n")[1])
	// Output:
	// ann: 30 (gold)
	// bob: 12 (new)
	// ann: 5 (new)
	//   sub-topology 0 (tasks 0_0..0_1, inputs co-partitioned): customers (table tiers), orders
}

// Querying a store: QueryStore reads through the store's codecs. On a
// running App the same calls route each key to the instance owning it, and
// QueryHandler serves them over HTTP (QueryServer serves it on an address).
func ExampleQueryStore() {
	b := stream.NewBuilder()
	rides := stream.From(b, "rides", stream.String(), stream.String()) // key: zone
	stream.Count(stream.GroupByKey(rides, stream.Codecs(stream.String(), stream.String())),
		stream.StoreConfig{Name: "rides-per-zone", TTL: time.Hour})

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("surge", b, map[string]int32{"rides": 4}, stream.StateDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	at := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	for i, zone := range []string{"north", "south", "north", "east", "north"} {
		d.Pipe("rides", []byte(zone), []byte(fmt.Sprint("rider-", i)), at)
	}
	if err := d.Process(); err != nil {
		fmt.Println(err)
		return
	}
	q, err := stream.QueryStore[string, int64](d.App(), "rides-per-zone")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	n, found, err := q.Get(ctx, "north")
	fmt.Println(n, found, err)
	_, found, _ = q.Get(ctx, "west")
	fmt.Println(found)
	all, _ := q.All(ctx, 0)
	for _, e := range all {
		fmt.Printf("%s=%d ", e.Key, e.Value)
	}
	fmt.Println()
	// Output:
	// 3 true <nil>
	// false
	// east=1 north=3 south=1
}

// Orders (keyed by order id) joined to the customer each names, a foreign
// key: when an order moves to another customer its result follows, and no
// result is left for the previous one; deleting the order deletes its result
// (a tombstone).
func ExampleJoinForeign() {
	b := stream.NewBuilder()
	orders := stream.FromTable(b, "orders", stream.String(), stream.String(), "orders") // value: customer id
	customers := stream.FromTable(b, "customers", stream.String(), stream.String(), "customers")
	stream.JoinForeign(orders, func(_ string, customer string) (string, error) { return customer, nil }, customers,
		stream.StoreConfig{Name: "order-customer", NoExpiry: "one key per order; orders are deleted when closed"},
		func(order, customer, name string) (string, error) { return order + " for " + name, nil }).
		ToStream().To("order-customer", stream.String(), stream.String())

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("shop", b, map[string]int32{"orders": 3, "customers": 2}, stream.StateDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	at := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	pipe := func(topic, key string, value []byte) {
		d.Pipe(topic, []byte(key), value, at)
		if err := d.Process(); err != nil {
			fmt.Println(err)
		}
	}
	pipe("customers", "c1", []byte("Ann"))
	pipe("customers", "c2", []byte("Bob"))
	pipe("orders", "o1", []byte("c1"))
	pipe("orders", "o1", []byte("c2"))        // o1 moves to Bob
	pipe("customers", "c1", []byte("Ann B.")) // o1 no longer follows c1
	pipe("orders", "o1", nil)
	for _, r := range d.Records("order-customer") {
		if r.Value == nil {
			fmt.Printf("%s deleted\n", r.Key)
			continue
		}
		fmt.Printf("%s: %s\n", r.Key, r.Value)
	}
	// Output:
	// o1: o1 for Ann
	// o1: o1 for Bob
	// o1 deleted
}
