package stream

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/weirtest"
)

// testBroker is the Kafka-protocol broker an integration test runs
// against: weir's own broker (weirtest, in-process) by default, or
// franz-go's kfake as a second implementation (-stream.broker=kfake, or
// startBrokerOn for a test that must run on a given one).
type testBroker struct {
	t     testing.TB
	kind  brokerKind
	seeds []string
	cl    *kgo.Client
	adm   *kadm.Client
}

// brokerKind names a broker implementation the tests can run against.
type brokerKind string

const (
	weirBroker  brokerKind = "weir"
	kfakeBroker brokerKind = "kfake"
)

var (
	brokerFlag = flag.String("stream.broker", string(weirBroker), "broker the integration tests run against: weir or kfake")
	// -stream.eos-broker runs the ExactlyOnce tests on another broker than
	// the others (default: the same).
	eosBrokerFlag = flag.String("stream.eos-broker", "", "broker the ExactlyOnce tests run against: weir or kfake (default: -stream.broker)")
)

// defaultBroker is the broker of startBroker.
func defaultBroker(t testing.TB) brokerKind { return parseBroker(t, *brokerFlag) }

func parseBroker(t testing.TB, name string) brokerKind {
	switch k := brokerKind(name); k {
	case weirBroker, kfakeBroker:
		return k
	default:
		t.Fatalf("broker %q: want weir or kfake", k)
		return ""
	}
}

// startBrokerFor starts the broker the tests of guarantee g run against.
func startBrokerFor(t *testing.T, g Guarantee) *testBroker {
	if g == ExactlyOnce && *eosBrokerFlag != "" {
		return startBrokerOn(t, parseBroker(t, *eosBrokerFlag))
	}
	return startBroker(t)
}

func startCluster(t testing.TB, kind brokerKind) []string {
	t.Helper()
	if kind == kfakeBroker {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c.ListenAddrs()
	}
	return []string{weirtest.Start(t).Addr()}
}

func startBroker(t *testing.T) *testBroker { return startBrokerOn(t, defaultBroker(t)) }

func startBrokerB(t testing.TB) *testBroker { return startBrokerOn(t, defaultBroker(t)) }

func startBrokerOn(t testing.TB, kind brokerKind) *testBroker {
	t.Helper()
	seeds := startCluster(t, kind)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &testBroker{t: t, kind: kind, seeds: seeds, cl: cl, adm: kadm.NewClient(cl)}
}

func (b *testBroker) createTopic(name string, partitions int32) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.adm.CreateTopic(ctx, partitions, -1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.t.Fatalf("create %s: %v", name, err)
	}
}

// produce writes records synchronously, partitioned by key (murmur2).
func (b *testBroker) produce(recs ...*kgo.Record) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.t.Fatalf("produce: %v", err)
	}
}

// readAll returns every record of topic up to its current end, by partition
// then offset.
func (b *testBroker) readAll(topic string) []*kgo.Record { return b.read(topic, false) }

// readCommitted is readAll for a read_committed reader: records of aborted
// or open transactions are not returned.
func (b *testBroker) readCommitted(topic string) []*kgo.Record { return b.read(topic, true) }

func (b *testBroker) read(topic string, committed bool) []*kgo.Record {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list := b.adm.ListEndOffsets
	// Control records (transaction markers) are kept so that the reader
	// sees every offset up to the end, also after the last data record.
	opts := []kgo.Opt{kgo.SeedBrokers(b.seeds...), kgo.KeepControlRecords()}
	if committed {
		list = b.adm.ListCommittedOffsets
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	ends, err := list(ctx, topic)
	if err != nil {
		b.t.Fatal(err)
	}
	want := map[int32]int64{}
	parts := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	rc, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(parts))...)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rc.Close()
	byPart := map[int32][]*kgo.Record{}
	got := map[int32]int64{}
	for {
		done := true
		for p, e := range want {
			if got[p] < e {
				done = false
			}
		}
		if done {
			break
		}
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			b.t.Fatalf("read %s: timeout (have %v of %v)", topic, got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < want[r.Partition] && !r.Attrs.IsControl() {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
			// Any record at or past the end also ends the partition: the
			// records just below the end may all be aborted (filtered by
			// a read_committed reader) with their marker at or past it —
			// the end listed before the marker was durable.
			got[r.Partition] = max(got[r.Partition], r.Offset+1)
		})
	}
	var out []*kgo.Record
	for p := int32(0); p < int32(len(ends[topic])); p++ {
		out = append(out, byPart[p]...)
	}
	return out
}

// waitFor polls topic until cond holds, failing the test after timeout.
func (b *testBroker) waitFor(topic string, timeout time.Duration, cond func([]*kgo.Record) bool) []*kgo.Record {
	return b.waitForIso(topic, false, timeout, cond)
}

func (b *testBroker) waitForIso(topic string, committed bool, timeout time.Duration, cond func([]*kgo.Record) bool) []*kgo.Record {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		recs := b.read(topic, committed)
		if cond(recs) {
			return recs
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: condition not met within %v (%d records)", topic, timeout, len(recs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runningApp is an App running in the background.
type runningApp struct {
	a      *App
	killed *atomic.Bool // the App's kill switch (withKillSwitch); nil: none
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func (b *testBroker) run(appID string, build func(*Builder), opts ...Opt) *runningApp {
	b.t.Helper()
	bl := NewBuilder()
	build(bl)
	killed := new(atomic.Bool)
	a, err := NewApp(appID, bl, append([]Opt{Brokers(b.seeds...), withKillSwitch(killed)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	return runPrepared(b.t, a, killed)
}

// stop shuts the App down gracefully (flush, commit, leave) and returns Run's error.
func (r *runningApp) stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(60 * time.Second):
			r.err = errors.New("app did not stop within 60s")
		}
	})
	return r.err
}

// kill stops the App as a crash would: nothing more is committed or
// checkpointed (the group is still left, so the test need not wait for a
// session timeout).
func (r *runningApp) kill() error {
	if r.killed == nil {
		panic("runningApp.kill: the App has no kill switch (withKillSwitch)")
	}
	r.killed.Store(true)
	return r.stop()
}

func key(i int) string { return fmt.Sprintf("k%02d", i) }
