package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/weirtest"
)

// killableDialer dials through net.Dialer and can cut every connection it
// made at once: the client's process "dies" mid-request.
type killableDialer struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	dead  bool
}

func (d *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	dead := d.dead
	d.mu.Unlock()
	if dead {
		return nil, errors.New("killed")
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns == nil {
		d.conns = map[net.Conn]struct{}{}
	}
	d.conns[c] = struct{}{}
	return c, nil
}

// kill cuts every connection and refuses new ones (heartbeats stop, so the
// group expels the member after its session timeout).
func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// eosWorker is one consume-transform-produce worker (franz-go
// GroupTransactSession): it reads "in" with read_committed as a member of
// the group, writes "out:<value>" to "out" and commits the input offsets in
// the same transaction.
type eosWorker struct {
	sess   *kgo.GroupTransactSession
	dialer *killableDialer
	done   chan struct{}
	// killAfter: after this many committed transactions, produce one more
	// batch and die without ending the transaction (0: never).
	killAfter int
	commits   atomic.Int64
	err       atomic.Value
}

func startEOSWorker(t *testing.T, b *weirtest.Broker, id string, killAfter int) *eosWorker {
	t.Helper()
	w := &eosWorker{dialer: &killableDialer{}, done: make(chan struct{}), killAfter: killAfter}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(b.Addr()),
		kgo.Dialer(w.dialer.dial),
		kgo.TransactionalID("eos-"+id),
		kgo.ConsumerGroup("eos-group"),
		kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		kgo.TransactionTimeout(30*time.Second),
		kgo.DefaultProduceTopic("out"),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	w.sess = sess
	go w.run()
	return w
}

func (w *eosWorker) run() {
	defer close(w.done)
	ctx := context.Background()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := w.sess.PollRecords(pctx, 40) // small transactions
		cancel()
		if fs.IsClientClosed() {
			return
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, &kgo.Record{Key: r.Key, Value: append([]byte("out:"), r.Value...)})
		})
		if len(recs) == 0 {
			continue
		}
		if err := w.sess.Begin(); err != nil {
			w.err.Store(fmt.Errorf("begin: %w", err))
			return
		}
		for _, r := range recs {
			w.sess.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					w.err.CompareAndSwap(nil, err)
				}
			})
		}
		if w.killAfter > 0 && int(w.commits.Load()) >= w.killAfter {
			// Die mid-transaction: outputs sent, no EndTxn, no
			// LeaveGroup, connections gone.
			_ = w.sess.Client().Flush(ctx)
			w.dialer.kill()
			return
		}
		committed, err := w.sess.End(ctx, kgo.TryCommit)
		if err != nil {
			w.err.Store(fmt.Errorf("end: %w", err))
			// A rebalance or a fenced epoch: the session aborted; the
			// records are consumed again by whoever owns them now.
			continue
		}
		if committed {
			w.commits.Add(1)
		}
	}
}

func (w *eosWorker) close() {
	// A killed worker's client is still allocated: let it reach the broker
	// again so Close (fenced by its successor by now) returns promptly.
	w.dialer.mu.Lock()
	w.dialer.dead = false
	w.dialer.mu.Unlock()
	w.sess.Close()
	<-w.done
}

// TestTxnConsumeTransformProduceExactlyOnce: franz-go GroupTransactSession
// workers copy "in" to "out" transactionally; two of them are killed in the
// middle of a transaction and replaced by new incarnations (same
// transactional ids, which fences the dead ones and aborts their open
// transactions). The read_committed output holds every input exactly once.
func TestTxnConsumeTransformProduceExactlyOnce(t *testing.T) {
	b := weirtest.Start(t, weirtest.Topic("in", 4), weirtest.Topic("out", 4))
	ctx := e2eCtx(t, 60*time.Second)
	const n = 3000
	p := b.Client(kgo.DefaultProduceTopic("in"))
	for i := range n {
		p.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%97), Value: fmt.Appendf(nil, "v%d", i)}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()

	a := startEOSWorker(t, b, "a", 3)
	bw := startEOSWorker(t, b, "b", 0)
	c := startEOSWorker(t, b, "c", 6)
	waitDone := func(w *eosWorker, name string) {
		select {
		case <-w.done:
		case <-ctx.Done():
			t.Fatalf("worker %s was not killed: %d commits, err %v", name, w.commits.Load(), w.err.Load())
		}
	}
	waitDone(a, "a")
	a2 := startEOSWorker(t, b, "a", 0)
	waitDone(c, "c")
	c2 := startEOSWorker(t, b, "c", 0)

	adm := b.Admin()
	for {
		// Done once the group's committed input offsets (committed in
		// the transactions) cover every input.
		lag, err := adm.Lag(ctx, "eos-group")
		if err != nil {
			t.Fatal(err)
		}
		var left int64 = -1
		if gl, ok := lag["eos-group"]; ok && gl.FetchErr == nil && gl.DescribeErr == nil {
			left = gl.Lag.Total()
			if len(gl.Lag) == 0 {
				left = -1
			}
		}
		if left == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("workers did not finish: lag %d, commits a2 %d b %d c2 %d, errors %v %v %v", left,
				a2.commits.Load(), bw.commits.Load(), c2.commits.Load(), a2.err.Load(), bw.err.Load(), c2.err.Load())
		}
		time.Sleep(time.Second)
	}
	for _, w := range []*eosWorker{bw, a2, c2} {
		w.close()
		if err, _ := w.err.Load().(error); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("worker error (retried by the session): %v", err)
		}
	}
	a.close()
	c.close()

	got := readAll(t, b, "out", true)
	seen := map[string]int{}
	for _, v := range got {
		seen[strings.TrimPrefix(v, "out:")]++
	}
	for i := range n {
		if c := seen[fmt.Sprintf("v%d", i)]; c != 1 {
			t.Fatalf("input v%d appears %d times in the committed output", i, c)
		}
	}
	if len(got) != n {
		t.Fatalf("committed output has %d records, want %d", len(got), n)
	}
	all := readAll(t, b, "out", false)
	t.Logf("committed output %d records; %d including aborted (duplicates the transactions discarded)", len(got), len(all))
}
