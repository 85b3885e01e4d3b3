package broker

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// fsyncGate is a gate on the fsyncs of the segment files whose path
// contains path.
type fsyncGate struct{ *errorfs.Gate }

func newFsyncGate(path string) fsyncGate {
	return fsyncGate{errorfs.NewGate(errorfs.And(errorfs.OnOps(errorfs.OpSync), errorfs.PathContains(path), errorfs.PathMatch("*.log")))}
}

func (g fsyncGate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("no segment fsync started")
	}
}

// An acks=-1 produce whose fsync does not finish within TimeoutMillis is
// answered REQUEST_TIMED_OUT; the records stay appended and are read back
// once the fsync completes. acks=1 is not held up by the slow fsync.
func TestProduceTimeoutSlowFsync(t *testing.T) {
	g := newFsyncGate("slow-0")
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, g) })
	t.Cleanup(g.Release) // Close must not hang on a held fsync
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "slow", 1)
	c := dialRaw(t, b)

	g.Hold()
	req := produceReq(9, -1, "slow", 0, makeBatch(1, "late"))
	req.TimeoutMillis = 50
	resp := c.roundTrip(req, 1).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.RequestTimedOut.Code || p.ErrorMessage == nil || p.BaseOffset != -1 {
		t.Fatalf("produce with a stuck fsync: code %d (%s) base %d, want REQUEST_TIMED_OUT", p.ErrorCode, errorName(p.ErrorCode), p.BaseOffset)
	}
	g.waitEntered(t)

	resp = c.roundTrip(produceReq(9, 1, "slow", 0, makeBatch(1, "acks1")), 2).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("acks=1 during the stuck fsync: code %d base %d, want 0 1", p.ErrorCode, p.BaseOffset)
	}

	g.Release()
	tp, _ := b.topics.get("slow")
	l, _ := tp.partition(0)
	deadline := time.After(10 * time.Second)
	for l.HighWatermark() < 2 {
		select {
		case <-l.Changed():
		case <-deadline:
			t.Fatalf("high watermark %d after the fsync was released, want 2", l.HighWatermark())
		}
	}
	fr := c.roundTrip(fetchReq(12, "slow", tp.id, 0, 0, 0), 3).(*kmsg.FetchResponse)
	if got := batchValues(fr.Topics[0].Partitions[0].RecordBatches, 0); strings.Join(got, ",") != "late,acks1" {
		t.Fatalf("log holds %v, want [late acks1]", got)
	}
}

// Pipelined acks=-1 requests of one connection to one partition are all
// appended while the first one's fsync is still running; the answers come
// in order once it finishes, and one more fsync covers the rest.
func TestProducePipelinedSharesFsync(t *testing.T) {
	g := newFsyncGate("pipe-0")
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, g) })
	t.Cleanup(g.Release)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "pipe", 1)
	tp, _ := b.topics.get("pipe")
	l, _ := tp.partition(0)
	c := dialRaw(t, b)

	g.Hold()
	const n = 5
	for i := range n {
		c.send(produceReq(9, -1, "pipe", 0, makeBatch(1, "a", "b")), int32(10+i))
	}
	g.waitEntered(t)
	deadline := time.Now().Add(10 * time.Second)
	for l.LogEndOffset() < 2*n {
		if time.Now().After(deadline) {
			t.Fatalf("log end %d while the first fsync is held, want %d: pipelined requests wait for it", l.LogEndOffset(), 2*n)
		}
		time.Sleep(time.Millisecond)
	}
	if hw := l.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before any fsync finished", hw)
	}
	before := g.Count()
	g.Release()
	for i := range n {
		resp := c.readResp(produceReq(9, -1, "pipe", 0, nil), int32(10+i)).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != int64(2*i) {
			t.Fatalf("response %d: code %d base %d, want 0 %d", i, p.ErrorCode, p.BaseOffset, 2*i)
		}
	}
	if more := g.Count() - before; more > 1 {
		t.Fatalf("%d more fsyncs for the %d requests written during the first, want 1", more, n-1)
	}
}

// A failed fsync after the split append answers KAFKA_STORAGE_ERROR for
// the acks=-1 request; nothing of it is visible, and the partition works
// again once fsyncs do.
func TestProduceFsyncFailure(t *testing.T) {
	f := &faults{kind: errorfs.OpSync, path: "fsyncfail-0", err: syscall.EIO}
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, f) })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "fsyncfail", 1)
	c := dialRaw(t, b)
	f.armed.Store(true)
	resp := c.roundTrip(produceReq(9, -1, "fsyncfail", 0, makeBatch(1, "lost")), 1).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code || p.BaseOffset != -1 {
		t.Fatalf("failed fsync: code %d (%s) base %d, want KAFKA_STORAGE_ERROR", p.ErrorCode, errorName(p.ErrorCode), p.BaseOffset)
	}
	f.armed.Store(false)
	resp = c.roundTrip(produceReq(9, -1, "fsyncfail", 0, makeBatch(1, "kept")), 2).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("after the disk recovered: code %d base %d, want 0 0", p.ErrorCode, p.BaseOffset)
	}
	tp, _ := b.topics.get("fsyncfail")
	fr := c.roundTrip(fetchReq(12, "fsyncfail", tp.id, 0, 0, 0), 3).(*kmsg.FetchResponse)
	if got := batchValues(fr.Topics[0].Partitions[0].RecordBatches, 0); strings.Join(got, ",") != "kept" {
		t.Fatalf("log holds %v, want [kept]", got)
	}
}

// Through a real idempotent franz-go producer: a produce that times out
// waiting for a stuck fsync is retried by the client; the retry is
// recognised as a duplicate of the appended batch and answered once the
// fsync completes, so the record is in the log exactly once.
func TestProduceTimeoutIdempotentRetry(t *testing.T) {
	g := newFsyncGate("retry-0")
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, g) })
	t.Cleanup(g.Release)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "retry", 1)
	cl := newClient(t, b, kgo.DefaultProduceTopic("retry"), kgo.ProduceRequestTimeout(100*time.Millisecond),
		kgo.RecordRetries(100), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))

	g.Hold()
	done := make(chan error, 1)
	go func() { done <- cl.ProduceSync(ctx, &kgo.Record{Value: []byte("once")}).FirstErr() }()
	timedOut := b.metrics.requestErrors.WithLabelValues("Produce", errorName(kerr.RequestTimedOut.Code))
	deadline := time.Now().Add(10 * time.Second)
	for counterValue(t, timedOut) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("broker answered REQUEST_TIMED_OUT %v times, want 2 (first try and a retry)", counterValue(t, timedOut))
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("produce did not finish after the fsync was released")
	}
	tp, _ := b.topics.get("retry")
	l, _ := tp.partition(0)
	if l.LogEndOffset() != 1 || l.HighWatermark() != 1 {
		t.Fatalf("log end %d, high watermark %d: want the record exactly once", l.LogEndOffset(), l.HighWatermark())
	}
}

// counterValue reads a Prometheus counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
