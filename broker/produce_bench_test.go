package broker

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceAcksAll produces 1 KiB records with acks=all to 12
// partitions through franz-go (client and broker in one process: use the
// profile, not the wall time, to judge the broker's share).
func BenchmarkProduceAcksAll(b *testing.B) {
	br, _ := testBroker(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mustCreate(b, ctx, br, "bench", 12)
	cl := newClient(b, br, kgo.DefaultProduceTopic("bench"), kgo.DisableIdempotentWrite(),
		kgo.MaxProduceRequestsInflightPerBroker(5), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := make([]byte, 1024)
	rand.Read(val)
	b.SetBytes(1024)
	b.ResetTimer()
	for range b.N {
		cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}
