package weirtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/weirhq/weir/broker"
)

func TestMain(m *testing.M) {
	RunChildRole(childRoles) // child_test.go
	goleak.VerifyTestMain(m)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func produce(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))}
		if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

func consumeAll(t *testing.T, b *Broker, topic string, n int) map[string]string {
	t.Helper()
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	got := map[string]string{}
	c := ctx(t)
	for len(got) < n {
		f := cl.PollFetches(c)
		if c.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", len(got), n, c.Err())
		}
		f.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = string(r.Value) })
	}
	return got
}

func TestStartIsLocalAndRandomPort(t *testing.T) {
	a := Start(t)
	b := Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two brokers share address %s", a.Addr())
	}
	host, _, err := net.SplitHostPort(a.Addr())
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr %q: want 127.0.0.1:port (%v)", a.Addr(), err)
	}
	if a.DataDir() == b.DataDir() {
		t.Fatal("two brokers share a data dir")
	}
}

func TestWithTopicAndConfigs(t *testing.T) {
	b := Start(t, Topic("a", 4, "retention.ms", "60000"), Topic("b", 1))
	adm := b.Admin()
	td, err := adm.ListTopics(ctx(t), "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["a"].Partitions); n != 4 {
		t.Fatalf("topic a has %d partitions, want 4", n)
	}
	if n := len(td["b"].Partitions); n != 1 {
		t.Fatalf("topic b has %d partitions, want 1", n)
	}
	rc, err := adm.DescribeTopicConfigs(ctx(t), "a")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, cfg := range c.Configs {
		if cfg.Key == "retention.ms" {
			found = cfg.MaybeValue() == "60000"
		}
	}
	if !found {
		t.Fatalf("retention.ms=60000 not set on topic a: %+v", c.Configs)
	}
}

func TestProduceConsume(t *testing.T) {
	b := Start(t)
	b.CreateTopic("t", 3)
	produce(t, b.Client(), "t", 30)
	got := consumeAll(t, b, "t", 30)
	for i := 0; i < 30; i++ {
		if got[fmt.Sprintf("k%d", i)] != fmt.Sprintf("v%d", i) {
			t.Fatalf("record k%d: got %q", i, got[fmt.Sprintf("k%d", i)])
		}
	}
}

func TestAutoCreateOffByDefault(t *testing.T) {
	b := Start(t)
	cl := b.Client(kgo.RecordRetries(2), kgo.RetryTimeout(2*time.Second))
	err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "nope", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to unknown topic without auto-create: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}

	b2 := Start(t, AutoCreateTopics(), DefaultPartitions(5))
	// franz-go asks for auto-creation only when told to.
	produce(t, b2.Client(kgo.AllowAutoTopicCreation()), "auto", 1)
	td, err := b2.Admin().ListTopics(ctx(t), "auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["auto"].Partitions); n != 5 {
		t.Fatalf("auto-created topic has %d partitions, want 5", n)
	}
}

func TestRestartKeepsDataAndAddress(t *testing.T) {
	b := Start(t, Topic("t", 2))
	cl := b.Client()
	produce(t, cl, "t", 10)
	addr := b.Addr()
	b.Restart()
	if b.Addr() != addr {
		t.Fatalf("address changed across restart: %s -> %s", addr, b.Addr())
	}
	// The client made before the restart reconnects by itself.
	produce(t, cl, "t", 20)
	if got := consumeAll(t, b, "t", 20); len(got) != 20 {
		t.Fatalf("after restart: %d distinct keys, want 20", len(got))
	}
}

func TestWithDataDirRecovery(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	func() {
		// A sub-test owns the first broker, so its cleanup (clean
		// shutdown) runs before the second broker starts.
		t.Run("first", func(t *testing.T) {
			b := Start(t, DataDir(dir), Topic("t", 1))
			produce(t, b.Client(), "t", 5)
		})
	}()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("data dir: %v", err)
	}
	b := Start(t, DataDir(dir))
	if got := consumeAll(t, b, "t", 5); len(got) != 5 {
		t.Fatalf("recovered %d records, want 5", len(got))
	}
}

func TestMetricsRegistry(t *testing.T) {
	b := Start(t, Topic("t", 1))
	produce(t, b.Client(), "t", 3)
	mfs, err := b.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "weir_") {
		t.Fatalf("no weir_ metrics registered: %v", names)
	}
}

// fatalTB records a Fatal instead of failing the real test.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalTB) Helper() {}

func TestStartFailuresFailTheTest(t *testing.T) {
	for name, opts := range map[string]func(t *testing.T) []Opt{
		"bad topic name":  func(*testing.T) []Opt { return []Opt{Topic("bad/name", 1)} },
		"zero partitions": func(*testing.T) []Opt { return []Opt{Topic("t", 0)} },
		"port in use": func(t *testing.T) []Opt {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			return []Opt{BrokerConfig(func(c *broker.Config) { c.KafkaAddr = ln.Addr().String() })}
		},
	} {
		t.Run(name, func(t *testing.T) {
			ftb := &fatalTB{TB: t}
			o := opts(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				Start(ftb, o...)
			}()
			<-done
			if ftb.msg == "" {
				t.Fatal("Start did not fail the test")
			}
			t.Log(ftb.msg)
		})
	}
}
