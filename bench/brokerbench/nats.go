package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const natsStream = "brokerbench"

// natsDriver runs the workload against NATS JetStream: one file-backed
// stream with Config.Partitions subjects (brokerbench.0 ...), standing in for
// a topic's partitions. Records are published asynchronously with at most
// Config.InFlight unacknowledged publishes (a publish is acked after the
// server has stored — with sync_always, synced — the message) and read back
// with an ordered consumer.
type natsDriver struct {
	cfg      Config
	nc       *nats.Conn
	subjects []string
	pl       *payloads
}

func newNATSDriver(url string, cfg Config) (*natsDriver, error) {
	nc, err := nats.Connect(url, nats.Name("brokerbench"))
	if err != nil {
		return nil, err
	}
	subj := make([]string, cfg.Partitions)
	for i := range subj {
		subj[i] = natsStream + "." + strconv.Itoa(i)
	}
	return &natsDriver{cfg: cfg, nc: nc, subjects: subj, pl: newPayloads(cfg.RecordSize, cfg.InFlight*2)}, nil
}

func (d *natsDriver) close() { d.nc.Close() }

func (d *natsDriver) setup(ctx context.Context) error {
	js, err := jetstream.New(d.nc)
	if err != nil {
		return err
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     natsStream,
		Subjects: []string{natsStream + ".*"},
		Storage:  jetstream.FileStorage,
		Replicas: 1,
	})
	return err
}

// publish sends one message asynchronously, waiting while the in-flight
// bound is reached.
func (d *natsDriver) publish(ctx context.Context, js jetstream.JetStream, subj string, data []byte) error {
	for {
		_, err := js.PublishAsync(subj, data)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// waitComplete waits until every async publish of js is acked or failed.
func waitComplete(ctx context.Context, js jetstream.JetStream) error {
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d publishes unacknowledged: %w", js.PublishAsyncPending(), ctx.Err())
	}
}

func (d *natsDriver) produce(ctx context.Context, n int) error {
	var fe firstErr
	js, err := jetstream.New(d.nc,
		jetstream.WithPublishAsyncMaxPending(d.cfg.InFlight),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
			d.pl.put(m.Data)
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			fe.set(err)
		}),
	)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := d.publish(ctx, js, d.subjects[i%len(d.subjects)], d.pl.get(i)); err != nil {
			return err
		}
	}
	if err := waitComplete(ctx, js); err != nil {
		return err
	}
	return fe.get()
}

func (d *natsDriver) consume(ctx context.Context, n int) (readStats, error) {
	js, err := jetstream.New(d.nc)
	if err != nil {
		return readStats{}, err
	}
	cons, err := js.OrderedConsumer(ctx, natsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return readStats{}, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return readStats{}, err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	tr := newReadTracker(n)
	for !tr.complete() {
		msg, err := it.Next()
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				err = cerr
			}
			return tr.st, fmt.Errorf("%d distinct of %d records read: %w", tr.st.Distinct, n, err)
		}
		tr.add(msg.Data())
	}
	return tr.st, nil
}

func (d *natsDriver) fixedRate(ctx context.Context, first, count, rate int) ([]time.Duration, error) {
	// Warm up the publish path (and the reply subscription) before the
	// clock starts.
	if err := d.produceRange(ctx, first+count, len(d.subjects)); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	lat := make([]time.Duration, count)
	var (
		wg sync.WaitGroup
		fe firstErr
	)
	pc := pacer{start: time.Now().Add(5 * time.Millisecond), rate: rate}
	// done records the ack (or failure) of one message; the slot comes from
	// the index carried in the message itself.
	done := func(m *nats.Msg, err error) {
		i, ok := recordIndex(m.Data)
		slot := i - first
		if !ok || slot < 0 || slot >= count {
			fe.set(fmt.Errorf("ack for unexpected message %d", i))
			return
		}
		lat[slot] = time.Since(pc.due(slot))
		fe.set(err)
		d.pl.put(m.Data)
		wg.Done()
	}
	js, err := jetstream.New(d.nc,
		jetstream.WithPublishAsyncMaxPending(d.cfg.InFlight),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { done(m, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { done(m, err) }),
	)
	if err != nil {
		return nil, err
	}
	var perr error
	for sent := 0; sent < count && perr == nil; {
		due := pc.dueBy(time.Now(), count)
		for ; sent < due; sent++ {
			wg.Add(1)
			if perr = d.publish(ctx, js, d.subjects[sent%len(d.subjects)], d.pl.get(first+sent)); perr != nil {
				wg.Done()
				break
			}
		}
		if sent < count && perr == nil {
			perr = sleepCtx(ctx, time.Until(pc.due(sent)))
		}
	}
	if err := waitComplete(ctx, js); err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	wg.Wait()
	if err := fe.get(); err != nil {
		return nil, err
	}
	return lat, nil
}

// produceRange publishes count records with indices from first and waits
// for their acks.
func (d *natsDriver) produceRange(ctx context.Context, first, count int) error {
	js, err := jetstream.New(d.nc)
	if err != nil {
		return err
	}
	for i := first; i < first+count; i++ {
		if _, err := js.Publish(ctx, d.subjects[i%len(d.subjects)], d.pl.get(i)); err != nil {
			return err
		}
	}
	return nil
}
