package weirtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
	wlog "github.com/weirhq/weir/broker/log"
)

func TestMemStorageProduceConsumeRestart(t *testing.T) {
	b := Start(t, MemStorage(), Topic("t", 3))
	cl := b.Client()
	produce(t, cl, "t", 30)
	addr := b.Addr()
	b.Restart()
	if b.Addr() != addr {
		t.Fatalf("address changed across restart: %s -> %s", addr, b.Addr())
	}
	if got := consumeAll(t, b, "t", 30); len(got) != 30 {
		t.Fatalf("after restart: %d keys, want 30", len(got))
	}
	if b.MemFS() == nil {
		t.Fatal("MemFS is nil with MemStorage")
	}
}

// Every record acknowledged with acks=all before the crash survives it;
// the client made before the crash reconnects and keeps producing.
func TestCrashRestartKeepsAcknowledged(t *testing.T) {
	b := Start(t, MemStorage(), Topic("t", 2))
	cl := b.Client()
	produce(t, cl, "t", 25)
	b.CrashRestart()
	if got := consumeAll(t, b, "t", 25); len(got) != 25 {
		t.Fatalf("after crash: %d keys, want 25", len(got))
	}
	// The old client reconnects through the relay.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte("after"), Value: []byte("crash")}).FirstErr(); err != nil {
		t.Fatalf("produce after crash: %v", err)
	}
}

// With fsync on an interval, an acknowledgement does not mean durable: a
// crash before the next fsync loses the records. This is what CrashRestart
// must show, or it would not be simulating anything.
func TestCrashRestartLosesUnsynced(t *testing.T) {
	b := Start(t, MemStorage(), Topic("t", 1), BrokerConfig(func(c *broker.Config) {
		c.Sync = wlog.SyncInterval
		c.SyncInterval = time.Hour
	}))
	cl := b.Client()
	produce(t, cl, "t", 10)
	ends, err := b.Admin().ListEndOffsets(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("t", 0); o.Offset != 10 {
		t.Fatalf("before the crash: end offset %d, want 10", o.Offset)
	}
	b.CrashRestart()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err = b.Admin().ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup("t", 0)
	if !ok || o.Err != nil {
		t.Fatalf("after the crash: %+v", o)
	}
	if o.Offset != 0 {
		t.Fatalf("after the crash: end offset %d: unsynced records survived a simulated power loss", o.Offset)
	}
}

func TestCrashRestartNeedsMemStorage(t *testing.T) {
	ftb := &fatalTB{TB: t}
	b := Start(t)
	b.t = ftb
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.CrashRestart()
	}()
	<-done
	if ftb.msg == "" {
		t.Fatal("CrashRestart without MemStorage did not fail the test")
	}
	b.t = t
}

// Many crashes in a row while a producer keeps going: after each, every
// acknowledged record is there.
func TestRepeatedCrashes(t *testing.T) {
	b := Start(t, MemStorage(), Topic("t", 3))
	cl := b.Client()
	total := 0
	for round := 0; round < 5; round++ {
		for i := 0; i < 10; i++ {
			r := &kgo.Record{Topic: "t", Key: []byte(fmt.Sprintf("r%d-%d", round, i)), Value: []byte("v")}
			if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
				t.Fatalf("round %d: produce: %v", round, err)
			}
			total++
		}
		b.CrashRestart()
		if got := consumeAll(t, b, "t", total); len(got) != total {
			t.Fatalf("round %d: %d records after crash, want %d", round, len(got), total)
		}
	}
}
