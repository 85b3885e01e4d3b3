package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newClient(t testing.TB, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.Addr()), kgo.RetryTimeout(5 * time.Second),
		kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestProduceConsumeAcks(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for _, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.LeaderAck(), kgo.NoAck()} {
		opts := []kgo.Opt{kgo.RequiredAcks(acks), kgo.DefaultProduceTopic("t")}
		if acks != kgo.AllISRAcks() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		p := newClient(t, b, opts...)
		for i := range n {
			p.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}, func(r *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, b, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for len(seen) < n || sum(seen) < 3*n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("timed out with %d/%d records", sum(seen), 3*n)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	if sum(seen) != 3*n {
		t.Fatalf("got %d records, want %d", sum(seen), 3*n)
	}
}

func sum(m map[string]int) (s int) {
	for _, v := range m {
		s += v
	}
	return s
}

func mustCreate(t testing.TB, ctx context.Context, b *Broker, topic string, partitions int32, configs ...string) {
	t.Helper()
	cfg := map[string]*string{}
	for i := 0; i+1 < len(configs); i += 2 {
		cfg[configs[i]] = kmsg.StringPtr(configs[i+1])
	}
	adm := kadm.NewClient(newClient(t, b))
	resp, err := adm.CreateTopic(ctx, partitions, 1, cfg, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}
