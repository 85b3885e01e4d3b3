package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/mirror"
	"github.com/weirhq/weir/weirtest"
)

// readCommitted reads every committed data record of topic on seeds, by
// partition, up to the end offsets at the time of the call.
func readCommitted(t *testing.T, seeds []string, topic string) map[int32][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	out := map[int32][]*kgo.Record{}
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: still waiting for %v", topic, remaining)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], r)
			}
			if r.Offset >= end-1 {
				delete(remaining, r.Partition)
			}
		})
	}
	return out
}

func sameCopy(a, b *kgo.Record) bool {
	if !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Value, b.Value) ||
		!a.Timestamp.Equal(b.Timestamp) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// compareCopies asserts that dst's topic holds exactly the committed records
// of src's, partition by partition, in order; it returns their count.
func compareCopies(t *testing.T, src []string, srcTopic string, dst []string, dstTopic string) int {
	t.Helper()
	want, got := readCommitted(t, src, srcTopic), readCommitted(t, dst, dstTopic)
	n := 0
	for p, ws := range want {
		gs := got[p]
		if len(gs) != len(ws) {
			t.Errorf("%s/%d: %d records, source has %d", dstTopic, p, len(gs), len(ws))
		}
		for i := 0; i < min(len(ws), len(gs)); i++ {
			if !sameCopy(ws[i], gs[i]) {
				t.Errorf("%s/%d record %d: %q=%q, source has %q=%q", dstTopic, p, i, gs[i].Key, gs[i].Value, ws[i].Key, ws[i].Value)
				break
			}
		}
		n += len(ws)
	}
	return n
}

// waitStarted waits until the mirror process logged that it copies.
func waitStarted(t *testing.T, p *weirProc) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.stderr.String(), "mirror started") {
		select {
		case <-p.exited:
			t.Fatalf("mirror exited (%v) before starting\nstderr: %s", p.err, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror did not start within 60s\nstderr: %s", p.stderr)
		}
	}
}

// waitMirrored waits until `weir mirror status` (the library call behind
// it) shows every partition of the mirror caught up, with want partitions.
func waitMirrored(t *testing.T, cfg mirror.Config, want int) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	var last []mirror.PartitionStatus
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := mirror.Status(ctx, cfg)
		cancel()
		if err == nil {
			last = st
			done := 0
			for _, s := range st {
				if s.LagRecords == 0 {
					done++
				}
			}
			if done == want && len(st) == want {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("mirror not caught up within 120s: %+v", last)
}

// testProducer keeps writing to two topics of the source while the mirror
// is killed and restarted: plain records with headers, null keys and
// explicit timestamps, and transactions of which every third is aborted.
func testProducer(t *testing.T, seeds []string, rounds int) (wait func()) {
	plain, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("ledger-writer"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer plain.Close()
		defer txn.Close()
		ctx := context.Background()
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		for round := 0; round < rounds; round++ {
			var recs []*kgo.Record
			for j := 0; j < 50; j++ {
				i := round*50 + j
				r := &kgo.Record{Topic: "orders", Partition: int32(i % 3), Value: []byte(fmt.Sprint("order-", i)),
					Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(fmt.Sprint(i))}}, Timestamp: t0.Add(time.Duration(i) * time.Millisecond)}
				if i%5 != 0 {
					r.Key = []byte(fmt.Sprint("customer-", i%17))
				}
				recs = append(recs, r)
			}
			if err := plain.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Errorf("produce orders: %v", err)
				return
			}
			if err := txn.BeginTransaction(); err != nil {
				t.Errorf("begin: %v", err)
				return
			}
			for j := 0; j < 10; j++ {
				txn.Produce(ctx, &kgo.Record{Topic: "ledger", Partition: int32(j % 2), Key: []byte(fmt.Sprint("acct-", j)),
					Value: []byte(fmt.Sprint("entry-", round, "-", j))}, nil)
			}
			if err := txn.Flush(ctx); err != nil {
				t.Errorf("flush: %v", err)
				return
			}
			if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(round%3 != 0)); err != nil {
				t.Errorf("end txn: %v", err)
				return
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()
	return wg.Wait
}

// TestMirrorProcessKill9: `weir mirror` copies weir -> a 3-broker cluster
// (replication factor 3) and back while it is killed with SIGKILL several
// times mid-copy and restarted; at the end every record of every partition
// is on the target exactly once, in order, with key, value, headers and
// timestamp (aborted source transactions absent). Under both guarantees.
func TestMirrorProcessKill9(t *testing.T) {
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprint("exactly-once=", eos), func(t *testing.T) {
			src := weirtest.Start(t, weirtest.Topic("orders", 3), weirtest.Topic("ledger", 2))
			kf, err := kfake.NewCluster(kfake.NumBrokers(3))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(kf.Close)
			srcSeeds, kfSeeds := []string{src.Addr()}, kf.ListenAddrs()
			wait := testProducer(t, srcSeeds, 60)

			args := []string{"mirror", "--source", src.Addr(), "--target", strings.Join(kfSeeds, ","), "--topics", "orders,ledger",
				"--prefix", "w.", "--max-poll-records", "40", "--id", "there"}
			if eos {
				args = append(args, "--exactly-once")
			}
			kills, ahead := 0, 0
			for i := 0; i < 4; i++ {
				p := startWeir(t, args...)
				time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
				if err := p.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				<-p.exited
				kills++
				if st, err := mirror.Status(context.Background(), mirror.Config{Source: srcSeeds, Target: kfSeeds, ID: "there"}); err == nil {
					var copied, lag int64
					for _, s := range st {
						copied, lag = copied+s.Copied, lag+s.LagRecords
					}
					t.Logf("kill %d: progress %d offsets copied, %d behind", kills, copied, lag)
				}
				ahead += strings.Count(p.stderr.String(), "target ahead of progress: copies found and skipped")
			}
			wait()
			p := startWeir(t, args...)
			waitStarted(t, p)
			cfg := mirror.Config{Source: srcSeeds, Target: kfSeeds, ID: "there"}
			waitMirrored(t, cfg, 5)
			p.interrupt(t)
			ahead += strings.Count(p.stderr.String(), "target ahead of progress: copies found and skipped")
			t.Logf("%d kills; %d partition restarts found copies past the stored progress", kills, ahead)
			if n := compareCopies(t, srcSeeds, "orders", kfSeeds, "w.orders"); n != 3000 {
				t.Errorf("orders: compared %d records, want 3000", n)
			}
			if n := compareCopies(t, srcSeeds, "ledger", kfSeeds, "w.ledger"); n != 400 {
				t.Errorf("ledger: compared %d committed records, want 400", n)
			}

			// And back: the cluster -> weir, killed once mid-copy.
			back := []string{"mirror", "--source", strings.Join(kfSeeds, ","), "--target", src.Addr(), "--topic-regex", `w\..*`,
				"--prefix", "back.", "--max-poll-records", "40", "--id", "back"}
			if eos {
				back = append(back, "--exactly-once")
			}
			p = startWeir(t, back...)
			time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond)
			_ = p.cmd.Process.Kill()
			<-p.exited
			p = startWeir(t, back...)
			waitStarted(t, p)
			waitMirrored(t, mirror.Config{Source: kfSeeds, Target: srcSeeds, ID: "back"}, 5)
			p.interrupt(t)
			compareCopies(t, srcSeeds, "orders", srcSeeds, "back.w.orders")
			compareCopies(t, srcSeeds, "ledger", srcSeeds, "back.w.ledger")
		})
	}
}

// TestMirrorCLI: status and cutover through the command line, and their
// errors.
func TestMirrorCLI(t *testing.T) {
	src := weirtest.Start(t, weirtest.Topic("clicks", 2))
	kf, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	target := strings.Join(kf.ListenAddrs(), ",")
	cl := src.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	out := mustCLI(t, "", "mirror", "status", "--source", src.Addr(), "--target", target)
	if !strings.Contains(out, "no progress") {
		t.Errorf("status before any copy: %q", out)
	}
	p := startWeir(t, "mirror", "--source", src.Addr(), "--target", target, "--topics", "clicks", "--metrics-addr", "127.0.0.1:0")
	waitStarted(t, p)
	waitMirrored(t, mirror.Config{Source: []string{src.Addr()}, Target: kf.ListenAddrs()}, 2)
	url := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(p.stdout.String(), "\n", 2)[0], "metrics on "))
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`weir_mirror_copied_records_total{mirror="default",topic="clicks"} 100`,
		`weir_mirror_lag_records{mirror="default",partition="1",topic="clicks"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	out = mustCLI(t, "", "mirror", "status", "--source", src.Addr(), "--target", target)
	for _, want := range []string{"clicks  0          clicks  50      50          0", "TOTAL"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	// A group that read 10 records of each partition moves to the target.
	adm := src.Admin()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "clicks", Partition: 0, At: 10, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "clicks", Partition: 1, At: 10, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, "", "mirror", "cutover", "g", "--source", src.Addr(), "--target", target, "-o", "json")
	if !strings.Contains(out, `"target_offset": 10`) {
		t.Errorf("cutover output: %s", out)
	}
	p.interrupt(t)
	_, errOut, code := runCLI(t, "", "mirror", "--source", src.Addr())
	if code == 0 || !strings.Contains(errOut, "no target brokers") {
		t.Errorf("mirror without --target: exit %d, %s", code, errOut)
	}
}
