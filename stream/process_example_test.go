package stream_test

import (
	"fmt"
	"os"
	"time"

	"github.com/weirhq/weir/stream"
)

// A processor with a store and timers: a user's session ends after 30
// minutes of event time without a click, and then its click count goes
// downstream. Each click moves the user's "end" timer; the timer is keyed
// state, restored with the store after a restart.
func ExampleProcess() {
	b := stream.NewBuilder()
	clicks := stream.From(b, "clicks", stream.String(), stream.String()) // key: user, value: page
	count := stream.KeyValueStore[string, int64](stream.StoreConfig{Name: "session-clicks", TTL: 24 * time.Hour})
	sessions := stream.Process(clicks, stream.ProcessConfig{Name: "sessions", Stores: []stream.ProcessStore{count}},
		stream.Processor[string, string, string, int64]{
			OnRecord: func(c *stream.ProcessContext[string, string, int64], r stream.Record[string, string]) error {
				n, _, err := count.Get(c, r.Key)
				if err != nil {
					return err
				}
				if err := count.Put(c, r.Key, n+1); err != nil {
					return err
				}
				return c.SetEventTimer(r.Key, "end", r.Timestamp.Add(30*time.Minute))
			},
			OnTimer: func(c *stream.ProcessContext[string, string, int64], tm stream.Timer[string]) error {
				n, _, err := count.Get(c, tm.Key)
				if err != nil {
					return err
				}
				if err := count.Delete(c, tm.Key); err != nil {
					return err
				}
				return c.Forward(stream.Record[string, int64]{Key: tm.Key, Value: n}) // timestamp: the timer's
			},
		})
	sessions.To("sessions", stream.String(), stream.Int64())

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	d, err := stream.NewDriver("web", b, nil, stream.StateDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	at := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		user string
		min  int
	}{{"ann", 0}, {"bob", 5}, {"ann", 20}, {"bob", 30}, {"cat", 60}, {"ann", 90}} {
		d.Pipe("clicks", []byte(c.user), []byte("/"), at.Add(time.Duration(c.min)*time.Minute))
	}
	if err := d.Process(); err != nil { // the watermark follows the clicks
		fmt.Println(err)
		return
	}
	if err := d.EndOfInput(); err != nil { // the end of a bounded input: every timer fires
		fmt.Println(err)
		return
	}
	for _, r := range d.Records("sessions") {
		n, _ := stream.Int64().Decode(r.Value)
		fmt.Printf("%s: %d clicks, session ended %s\n", r.Key, n, r.Timestamp.UTC().Format("15:04"))
	}
	// Output:
	// ann: 2 clicks, session ended 08:50
	// bob: 2 clicks, session ended 09:00
	// cat: 1 clicks, session ended 09:30
	// ann: 1 clicks, session ended 10:00
}
