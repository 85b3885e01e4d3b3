package mirror

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/weirhq/weir/weirtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// cluster is one side of a test: its seeds and an admin client.
type cluster struct {
	seeds []string
	cl    *kgo.Client
	adm   *kadm.Client
}

func newCluster(t testing.TB, seeds []string) *cluster {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &cluster{seeds: seeds, cl: cl, adm: kadm.NewClient(cl)}
}

// startWeir starts a weir broker (the usual source).
func startWeir(t testing.TB) *cluster {
	b := weirtest.Start(t)
	return newCluster(t, []string{b.Addr()})
}

// startKfake starts a 3-broker kfake cluster: leaders, group and
// transaction coordinators spread over brokers; replication factor 3.
func startKfake(t testing.TB) *cluster {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return newCluster(t, c.ListenAddrs())
}

func (c *cluster) createTopic(t testing.TB, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.adm.CreateTopic(ctx, partitions, -1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// produce writes n records to topic (partitions round robin), numbered from
// `from`: key "k<i>" (nil for every 7th), value "v<i>", a header, and a
// distinct timestamp.
func (c *cluster) produce(t testing.TB, topic string, partitions int32, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, testRecord(topic, partitions, i))
	}
	if err := c.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func testRecord(topic string, partitions int32, i int) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(fmt.Sprint("v", i)),
		Headers:   []kgo.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(i))}, {Key: "empty"}},
		Timestamp: t0.Add(time.Duration(i) * time.Millisecond)}
	if i%7 != 0 {
		r.Key = []byte(fmt.Sprint("k", i))
	}
	return r
}

// produceTxn writes n records in a committed transaction and n in an
// aborted one, with a transactional producer.
func (c *cluster) produceTxn(t testing.TB, topic string, partitions int32, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("test-txn-"+topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			r := testRecord(topic, partitions, i)
			if !commit {
				r.Value = []byte("aborted")
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads every committed data record of topic, by partition.
func (c *cluster) readAll(t testing.TB, topic string) map[int32][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := endOffsets(ctx, c.adm, true, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	out := map[int32][]*kgo.Record{}
	ends.Each(func(o kadm.ListedOffset) {
		err := scan(ctx, []kgo.Opt{kgo.SeedBrokers(c.seeds...)}, topic, o.Partition, 0, o.Offset, true, func(r *kgo.Record) bool {
			if !r.Attrs.IsControl() {
				out[o.Partition] = append(out[o.Partition], r)
			}
			return true
		})
		if err != nil {
			t.Fatalf("read %s/%d: %v", topic, o.Partition, err)
		}
	})
	return out
}

// sameTopic asserts that target topic tgt on dst holds exactly the
// committed records of src on from, partition by partition, in order.
func sameTopic(t testing.TB, from *cluster, src string, dst *cluster, tgt string) int {
	t.Helper()
	want, got := from.readAll(t, src), dst.readAll(t, tgt)
	n := 0
	for p, ws := range want {
		gs := got[p]
		if len(gs) != len(ws) {
			t.Errorf("%s/%d: %d records, source %s has %d", tgt, p, len(gs), src, len(ws))
		}
		for i := 0; i < min(len(ws), len(gs)); i++ {
			if !sameRecord(ws[i], gs[i]) {
				t.Errorf("%s/%d record %d: got key %q value %q ts %v headers %v, want key %q value %q ts %v headers %v",
					tgt, p, i, gs[i].Key, gs[i].Value, gs[i].Timestamp, gs[i].Headers, ws[i].Key, ws[i].Value, ws[i].Timestamp, ws[i].Headers)
				break
			}
		}
		n += len(ws)
	}
	for p := range got {
		if _, ok := want[p]; !ok && len(got[p]) > 0 {
			t.Errorf("%s/%d: %d records, source has no such partition", tgt, p, len(got[p]))
		}
	}
	return n
}

// runMirror runs a mirror in the background until the test ends (or stop
// is called) and returns stop, which waits for Run to return its error.
func runMirror(t testing.TB, cfg Config) (stop func() error) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.RescanInterval == 0 {
		cfg.RescanInterval = 200 * time.Millisecond
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	var result error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case result = <-done:
			case <-time.After(60 * time.Second):
				result = fmt.Errorf("mirror did not stop within 60s")
			}
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitCaughtUp waits until the mirror's status shows every partition of
// topics copied up to the source's end.
func waitCaughtUp(t testing.TB, cfg Config, topics map[string]int32) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last []PartitionStatus
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := Status(ctx, cfg)
		cancel()
		if err == nil {
			last = st
			done := 0
			for _, s := range st {
				if _, ok := topics[s.Topic]; ok && s.LagRecords == 0 {
					done++
				}
			}
			want := 0
			for _, n := range topics {
				want += int(n)
			}
			if done == want {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("mirror not caught up within 90s: %+v", last)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(bytes.TrimSpace(p)), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("MIRROR_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
