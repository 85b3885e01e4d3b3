package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testBroker is the Kafka-protocol broker the integration tests run
// against. Today it is franz-go's kfake (in-process, groups and
// transactions); weir's own broker replaces it by changing startCluster
// alone: `addr := weirtest.Start(t).Addr()`.
type testBroker struct {
	t     testing.TB
	seeds []string
	cl    *kgo.Client
	adm   *kadm.Client
}

const testBrokerName = "kfake"

func startCluster(t testing.TB) []string {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func startBroker(t *testing.T) *testBroker { return startBrokerB(t) }

func startBrokerB(t testing.TB) *testBroker {
	t.Helper()
	seeds := startCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &testBroker{t: t, seeds: seeds, cl: cl, adm: kadm.NewClient(cl)}
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
	opts := []kgo.Opt{kgo.SeedBrokers(b.seeds...)}
	if committed {
		list = b.adm.ListCommittedOffsets
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
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
			if r.Offset < want[r.Partition] {
				if !r.Attrs.IsControl() {
					byPart[r.Partition] = append(byPart[r.Partition], r)
				}
				got[r.Partition] = r.Offset + 1
			}
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
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func (b *testBroker) run(appID string, build func(*Builder), opts ...Opt) *runningApp {
	b.t.Helper()
	bl := NewBuilder()
	build(bl)
	a, err := NewApp(appID, bl, append([]Opt{Brokers(b.seeds...)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningApp{a: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	b.t.Cleanup(func() { r.stop() })
	return r
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
	r.a.crash.Store(true)
	return r.stop()
}

func key(i int) string { return fmt.Sprintf("k%02d", i) }
