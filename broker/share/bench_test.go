package share_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
)

// BenchmarkConsume reads the same records with a share group member
// (acquire, accept, durable state per fetch) and with a plain partition
// consumer, in one run, so the two are compared on the same machine
// state: ns/op is per record.
//
//	go test ./broker/share -run XXX -bench Consume -benchtime 20000x
func BenchmarkConsume(b *testing.B) {
	br, err := broker.Start(context.Background(), broker.Config{DataDir: b.TempDir(), KafkaAddr: "127.0.0.1:0", GroupInitialRebalanceDelay: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic = "bench"
	admin, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	createTopic(b, ctx, admin, topic, 1)
	produced := 0
	produce := func(n int) {
		for produced < n {
			var recs []*kgo.Record
			for i := 0; i < 1000 && produced < n; i++ {
				recs = append(recs, kgo.SliceRecord(make([]byte, 100)))
				produced++
			}
			if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
	}
	run := 0
	b.Run("share", func(b *testing.B) {
		produce(b.N)
		run++
		group := fmt.Sprintf("bench-%d", run)
		setGroupConfigs(b, ctx, admin, group, "share.auto.offset.reset", "earliest")
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		b.ResetTimer()
		for got := 0; got < b.N; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				b.Fatalf("%d of %d", got, b.N)
			}
			got += fs.NumRecords()
			cl.MarkAcks(kgo.AckAccept)
		}
		if err := cl.FlushAcks(ctx); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("plain", func(b *testing.B) {
		produce(b.N)
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		b.ResetTimer()
		for got := 0; got < b.N; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				b.Fatalf("%d of %d", got, b.N)
			}
			got += fs.NumRecords()
		}
	})
}
