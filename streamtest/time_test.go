package streamtest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/streamtest"
)

// orderAlerts: a "placed" order not "paid" within 15 minutes of processing
// time raises "<id>:unpaid"; every placed order expires an hour of event
// time after it was placed ("<id>:expired").
func orderAlerts(b *stream.Builder) {
	orderAlertsOn(stream.From(b, "orders", stream.String(), stream.String()))
}

func orderAlertsOn(orders stream.Stream[string, string]) {
	stream.Process(orders, stream.ProcessConfig{Name: "alerts"},
		stream.Processor[string, string, string, string]{
			OnRecord: func(c *stream.ProcessContext[string, string, string], r stream.Record[string, string]) error {
				switch r.Value {
				case "placed":
					if err := c.SetProcessingTimer(r.Key, "unpaid", c.Now().Add(15*time.Minute)); err != nil {
						return err
					}
					return c.SetEventTimer(r.Key, "expire", r.Timestamp.Add(time.Hour))
				case "paid":
					return c.DeleteProcessingTimer(r.Key, "unpaid")
				}
				return nil
			},
			OnTimer: func(c *stream.ProcessContext[string, string, string], tm stream.Timer[string]) error {
				what := "expired"
				if tm.Domain == stream.ProcessingTimer {
					what = "unpaid"
				}
				return c.Forward(stream.Record[string, string]{Key: tm.Key, Value: tm.Key + ":" + what})
			},
		}).To("alerts", stream.String(), stream.String())
}

func alertValues(o *streamtest.Output[string, string]) []string {
	var out []string
	for _, r := range o.Records() {
		out = append(out, r.Value)
	}
	return out
}

func TestProcessingTimeMovesOnlyWhenAdvanced(t *testing.T) {
	b := stream.NewBuilder()
	orderAlerts(b)
	d := streamtest.New(t, "shop", b)
	in := streamtest.NewInput(d, "orders", stream.String(), stream.String())
	out := streamtest.NewOutput(d, "alerts", stream.String(), stream.String())
	in.Pipe("a", "placed", t0)
	in.Pipe("b", "placed", t0)
	d.Process()
	d.AdvanceProcessingTime(10 * time.Minute)
	in.Pipe("b", "paid", t0.Add(time.Minute))
	d.Process()
	d.AdvanceProcessingTime(4*time.Minute + 59*time.Second)
	if got := alertValues(out); len(got) != 0 {
		t.Fatalf("alerts before 15 minutes: %v", got)
	}
	if !d.ProcessingTime().Equal(time.Unix(0, 0).Add(14*time.Minute + 59*time.Second)) {
		t.Fatalf("processing time %v, want epoch + 14m59s", d.ProcessingTime())
	}
	d.AdvanceProcessingTime(time.Second)
	if got, want := alertValues(out), []string{"a:unpaid"}; !slices.Equal(got, want) {
		t.Fatalf("alerts at 15 minutes: %v, want %v", got, want)
	}
	// Timers survive a restart that loses the local state.
	in.Pipe("c", "placed", t0.Add(2*time.Minute))
	d.Process()
	d.Restart()
	d.AdvanceProcessingTime(15 * time.Minute)
	if got, want := alertValues(out), []string{"a:unpaid", "c:unpaid"}; !slices.Equal(got, want) {
		t.Fatalf("alerts after the restart: %v, want %v", got, want)
	}
}

// An input partition with no records (here the table topic of a join: its
// task reads both) holds the watermark back until it has been idle for the
// Watermarks idle timeout of processing time: advancing processing time
// alone then fires the event-time timers.
func TestIdleTimeoutPassesWithoutRecords(t *testing.T) {
	b := stream.NewBuilder()
	orders := stream.From(b, "orders", stream.String(), stream.String())
	customers := stream.FromTable(b, "customers", stream.String(), stream.String(), "customers")
	orderAlertsOn(stream.LeftJoin(orders, customers,
		func(r stream.Record[string, string], _ string, _ bool) (string, error) { return r.Value, nil }))
	d := streamtest.New(t, "shop", b, streamtest.AppOpts(stream.Watermarks(0, 30*time.Second)))
	in := streamtest.NewInput(d, "orders", stream.String(), stream.String())
	out := streamtest.NewOutput(d, "alerts", stream.String(), stream.String())
	in.Pipe("x", "placed", t0)
	in.Pipe("y", "noop", t0.Add(2*time.Hour)) // past x's expiry
	d.Process()
	if got := alertValues(out); len(got) != 0 {
		t.Fatalf("expired while the table's partition holds the watermark: %v", got)
	}
	d.AdvanceProcessingTime(29 * time.Second)
	if got := alertValues(out); len(got) != 0 {
		t.Fatalf("expired before the idle timeout: %v", got)
	}
	d.AdvanceProcessingTime(2 * time.Second)
	if got, want := alertValues(out), []string{"x:expired"}; !slices.Equal(got, want) {
		t.Fatalf("after the idle timeout: %v, want %v", got, want)
	}
}

// EndOfInput fires every event-time timer, as a bounded run ends; the
// processing-time ones stay.
func TestEndOfInputFiresEventTimers(t *testing.T) {
	b := stream.NewBuilder()
	orderAlerts(b)
	d := streamtest.New(t, "shop", b, streamtest.Partitions("orders", 3))
	in := streamtest.NewInput(d, "orders", stream.String(), stream.String())
	out := streamtest.NewOutput(d, "alerts", stream.String(), stream.String())
	for _, k := range []string{"p", "q", "r", "s"} {
		in.Pipe(k, "placed", t0)
	}
	d.Process()
	if got := alertValues(out); len(got) != 0 {
		t.Fatalf("alerts before the end: %v", got)
	}
	d.EndOfInput()
	got := alertValues(out)
	slices.Sort(got)
	if want := []string{"p:expired", "q:expired", "r:expired", "s:expired"}; !slices.Equal(got, want) {
		t.Fatalf("at the end of input: %v, want %v", got, want)
	}
}
