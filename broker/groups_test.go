package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A consumer group through the broker: join, consume everything, commit,
// and the committed offsets are visible to the admin client.
func TestConsumerGroupRouting(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "g", 2)
	p := newClient(t, b, kgo.DefaultProduceTopic("g"))
	const n = 50
	for i := range n {
		if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, b, kgo.ConsumeTopics("g"), kgo.ConsumerGroup("grp"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out at %d/%d", got, n)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("%s/%d: %v", tp, p, err) })
		got += fs.NumRecords()
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(newClient(t, b))
	offs, err := adm.FetchOffsets(ctx, "grp")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != n {
		t.Fatalf("committed offsets sum to %d, want %d", total, n)
	}
}

// DescribeGroups names each member's client id and host, taken from the
// request header and the connection, as Kafka does.
func TestDescribeGroupsShowsClient(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "dg", 1)
	c := newClient(t, b, kgo.ConsumeTopics("dg"), kgo.ConsumerGroup("dgrp"), kgo.ClientID("dg-consumer"))
	adm := kadm.NewClient(newClient(t, b))
	for {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		c.PollFetches(pctx) // drives the join
		cancel()
		gs, err := adm.DescribeGroups(ctx, "dgrp")
		if err != nil {
			t.Fatal(err)
		}
		if g := gs["dgrp"]; g.State == "Stable" && len(g.Members) == 1 {
			m := g.Members[0]
			if m.ClientID != "dg-consumer" || m.ClientHost != "/127.0.0.1" {
				t.Fatalf("member client id %q host %q, want %q %q", m.ClientID, m.ClientHost, "dg-consumer", "/127.0.0.1")
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("group never became stable: %+v", gs["dgrp"])
		}
	}
}

func TestRecordTimestamp(t *testing.T) {
	data := append(makeBatch(1000, "a", "b", "c"), makeBatch(5000, "d")...)
	// makeBatch assigns base offset 0 to both; fix the second's base.
	binary.BigEndian.PutUint64(data[len(data)-len(makeBatch(5000, "d")):], 3)
	for _, c := range []struct {
		off, ts int64
		ok      bool
	}{{0, 1000, true}, {2, 1002, true}, {3, 5000, true}, {4, 0, false}} {
		ts, ok := recordTimestamp(data, c.off)
		if ok != c.ok || (ok && ts != c.ts) {
			t.Errorf("offset %d: %d %v, want %d %v", c.off, ts, ok, c.ts, c.ok)
		}
	}
	if _, ok := recordTimestamp([]byte{1, 2, 3}, 0); ok {
		t.Fatal("garbage decoded")
	}
}
