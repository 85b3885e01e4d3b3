package stream

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeClock is a processing-time clock driven by the test: Sleep advances it
// instantly.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}

// harness runs tasks of a topology without a broker: produced records are
// captured in order, with offsets assigned per topic-partition.
type harness struct {
	t       *testing.T
	a       *App
	clock   *fakeClock
	out     []*kgo.Record
	offsets map[string]int64
	in      map[topicPartition]int64
	tasks   map[taskID]*task
}

func newHarness(t *testing.T, b *Builder, opts ...Opt) *harness {
	t.Helper()
	clk := newFakeClock()
	h := &harness{t: t, clock: clk, offsets: map[string]int64{}, in: map[topicPartition]int64{}, tasks: map[taskID]*task{}}
	capture := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		if r.Partition < 0 {
			r.Partition = 0
		}
		k := r.Topic + "-" + strconv.Itoa(int(r.Partition))
		r.Offset = h.offsets[k]
		h.offsets[k]++
		h.out = append(h.out, r)
		promise(r, nil)
	}, false)
	// opts last: a test's own withProducer replaces the capture.
	base := []Opt{Brokers("127.0.0.1:1"), StateDir(t.TempDir()), WithClock(clk), capture}
	a, err := NewApp("app", b, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	t.Cleanup(func() {
		for _, tk := range h.tasks {
			tk.close()
		}
	})
	return h
}

// taskID returns the task reading partition p of topic.
func (h *harness) taskID(topic string, p int32) taskID {
	h.t.Helper()
	id, ok := h.a.taskOf(topic, p)
	if !ok {
		h.t.Fatalf("no source %s", topic)
	}
	return id
}

func (h *harness) task(topic string, p int32) *task {
	h.t.Helper()
	id := h.taskID(topic, p)
	if tk, ok := h.tasks[id]; ok {
		return tk
	}
	tk, err := h.a.newTask(id)
	if err != nil {
		h.t.Fatal(err)
	}
	h.tasks[id] = tk
	return tk
}

// feed hands one input record to its task and processes it to completion.
func (h *harness) feed(topic string, p int32, key, value string, ts time.Time, headers ...kgo.RecordHeader) {
	h.t.Helper()
	id := topicPartition{topic, p}
	off := h.in[id]
	h.in[id]++
	var k, v []byte
	if key != "" {
		k = []byte(key)
	}
	if value != "" {
		v = []byte(value)
	}
	r := &kgo.Record{Topic: topic, Partition: p, Offset: off, Key: k, Value: v, Timestamp: ts, Headers: headers}
	tk := h.task(topic, p)
	if err := tk.handle(context.Background(), r); err != nil {
		h.t.Fatalf("handle %s-%d@%d: %v", topic, p, off, err)
	}
	if err := tk.flushState(); err != nil {
		h.t.Fatal(err)
	}
}

// topic returns the captured records of topic, in produce order.
func (h *harness) topic(name string) []*kgo.Record {
	var out []*kgo.Record
	for _, r := range h.out {
		if r.Topic == name {
			out = append(out, r)
		}
	}
	return out
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}
