package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/weirtest"
)

// droppingConn closes itself shortly after some writes: the request reached
// the broker (which appends it) but the response is lost, so the client
// retries a batch that is already in the log.
type droppingConn struct {
	net.Conn
	rng   *rand.Rand
	mu    *sync.Mutex
	drops *atomic.Int64
}

func (c *droppingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	drop := c.rng.IntN(4) == 0
	c.mu.Unlock()
	if drop && err == nil {
		c.drops.Add(1)
		time.AfterFunc(time.Millisecond, func() { c.Conn.Close() })
	}
	return n, err
}

// TestIdempotentProducerAcrossConnectionDrops: an idempotent franz-go
// producer whose connections are cut after one write in four (responses
// lost, batches retried) leaves every record exactly once, in order per
// partition.
func TestIdempotentProducerAcrossConnectionDrops(t *testing.T) {
	b := weirtest.Start(t, weirtest.Topic("idem", 3))
	ctx := e2eCtx(t, 90*time.Second)
	var (
		mu    sync.Mutex
		rng   = rand.New(rand.NewPCG(1, 2))
		drops atomic.Int64
	)
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &droppingConn{Conn: c, rng: rng, mu: &mu, drops: &drops}, nil
	}
	cl := b.Client(kgo.Dialer(dial), kgo.DefaultProduceTopic("idem"), kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(512), kgo.MaxBufferedRecords(50),
		kgo.RecordRetries(1000), kgo.RequestRetries(1000), kgo.RetryBackoffFn(func(int) time.Duration { return 5 * time.Millisecond }))
	const n = 3000
	var failed atomic.Int64
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: fmt.Appendf(nil, "%d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d records failed", f)
	}
	if drops.Load() < 5 {
		t.Fatalf("only %d connection drops: the test did not exercise retries", drops.Load())
	}
	got := readAll(t, b, "idem", false)
	seen := map[int]int{}
	lastByKey := map[int]int{}
	for _, v := range got {
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			t.Fatalf("bad value %q", v)
		}
		seen[i]++
		if prev, ok := lastByKey[i%7]; ok && i < prev {
			t.Fatalf("key %d out of order: %d after %d", i%7, i, prev)
		}
		lastByKey[i%7] = i
	}
	for i := range n {
		if seen[i] != 1 {
			t.Fatalf("record %d appears %d times (%d connection drops)", i, seen[i], drops.Load())
		}
	}
	t.Logf("%d records exactly once across %d connection drops", n, drops.Load())
}
