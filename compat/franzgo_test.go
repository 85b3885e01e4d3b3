package compat

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go: kadm creates the topic, an idempotent producer with acks=all
// and the default (murmur2, Java-compatible) partitioner produces, a direct
// partition consumer reads back. Headers are checked too.
func TestFranzGo(t *testing.T) {
	addr := startWeir(t).Addr()
	const topic = "compat-franz-go"
	ctx := testContext(t, 60*time.Second)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, numPartitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	checkTopic(t, addr, topic, numPartitions)

	sent := testRecords()
	recs := make([]*kgo.Record, len(sent))
	for i, r := range sent {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(r.Key), Value: []byte(r.Value),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(r.Key)}}}
	}
	results := cl.ProduceSync(ctx, recs...)
	if err := results.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	acked := make([]record, len(results))
	for i, res := range results {
		acked[i] = record{Key: string(res.Record.Key), Value: string(res.Record.Value), Partition: res.Record.Partition, Offset: res.Record.Offset}
	}
	checkProduced(t, addr, topic, sent, acked, javaMurmur2)

	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < numPartitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []record
	for len(got) < len(sent) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(got), len(sent))
		}
		fs.EachError(func(t2 string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", t2, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Headers) != 1 || r.Headers[0].Key != "i" || string(r.Headers[0].Value) != string(r.Key) {
				t.Fatalf("key %s: headers %+v", r.Key, r.Headers)
			}
			got = append(got, record{Key: string(r.Key), Value: string(r.Value), Partition: r.Partition, Offset: r.Offset})
		})
	}
	checkConsumed(t, sent, acked, got, javaMurmur2)

	// Read it all again as a member of a consumer group (classic protocol,
	// cooperative-sticky balancer), committing what was read.
	const group = "weir-compat-franz-go"
	gc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	got = got[:0]
	for len(got) < len(sent) {
		fs := gc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group: consumed %d of %d records before the deadline", len(got), len(sent))
		}
		fs.EachError(func(t2 string, p int32, err error) { t.Fatalf("group fetch %s/%d: %v", t2, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, record{Key: string(r.Key), Value: string(r.Value), Partition: r.Partition, Offset: r.Offset})
		})
		if err := gc.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	checkConsumed(t, sent, acked, got, javaMurmur2)
	checkGroupCommitted(t, addr, group, topic)
}
