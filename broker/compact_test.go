package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	wlog "github.com/weirhq/weir/broker/log"
)

// TestCompactedTopicEndToEnd: a franz-go producer writes many versions of
// few keys (and tombstones) to a compacted topic with tiny segments, the
// cleaner runs, a consumer reads exactly the latest value per key with
// offsets preserved; a keyless record is refused with CORRUPT_MESSAGE.
func TestCompactedTopicEndToEnd(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1 })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "c", 1, "cleanup.policy", "compact", "segment.bytes", "1024",
		"min.cleanable.dirty.ratio", "0.01", "delete.retention.ms", "3600000")
	cl := newClient(t, b, kgo.DefaultProduceTopic("c"), kgo.ProducerLinger(0))
	want := map[string]string{}
	for i := range 300 {
		k := fmt.Sprint("key-", i%10)
		v := fmt.Sprint("value-", i)
		r := &kgo.Record{Key: []byte(k), Value: []byte(v)}
		if i%10 == 3 && i > 250 {
			r.Value = nil // tombstone for key-3 near the end
			delete(want, k)
		} else {
			want[k] = v
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("keyless record: %v, want CORRUPT_MESSAGE", err)
	}
	l, ok := b.logs.Get("c", 0)
	if !ok {
		t.Fatal("no log")
	}
	sizeBefore := l.Size()
	n, err := b.logs.Clean(false)
	if err != nil || n != 1 {
		t.Fatalf("clean: %d %v", n, err)
	}
	if l.Size() >= sizeBefore/2 {
		t.Fatalf("size %d -> %d", sizeBefore, l.Size())
	}
	// Read everything back.
	cons := newClient(t, b, kgo.ConsumeTopics("c"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]*kgo.Record{}
	count := 0
	for count == 0 || got["key-9"] == nil || string(got["key-9"].Value) != want["key-9"] {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			count++
			got[string(r.Key)] = r
			// Offsets preserved: value-i was produced at offset i.
			if r.Value != nil && string(r.Value) != fmt.Sprint("value-", r.Offset) {
				t.Errorf("offset %d holds %s", r.Offset, r.Value)
			}
		})
	}
	for k, v := range want {
		if got[k] == nil || string(got[k].Value) != v {
			t.Fatalf("key %s: got %v want %s", k, got[k], v)
		}
	}
	if r := got["key-3"]; r == nil || r.Value != nil {
		t.Fatalf("key-3 tombstone: %v", r)
	}
	if count > 300/2 {
		t.Fatalf("consumer read %d records: not compacted", count)
	}
}

// TestInternalOffsetsTopicCompacted: __consumer_offsets is compacted by the
// same cleaner; committed offsets survive the clean and a restart.
func TestInternalOffsetsTopicCompacted(t *testing.T) {
	dir := t.TempDir()
	start := func() *Broker {
		b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1; c.DataDir = dir })
		return b
	}
	b := start()
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "in", 2)
	adm := kadm.NewClient(newClient(t, b))
	// Internal topic configs cannot be altered over the protocol: tiny
	// segments directly on the log, so the commits span closed segments.
	l, _ := b.logs.Get("__consumer_offsets", 0)
	l.SetConfig(wlog.Config{SegmentBytes: 2048, Compact: true, RetentionMs: -1})
	for i := range 200 {
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "in", Partition: int32(i % 2), At: int64(i), LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, "g", offs)
		if err != nil || resp.Error() != nil {
			t.Fatalf("commit %d: %v %v", i, err, resp.Error())
		}
	}
	before := l.Size()
	if n, err := b.logs.Clean(true); err != nil || n < 1 {
		t.Fatalf("clean: %d %v", n, err)
	}
	if l.Size() >= before/2 {
		t.Fatalf("__consumer_offsets %d -> %d bytes", before, l.Size())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = start()
	adm = kadm.NewClient(newClient(t, b))
	got, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 198, 1: 199} {
		if o, ok := got.Lookup("in", p); !ok || o.At != want {
			t.Fatalf("partition %d: %+v, want %d", p, o, want)
		}
	}
}
