package surge_test

import (
	"fmt"
	"os"
	"time"

	"github.com/weirhq/weir/internal/demo/surge"
	"github.com/weirhq/weir/stream"
)

// The README's stream-processing example: requests counted per zone. With a
// broker it goes to stream.NewApp and app.Run; here it runs on the
// broker-free Driver.
func Example_requestsPerZone() {
	b := stream.NewBuilder()
	requests := stream.From(b, "ride-requests", stream.String(), stream.JSON[surge.RideRequest]())
	byZone := stream.KeyBy(requests, func(r stream.Record[string, surge.RideRequest]) (string, error) {
		return r.Value.Zone, nil
	})
	stream.Count(stream.GroupByKey(byZone, stream.String(), stream.JSON[surge.RideRequest]()),
		stream.StoreConfig{Name: "requests-per-zone", TTL: 24 * time.Hour}).
		To("requests-per-zone", stream.String(), stream.Int64())

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("zone-counts", b, map[string]int32{"ride-requests": 3}, stream.StateDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	at := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	for i, zone := range []string{"airport", "downtown", "airport"} {
		v, _ := stream.JSON[surge.RideRequest]().Encode(surge.RideRequest{Rider: fmt.Sprint("r", i), Zone: zone, At: at})
		d.Pipe("ride-requests", []byte(fmt.Sprint("r", i)), v, at)
	}
	if err := d.Process(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range d.Records("requests-per-zone") {
		n, _ := stream.Int64().Decode(r.Value)
		fmt.Printf("%s=%d\n", r.Key, n)
	}
	// Output:
	// downtown=1
	// airport=1
	// airport=2
}
