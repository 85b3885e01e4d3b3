// Package streamtest runs stream topologies in unit tests without a broker:
// deterministic, with several partitions, repartitioning, stores, tables and
// stream-table joins, dead-letter routing and a processing clock that never
// waits. A table's topic is an input like any other (Input.Pipe updates a
// key, Input.Delete deletes it); a task reading several topics takes its
// queued records in timestamp order, as an App does within a round.
//
//	func TestZoneCounts(t *testing.T) {
//		b := stream.NewBuilder()
//		buildTopology(b) // the same function the production App uses
//		d := streamtest.New(t, "surge", b, streamtest.Partitions("rides", 4))
//		rides := streamtest.NewInput(d, "rides", stream.String(), stream.JSON[Ride]())
//		rides.Pipe("r1", Ride{Zone: "north"}, t0)
//		d.Process()
//		counts := streamtest.NewOutput(d, "rides-per-zone", stream.String(), stream.Int64())
//		if got := streamtest.Latest(counts)["north"]; got != 1 { ... }
//	}
//
// Time is virtual. Event time moves only with the records a test pipes: a
// task's watermark is the largest event time each of its input partitions
// delivered minus the out-of-orderness bound of the stream.Watermarks option
// (AppOpts), the minimum over the task's partitions — so with several
// partitions, pipe a record to each (or set an idle timeout and advance
// processing time past it). Windows close and event-time timers fire right
// after the record that moves the watermark past them. Processing time starts
// at the Unix epoch and moves only with AdvanceProcessingTime, which then
// ends a round for every task (Tick): processing-time timers fire and idle
// inputs stop holding the watermark back, without new records. EndOfInput
// moves every watermark to the end of time, as a bounded run ends.
//
//	d := streamtest.New(t, "alerts", b, streamtest.AppOpts(stream.Watermarks(2*time.Second, time.Minute)))
//	in.Pipe("k", v, t0.Add(10*time.Second)) // the watermark reaches t0+8s
//	d.Process()
//	d.AdvanceProcessingTime(time.Minute) // processing-time timers due by then fire
//
// The same topology runs against a real broker in integration tests (see
// package weirtest) by building a stream.App instead of a Driver.
package streamtest

import (
	"testing"
	"time"

	"github.com/weirhq/weir/stream"
)

// Opt configures New.
type Opt interface{ apply(*options) }

type options struct {
	partitions map[string]int32
	appOpts    []stream.Opt
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// Partitions sets a topic's partition count (default 1). Repartition and
// changelog topics derive theirs from their inputs, as in an App.
func Partitions(topic string, n int32) Opt {
	return optionFunc(func(o *options) { o.partitions[topic] = n })
}

// AppOpts passes App options (MaxAttempts, RetryBackoff, ProcessingClock, ...).
func AppOpts(opts ...stream.Opt) Opt {
	return optionFunc(func(o *options) { o.appOpts = append(o.appOpts, opts...) })
}

// Driver is a stream.Driver bound to a test: errors fail the test, stores
// live in the test's temporary directory and are closed at cleanup.
type Driver struct {
	t testing.TB
	*stream.Driver
}

// New builds a driver for b, failing t if the topology is invalid.
func New(t testing.TB, appID string, b *stream.Builder, opts ...Opt) *Driver {
	t.Helper()
	o := options{partitions: map[string]int32{}}
	for _, opt := range opts {
		opt.apply(&o)
	}
	appOpts := append([]stream.Opt{stream.StateDir(t.TempDir())}, o.appOpts...)
	d, err := stream.NewDriver(appID, b, o.partitions, appOpts...)
	if err != nil {
		t.Fatalf("streamtest: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("streamtest: close: %v", err)
		}
	})
	return &Driver{t: t, Driver: d}
}

// Process handles every queued record (including repartition hops), failing
// the test on a runtime error.
func (d *Driver) Process() {
	d.t.Helper()
	if err := d.Driver.Process(); err != nil {
		d.t.Fatalf("streamtest: process: %v", err)
	}
}

// Restart drops every task and its local stores; the next Process restores
// them from the changelogs, as an App restarted on an empty disk would.
func (d *Driver) Restart() {
	d.t.Helper()
	if err := d.Driver.Restart(); err != nil {
		d.t.Fatalf("streamtest: restart: %v", err)
	}
}

// AdvanceProcessingTime moves the processing clock forward by dt and ends a
// round for every task (see stream.Driver.AdvanceProcessingTime), failing
// the test on an error.
func (d *Driver) AdvanceProcessingTime(dt time.Duration) {
	d.t.Helper()
	if err := d.Driver.AdvanceProcessingTime(dt); err != nil {
		d.t.Fatalf("streamtest: advance processing time: %v", err)
	}
}

// Tick ends a round for every task without new records (see
// stream.Driver.Tick), failing the test on an error.
func (d *Driver) Tick() {
	d.t.Helper()
	if err := d.Driver.Tick(); err != nil {
		d.t.Fatalf("streamtest: tick: %v", err)
	}
}

// EndOfInput processes what is queued, then moves every task's watermark to
// the end of time, as a bounded run ends (stream.App.RunBounded): every
// window closes, every event-time timer fires. It fails the test on an
// error.
func (d *Driver) EndOfInput() {
	d.t.Helper()
	if err := d.Driver.EndOfInput(); err != nil {
		d.t.Fatalf("streamtest: end of input: %v", err)
	}
}

// Input writes typed records to a source topic.
type Input[K, V any] struct {
	d     *Driver
	topic string
	key   stream.Codec[K]
	value stream.Codec[V]
}

// NewInput returns a typed writer for a source topic (a stream's or a
// table's).
func NewInput[K, V any](d *Driver, topic string, key stream.Codec[K], value stream.Codec[V]) *Input[K, V] {
	return &Input[K, V]{d: d, topic: topic, key: key, value: value}
}

// Pipe encodes and writes one record (partitioned by its key) with event
// time ts; it is processed by the next Process.
func (in *Input[K, V]) Pipe(key K, value V, ts time.Time, headers ...stream.Header) stream.Origin {
	in.d.t.Helper()
	kb, err := in.key.Encode(key)
	if err != nil {
		in.d.t.Fatalf("streamtest: encode key: %v", err)
	}
	vb, err := in.value.Encode(value)
	if err != nil {
		in.d.t.Fatalf("streamtest: encode value: %v", err)
	}
	return in.PipeRaw(kb, vb, ts, headers...)
}

// Delete writes a tombstone (the key with a nil value) with time ts: on a
// table's topic it deletes the key from the table.
func (in *Input[K, V]) Delete(key K, ts time.Time, headers ...stream.Header) stream.Origin {
	in.d.t.Helper()
	kb, err := in.key.Encode(key)
	if err != nil {
		in.d.t.Fatalf("streamtest: encode key: %v", err)
	}
	return in.PipeRaw(kb, nil, ts, headers...)
}

// PipeRaw writes raw bytes (for instance a record that must not decode).
func (in *Input[K, V]) PipeRaw(key, value []byte, ts time.Time, headers ...stream.Header) stream.Origin {
	in.d.t.Helper()
	o, err := in.d.Pipe(in.topic, key, value, ts, headers...)
	if err != nil {
		in.d.t.Fatalf("streamtest: %v", err)
	}
	return o
}

// Output reads typed records from any topic the topology writes.
type Output[K, V any] struct {
	d     *Driver
	topic string
	key   stream.Codec[K]
	value stream.Codec[V]
}

// NewOutput returns a typed reader of topic.
func NewOutput[K, V any](d *Driver, topic string, key stream.Codec[K], value stream.Codec[V]) *Output[K, V] {
	return &Output[K, V]{d: d, topic: topic, key: key, value: value}
}

// Records decodes every record written to the topic so far, in write order;
// Origin is where each record landed. A nil value (tombstone) decodes as the
// codec decodes nil.
func (o *Output[K, V]) Records() []stream.Record[K, V] {
	o.d.t.Helper()
	raw := o.d.Driver.Records(o.topic)
	out := make([]stream.Record[K, V], len(raw))
	for i, r := range raw {
		k, err := o.key.Decode(r.Key)
		if err != nil {
			o.d.t.Fatalf("streamtest: %s@%d: decode key: %v", o.topic, r.Origin.Offset, err)
		}
		v, err := o.value.Decode(r.Value)
		if err != nil {
			o.d.t.Fatalf("streamtest: %s@%d: decode value: %v", o.topic, r.Origin.Offset, err)
		}
		out[i] = stream.Record[K, V]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin}
	}
	return out
}

// Latest returns the last value written per key: the table an upsert
// (update) stream describes.
func Latest[K comparable, V any](o *Output[K, V]) map[K]V {
	m := map[K]V{}
	for _, r := range o.Records() {
		m[r.Key] = r.Value
	}
	return m
}

// Option is the former name of Opt.
//
// Deprecated: use Opt.
type Option = Opt
