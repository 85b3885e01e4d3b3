// Package weirtest starts a real weir broker inside a Go test: a durable,
// single-node, Kafka-protocol broker on a random 127.0.0.1 port with its
// data in a temporary directory, started in milliseconds and stopped by
// t.Cleanup.
//
// It is the same broker `weir serve` runs, not a mock: any Kafka client
// (franz-go, sarama, kafka-go, librdkafka, ...) can talk to it, records go
// through the real storage engine, and an acks=all produce is answered
// after fsync.
//
//	func TestOrders(t *testing.T) {
//		b := weirtest.Start(t, weirtest.Topic("orders", 3))
//		cl := b.Client() // a franz-go client, closed at cleanup
//		// ... or point any client at b.Addr()
//	}
//
// Restart stops the broker cleanly and starts it again on the same address
// and data. With MemStorage the data lives in an in-memory file system
// that knows what was fsynced (start and stop take well under a
// millisecond), and CrashRestart simulates a power loss: connections are
// cut, and the broker recovers from exactly the fsynced state.
//
// A Broker's methods are safe for concurrent use, except that Stop, Restart
// and CrashRestart must not run concurrently with one another.
package weirtest

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/vfs"
)

// Opt configures Start. Options are applied in order.
type Opt interface{ apply(*options) }

type topicSpec struct {
	name       string
	partitions int32
	configs    map[string]*string
}

type options struct {
	dataDir    string
	logger     *slog.Logger
	testLog    bool
	configure  []func(*broker.Config)
	clientOpts []kgo.Opt
	topics     []topicSpec
	mem        bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// Topic creates topic with the given number of partitions (and
// optional "key", "value" config pairs, e.g. "retention.ms", "60000")
// before Start returns. Start fails the test if the topic cannot be
// created.
func Topic(name string, partitions int32, configPairs ...string) Opt {
	return optionFunc(func(o *options) {
		spec := topicSpec{name: name, partitions: partitions, configs: map[string]*string{}}
		for i := 0; i+1 < len(configPairs); i += 2 {
			v := configPairs[i+1]
			spec.configs[configPairs[i]] = &v
		}
		if len(configPairs)%2 == 1 {
			spec.configs[configPairs[len(configPairs)-1]] = nil // reported by CreateTopics
		}
		o.topics = append(o.topics, spec)
	})
}

// AutoCreateTopics makes the broker create unknown topics on first use
// (auto.create.topics.enable), with DefaultPartitions partitions.
// Default: off, as on weir serve.
func AutoCreateTopics() Opt {
	return optionFunc(func(o *options) {
		o.configure = append(o.configure, func(c *broker.Config) { c.AutoCreateTopics = true })
	})
}

// DefaultPartitions sets num.partitions, used for auto-created topics
// and CreateTopics requests without a partition count. Default 1.
func DefaultPartitions(n int32) Opt {
	return optionFunc(func(o *options) {
		o.configure = append(o.configure, func(c *broker.Config) { c.DefaultPartitions = n })
	})
}

// DataDir keeps the broker's data in dir instead of a fresh
// t.TempDir(): start a second broker on the same dir (after the first is
// closed) to test recovery. The directory is not removed at cleanup.
func DataDir(dir string) Opt {
	return optionFunc(func(o *options) { o.dataDir = dir })
}

// Logger sends the broker's logs to l. Default: discarded.
func Logger(l *slog.Logger) Opt {
	return optionFunc(func(o *options) { o.logger = l })
}

// TestLog sends the broker's logs (info and above) to t.Log, so they
// show for failed tests and with go test -v.
func TestLog() Opt {
	return optionFunc(func(o *options) { o.testLog = true })
}

// ClientOpts adds options to every client returned by Client and
// Admin (before the options passed to Client itself).
func ClientOpts(opts ...kgo.Opt) Opt {
	return optionFunc(func(o *options) { o.clientOpts = append(o.clientOpts, opts...) })
}

// BrokerConfig edits the broker configuration before start: the
// escape hatch for every broker.Config field without a dedicated option.
// DataDir, KafkaAddr, Logger, Registerer and GroupInitialRebalanceDelay
// (none, where Kafka waits 3 s) are set by weirtest first and may be
// overridden here.
func BrokerConfig(fn func(*broker.Config)) Opt {
	return optionFunc(func(o *options) { o.configure = append(o.configure, fn) })
}

// Broker is a running in-process weir broker owned by one test.
type Broker struct {
	t    testing.TB
	opts options
	reg  *prometheus.Registry

	mu      sync.Mutex
	b       *broker.Broker // nil while closed
	addr    string
	cfg     broker.Config
	clients []*kgo.Client
	tlog    *testWriter // nil unless TestLog
	mem     *vfs.MemFS  // MemStorage: the broker's storage
	relay   *relay      // MemStorage: what clients connect to
}

// Start starts a broker on 127.0.0.1 (random port) with its data in a
// temporary directory, and registers its shutdown with t.Cleanup: clients
// from Client/Admin are closed first, then the broker, and a shutdown
// error fails the test. Start fails the test (t.Fatal) when the broker
// cannot start.
func Start(t testing.TB, opts ...Opt) *Broker {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.dataDir == "" && !o.mem {
		o.dataDir = t.TempDir()
	}
	if o.dataDir == "" {
		o.dataDir = "/weir" // inside the in-memory file system
	}
	logger := o.logger
	var tlog *testWriter
	if logger == nil && o.testLog {
		tlog = &testWriter{t: t}
		logger = slog.New(slog.NewTextHandler(tlog, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	wb := &Broker{t: t, opts: o, reg: prometheus.NewRegistry(), tlog: tlog}
	wb.cfg = broker.Config{
		DataDir:   o.dataDir,
		KafkaAddr: "127.0.0.1:0",
		// A test's first consumer-group rebalance happens at once
		// instead of after Kafka's 3 s group.initial.rebalance.delay.ms.
		GroupInitialRebalanceDelay: -1,
		Logger:                     logger,
		Registerer:                 wb.reg,
	}
	if o.mem {
		wb.mem = vfs.NewCrashableMem()
		wb.cfg.FS = wb.mem
		r, err := newRelay()
		if err != nil {
			t.Fatalf("weirtest: start relay: %v", err)
		}
		wb.relay = r
		wb.cfg.AdvertisedAddr = r.addr()
	}
	for _, fn := range o.configure {
		fn(&wb.cfg)
	}
	if err := wb.start(); err != nil {
		if wb.relay != nil {
			wb.relay.close()
		}
		t.Fatalf("weirtest: start broker: %v", err)
	}
	t.Cleanup(wb.cleanup)
	if len(o.topics) > 0 {
		wb.createTopics(o.topics)
	}
	return wb
}

// start starts the broker; mu must not be held.
func (b *Broker) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	br, err := broker.Start(ctx, b.cfg)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.b = br
	b.addr = br.Addr()
	if b.relay != nil {
		b.addr = b.relay.addr()
		b.relay.setTarget(br.Addr())
	}
	b.mu.Unlock()
	return nil
}

func (b *Broker) cleanup() {
	b.mu.Lock()
	clients := b.clients
	b.clients = nil
	b.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
	if err := b.stop(); err != nil {
		b.t.Errorf("weirtest: broker shutdown: %v", err)
	}
	if b.relay != nil {
		b.relay.close()
	}
	if b.tlog != nil {
		b.tlog.close()
	}
}

// testWriter forwards log lines to t.Log until closed: logging through a
// testing.TB after its test has completed panics, so lines written after
// cleanup (there should be none: the broker is closed first) are dropped.
type testWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

func (b *Broker) stop() error {
	b.mu.Lock()
	br := b.b
	b.b = nil
	b.mu.Unlock()
	if br == nil {
		return nil
	}
	return br.Close()
}

// Addr is the broker's host:port, for any Kafka client's bootstrap
// servers. It stays the same across Restart.
func (b *Broker) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// DataDir is the directory holding the broker's data (inside the
// in-memory file system with MemStorage).
func (b *Broker) DataDir() string { return b.cfg.DataDir }

// Registry is the Prometheus registry the broker's metrics are registered
// on, for tests that assert on metrics.
func (b *Broker) Registry() *prometheus.Registry { return b.reg }

// Broker returns the underlying broker (nil while stopped by Stop or
// between the halves of Restart).
func (b *Broker) Broker() *broker.Broker {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b
}

// Client returns a franz-go client bootstrapped to the broker, closed at
// cleanup. opts are added after the ClientOpts options, e.g.
// kgo.ConsumeTopics("orders") or kgo.ConsumerGroup("g").
func (b *Broker) Client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, b.opts.clientOpts...)
	all = append(all, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		b.t.Fatalf("weirtest: new client: %v", err)
	}
	b.mu.Lock()
	b.clients = append(b.clients, cl)
	b.mu.Unlock()
	return cl
}

// Admin returns a kadm admin client for the broker, closed at cleanup.
func (b *Broker) Admin() *kadm.Client {
	b.t.Helper()
	return kadm.NewClient(b.Client())
}

// CreateTopic creates a topic with the given partitions and optional
// "key", "value" config pairs, failing the test on error.
func (b *Broker) CreateTopic(name string, partitions int32, configPairs ...string) {
	b.t.Helper()
	var o options
	Topic(name, partitions, configPairs...).apply(&o)
	b.createTopics(o.topics)
}

func (b *Broker) createTopics(specs []topicSpec) {
	b.t.Helper()
	adm := b.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range specs {
		resp, err := adm.CreateTopic(ctx, s.partitions, -1, s.configs, s.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			b.t.Fatalf("weirtest: create topic %q (%d partitions): %v%s", s.name, s.partitions, err, msg(resp.ErrMessage))
		}
	}
}

func msg(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// Stop shuts the broker down cleanly (as on SIGTERM) and reports the
// shutdown error. Clients stay open and reconnect after Restart.
func (b *Broker) Stop() error { return b.stop() }

// Restart stops the broker cleanly and starts it again on the same data
// directory and the same address, so open clients reconnect by
// themselves. It fails the test if either half fails.
func (b *Broker) Restart() {
	b.t.Helper()
	// Listeners configured with port 0 come back on the ports they got.
	if len(b.cfg.Listeners) > 0 {
		b.mu.Lock()
		if b.b != nil {
			bound := b.b.Listeners()
			ls := slices.Clone(b.cfg.Listeners)
			for i := range ls {
				ls[i].Addr = bound[i].Addr
			}
			b.cfg.Listeners = ls
		}
		b.mu.Unlock()
	}
	if err := b.stop(); err != nil {
		b.t.Fatalf("weirtest: restart: stop: %v", err)
	}
	if b.relay != nil {
		b.relay.cut() // a clean stop closes connections too
		if err := b.start(); err != nil {
			b.t.Fatalf("weirtest: restart: start: %v", err)
		}
		return
	}
	// The old listener's port is free again once Stop returned; Go sets
	// SO_REUSEADDR, so lingering TIME_WAIT connections do not block it.
	b.cfg.KafkaAddr = b.Addr()
	var err error
	for i := 0; i < 50; i++ {
		if err = b.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.t.Fatalf("weirtest: restart: start on %s: %v", b.cfg.KafkaAddr, err)
}

// Deprecated names, kept for code written before the options dropped their
// "With" prefix (the stream package's convention: an option is named for
// what it sets).
var (
	WithTopic             = Topic
	WithAutoCreateTopics  = AutoCreateTopics
	WithDefaultPartitions = DefaultPartitions
	WithDataDir           = DataDir
	WithLogger            = Logger
	WithTestLog           = TestLog
	WithClientOpts        = ClientOpts
	WithBrokerConfig      = BrokerConfig
	WithMemStorage        = MemStorage
)

// Option is the former name of Opt.
//
// Deprecated: use Opt.
type Option = Opt
