package weirtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/weirtest"
)

// This is how a user's test looks: start a broker with a topic, produce
// with acks=all, consume it back. Any other Kafka client works the same
// way: give it b.Addr() as its bootstrap server.
func TestExample(t *testing.T) {
	b := weirtest.Start(t, weirtest.Topic("orders", 3))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	producer := b.Client() // closed automatically at the end of the test
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		rec := &kgo.Record{Topic: "orders", Key: []byte(id), Value: []byte("placed")}
		if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", id, err)
		}
	}

	consumer := b.Client(
		kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	got := map[string]string{}
	for len(got) < 3 {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 3 records: %v", len(got), err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = string(r.Value) })
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if got[id] != "placed" {
			t.Errorf("order %s: got %q", id, got[id])
		}
	}
}

// A test that the application survives its broker losing power: with
// in-memory storage, CrashRestart keeps exactly what was fsynced (every
// acks=all write) and cuts every connection; clients reconnect.
func TestExampleCrashRestart(t *testing.T) {
	b := weirtest.Start(t, weirtest.MemStorage(), weirtest.Topic("payments", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl := b.Client()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("p-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.CrashRestart()
	// The same client keeps working, and the acknowledged record is there.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("p-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ends, err := b.Admin().ListEndOffsets(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("payments", 0); o.Offset != 2 {
		t.Fatalf("end offset %d after the crash, want 2", o.Offset)
	}
}
