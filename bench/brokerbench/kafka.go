package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	benchTopic = "brokerbench"
	wideTopic  = "brokerbench-wide"
)

// kafkaDriver runs the workload with franz-go against a Kafka-protocol
// broker (weir or kfake). The producers use acks=all; by default with
// idempotence disabled and up to Config.KafkaInFlight produce requests in
// flight (5, what an idempotent franz-go producer uses too), or with kgo's
// default idempotent producer when Config.Idempotent is set.
type kafkaDriver struct {
	cfg   Config
	codec kgo.CompressionCodec
	addr  string
	conn  []kgo.Opt // connection options of every client (TLS)
	admin *kgo.Client
	adm   *kadm.Client
	pl    *payloads
}

// newKafkaDriver: conn options (TLS) apply to every client of the driver.
func newKafkaDriver(addr, codec string, cfg Config, conn ...kgo.Opt) (*kafkaDriver, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, conn...)...)
	if err != nil {
		return nil, err
	}
	return &kafkaDriver{cfg: cfg, codec: kgoCodec(codec), addr: addr, conn: conn, admin: cl, adm: kadm.NewClient(cl), pl: newPayloads(cfg.RecordSize, 64<<10)}, nil
}

func (d *kafkaDriver) close() { d.admin.Close() }

func (d *kafkaDriver) producerOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.addr),
		kgo.DefaultProduceTopic(benchTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(d.codec),
	}
	if !d.cfg.Idempotent {
		// kgo's idempotent producer keeps up to 5 requests in flight
		// (Produce v1+); the plain one defaults to 1.
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(d.cfg.KafkaInFlight))
	}
	opts = append(opts, d.conn...)
	return append(opts, extra...)
}

func (d *kafkaDriver) setup(ctx context.Context) error {
	return d.createTopic(ctx, benchTopic, d.cfg.Partitions)
}

// createTopic creates topic and waits until its metadata shows every
// partition with a leader.
func (d *kafkaDriver) createTopic(ctx context.Context, topic string, partitions int) error {
	resp, err := d.adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	// Each broker starts in a fresh data directory, so an existing topic
	// is this create's own earlier attempt: the client retries a create
	// that timed out (1,000 partitions on a loaded machine), and the broker
	// answers the retry TOPIC_ALREADY_EXISTS. The wait below still checks
	// the partition count.
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for {
		tds, err := d.adm.ListTopics(ctx, topic)
		if err == nil {
			td := tds[topic]
			ready := td.Err == nil && len(td.Partitions) == partitions
			for _, p := range td.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return nil
			}
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("topic %s not ready: %w", topic, err)
		}
	}
}

// firstErr keeps the first error reported from any goroutine.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) set(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (d *kafkaDriver) produce(ctx context.Context, n int) error {
	cl, err := kgo.NewClient(d.producerOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var fe firstErr
	cb := func(r *kgo.Record, err error) {
		fe.set(err)
		d.pl.put(r.Value)
	}
	parts := d.cfg.Partitions
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: d.pl.get(i), Partition: int32(i % parts)}, cb)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return fe.get()
}

func (d *kafkaDriver) consume(ctx context.Context, n int) (readStats, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(d.addr),
		kgo.ConsumeTopics(benchTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, d.conn...)...)
	if err != nil {
		return readStats{}, err
	}
	defer cl.Close()
	tr := newReadTracker(n)
	for !tr.complete() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return tr.st, fmt.Errorf("%d distinct of %d records read: %w", tr.st.Distinct, n, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return tr.st, ferr
		}
		fs.EachRecord(func(r *kgo.Record) { tr.add(r.Value) })
	}
	return tr.st, nil
}

func (d *kafkaDriver) fixedRate(ctx context.Context, first, count, rate int) ([]time.Duration, error) {
	cl, err := kgo.NewClient(d.producerOpts(kgo.ProducerLinger(0))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	parts := d.cfg.Partitions

	// Warm up: one record per partition, so metadata is loaded and the
	// connection is open before the clock starts.
	warm := make([]*kgo.Record, parts)
	for p := range warm {
		warm[p] = &kgo.Record{Value: d.pl.get(first + count + p), Partition: int32(p)}
	}
	if err := cl.ProduceSync(ctx, warm...).FirstErr(); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	lat := make([]time.Duration, count)
	var (
		wg sync.WaitGroup
		fe firstErr
	)
	pc := pacer{start: time.Now().Add(5 * time.Millisecond), rate: rate}
	for sent := 0; sent < count; {
		due := pc.dueBy(time.Now(), count)
		for ; sent < due; sent++ {
			slot := sent
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: d.pl.get(first + slot), Partition: int32(slot % parts)},
				func(r *kgo.Record, err error) {
					lat[slot] = time.Since(pc.due(slot))
					fe.set(err)
					d.pl.put(r.Value)
					wg.Done()
				})
		}
		if sent < count {
			if err := sleepCtx(ctx, time.Until(pc.due(sent))); err != nil {
				break
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	wg.Wait()
	if err := fe.get(); err != nil {
		return nil, err
	}
	return lat, ctx.Err()
}

func (d *kafkaDriver) createWide(ctx context.Context, n int) error {
	return d.createTopic(ctx, wideTopic, n)
}

// writeWide writes one record (acks=all) to each partition of the wide
// topic, so every partition's log has data on disk.
func (d *kafkaDriver) writeWide(ctx context.Context, n int) error {
	cl, err := kgo.NewClient(d.producerOpts(kgo.DefaultProduceTopic(wideTopic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for p := range recs {
		recs[p] = &kgo.Record{Value: d.pl.get(p), Partition: int32(p)}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return err
	}
	if len(res) != n {
		return errors.New("wide: not every record was produced")
	}
	return nil
}

// kgoCodec is the franz-go codec of a --compression name (validated).
func kgoCodec(name string) kgo.CompressionCodec {
	switch name {
	case codecGzip:
		return kgo.GzipCompression()
	case codecSnappy:
		return kgo.SnappyCompression()
	case codecLZ4:
		return kgo.Lz4Compression()
	case codecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}
