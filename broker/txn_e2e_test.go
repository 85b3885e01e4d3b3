package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/weirtest"
)

// End-to-end transaction tests with franz-go against the broker (through
// weirtest): commit/abort visibility, fencing, crashes in every phase,
// consume-transform-produce with killed workers, idempotence across
// connection drops.

func e2eCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// readCommitted reads every record of topic with read_committed until the
// partitions' last stable offsets (all transactions decided) and returns
// the values.
func readAll(t *testing.T, b *weirtest.Broker, topic string, committed bool) []string {
	t.Helper()
	ctx := e2eCtx(t, 30*time.Second)
	adm := b.Admin()
	var ends kadm.ListedOffsets
	var err error
	for {
		// Wait until no transaction is ongoing (LSO == HW), so the
		// outcome is final.
		var lso kadm.ListedOffsets
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil {
			lso, err = adm.ListCommittedOffsets(ctx, topic)
		}
		if err != nil {
			t.Fatalf("list offsets: %v", err)
		}
		same := true
		ends.Each(func(o kadm.ListedOffset) {
			if l, ok := lso.Lookup(o.Topic, o.Partition); !ok || l.Offset != o.Offset {
				same = false
			}
		})
		if same || !committed {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("transactions of %s still undecided", topic)
		}
		time.Sleep(50 * time.Millisecond)
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	// Everything is already there (LSO == HW): read until the partitions'
	// ends are reached or until a poll finds nothing (the tail may be
	// control or aborted batches, which the client never returns).
	var out []string
	for len(left) > 0 {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("read %s: %v (left %v)", topic, ctx.Err(), left)
		}
		n := 0
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, string(r.Value))
			n++
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
		})
		if n == 0 {
			break // control batches at the end are never returned
		}
	}
	return out
}

func TestTxnCommitAbortFencing(t *testing.T) {
	b := weirtest.Start(t, weirtest.Topic("out", 2))
	ctx := e2eCtx(t, 60*time.Second)
	cl := b.Client(kgo.TransactionalID("e2e"), kgo.DefaultProduceTopic("out"), kgo.TransactionTimeout(10*time.Second))
	defer cl.Close()
	for i := range 5 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "t%d-%d", i, j)}).FirstErr(); err != nil {
				t.Fatalf("txn %d produce: %v", i, err)
			}
		}
		commit := kgo.TryCommit
		if i == 3 {
			commit = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("txn %d end: %v", i, err)
		}
	}
	got := readAll(t, b, "out", true)
	if len(got) != 40 {
		t.Fatalf("read_committed saw %d records, want 40", len(got))
	}
	for _, v := range got {
		if strings.HasPrefix(v, "t3-") {
			t.Fatalf("aborted record %s visible to read_committed", v)
		}
	}
	if all := readAll(t, b, "out", false); len(all) != 50 {
		t.Fatalf("read_uncommitted saw %d records, want 50", len(all))
	}
	// A second producer with the same id fences the first.
	cl2 := b.Client(kgo.TransactionalID("e2e"), kgo.DefaultProduceTopic("out"))
	defer cl2.Close()
	if err := cl2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl2.ProduceSync(ctx, &kgo.Record{Value: []byte("w")}).FirstErr(); err != nil {
		t.Fatalf("second producer: %v", err)
	}
	if err := cl2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr()
	if err == nil {
		err = cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie: %v", err)
	}
	for _, v := range readAll(t, b, "out", true) {
		if v == "zombie" {
			t.Fatal("zombie record visible")
		}
	}
	// DescribeProducers shows the producer state of the partitions.
	dp, err := b.Admin().DescribeProducers(ctx, kadm.TopicsSet{"out": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	dp.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			t.Fatalf("describe producers: %v", p.Err)
		}
		n += len(p.ActiveProducers)
	})
	if n == 0 {
		t.Fatal("DescribeProducers lists no producer")
	}
}

// txnRecords is the value of record j of transaction i.
func txnValue(i, j int) string { return fmt.Sprintf("txn%d-%d", i, j) }

// checkAllOrNothing checks that every transaction in vals is complete (n
// records) and that every transaction in acked is present.
func checkAllOrNothing(t *testing.T, vals []string, n int, acked map[int]bool) {
	t.Helper()
	counts := map[int]int{}
	for _, v := range vals {
		i, err := strconv.Atoi(strings.TrimPrefix(strings.Split(v, "-")[0], "txn"))
		if err != nil {
			t.Fatalf("bad value %q", v)
		}
		counts[i]++
	}
	for i, c := range counts {
		if c != n {
			t.Fatalf("transaction %d: %d of %d records visible (not all or nothing)", i, c, n)
		}
	}
	for i := range acked {
		if counts[i] != n {
			t.Fatalf("committed transaction %d lost: %d records", i, counts[i])
		}
	}
}

// TestTxnCrashEveryPhase crashes the broker (power loss: only fsynced data
// survives) at staggered moments of a stream of transactions spanning three
// partitions, so the crash lands while a transaction is ongoing, in
// prepare-commit, and with markers partly written. After each restart a
// new incarnation of the producer (same transactional id) resumes; in the
// end read_committed readers see every transaction whole or not at all, and
// every acknowledged commit.
func TestTxnCrashEveryPhase(t *testing.T) {
	b := weirtest.Start(t, weirtest.MemStorage(), weirtest.Topic("crash", 3))
	ctx := e2eCtx(t, 120*time.Second)
	const perTxn = 6
	acked := map[int]bool{}
	next := 0
	for round := range 8 {
		cl := b.Client(kgo.TransactionalID("crasher"), kgo.DefaultProduceTopic("crash"),
			kgo.TransactionTimeout(60*time.Second), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.RetryTimeout(5*time.Second), kgo.RequestRetries(3))
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var mu sync.Mutex
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if err := cl.BeginTransaction(); err != nil {
					return
				}
				var perr error
				for j := range perTxn {
					if perr = cl.ProduceSync(ctx, &kgo.Record{Value: []byte(txnValue(i, j))}).FirstErr(); perr != nil {
						break
					}
				}
				commit := kgo.TryCommit
				if perr != nil || i%5 == 4 {
					commit = kgo.TryAbort
				}
				err := cl.EndTransaction(ctx, commit)
				if err != nil || perr != nil {
					return
				}
				if commit == kgo.TryCommit {
					mu.Lock()
					acked[i] = true
					mu.Unlock()
				}
			}
		})
		time.Sleep(time.Duration(20+round*17) * time.Millisecond)
		b.CrashRestart()
		close(stop)
		wg.Wait()
		cl.Close()
	}
	// A last incarnation fences/aborts whatever the last crash left
	// ongoing, and commits one more.
	cl := b.Client(kgo.TransactionalID("crasher"), kgo.DefaultProduceTopic("crash"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for j := range perTxn {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(txnValue(next, j))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	acked[next] = true
	cl.Close()
	vals := readAll(t, b, "crash", true)
	checkAllOrNothing(t, vals, perTxn, acked)
	t.Logf("%d transactions attempted, %d acknowledged commits, %d records visible", next+1, len(acked), len(vals))
	// And once more after a clean restart (snapshots, not replay).
	b.Restart()
	checkAllOrNothing(t, readAll(t, b, "crash", true), perTxn, acked)
}
