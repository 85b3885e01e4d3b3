package mirror

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The at-least-once copy is a pipeline: the poll loop produces every
// fetched record at once (the client batches them and keeps several
// requests in flight), and a partition's batch is synced only when all its
// records are acknowledged (acks=all, idempotent producer) and all earlier
// batches of the partition are synced, so a sync never claims a record that
// is not on the target. Syncs are written by one goroutine, in order.
//
// A stop without a clean shutdown (kill -9) loses at most the syncs of the
// batches in flight: the records after the last stored sync are on the
// target or not; at restart startPartitions compares those that are with
// the source and skips them, so none is copied twice unless the comparison
// fails (something else wrote to the target topic).

// shutdownGrace bounds how long a stopping mirror waits for the records
// and syncs in flight.
const shutdownGrace = 30 * time.Second

func (m *Mirror) loopALO(ctx context.Context) error {
	// Records of a fetched batch are produced even while the mirror stops
	// (so that the batch gets synced), up to shutdownGrace after the stop.
	prodCtx, prodCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer prodCancel()
	go func() {
		<-ctx.Done()
		select {
		case <-time.After(shutdownGrace):
		case <-prodCtx.Done():
		}
		prodCancel()
	}()
	writerDone := make(chan error, 1)
	go func() { writerDone <- m.syncWriter(prodCtx) }()

	perr := m.pollALO(ctx, prodCtx)
	// Wait for every produced record; their promises queue the syncs.
	ferr := m.tgt.Flush(prodCtx)
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	m.signal()
	werr := <-writerDone
	if werr == nil {
		werr = m.tgt.Flush(prodCtx) // the syncs
	}
	if f := m.failure(); f != nil {
		return f
	}
	for _, err := range []error{perr, ferr, werr} {
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

func (m *Mirror) pollALO(ctx, prodCtx context.Context) error {
	rescanAt := time.Now().Add(m.cfg.RescanInterval)
	for ctx.Err() == nil {
		fs := m.poll(ctx, rescanAt)
		if err := m.pollErrors(fs); err != nil {
			return err
		}
		for _, b := range m.fetchedBatches(fs) {
			m.mu.Lock()
			b.ps.queue = append(b.ps.queue, b)
			if b.records == 0 {
				b.done = true
				m.advance(b.ps)
			}
			m.mu.Unlock()
			if b.records == 0 {
				continue
			}
			promise := func(r *kgo.Record, err error) { m.acked(b, r, err) }
			for _, r := range b.recs {
				if !r.Attrs.IsControl() {
					m.tgt.Produce(prodCtx, b.ps.copyOf(r), promise)
				}
			}
		}
		if m.cfg.RescanInterval > 0 && time.Now().After(rescanAt) {
			offs, err := m.rescan(ctx)
			if err != nil {
				return fmt.Errorf("rescan source topics: %w", err)
			}
			if len(offs) > 0 {
				m.src.AddConsumePartitions(offs)
			}
			rescanAt = time.Now().Add(m.cfg.RescanInterval)
		}
	}
	return nil
}

// acked is the promise of every copied record of b.
func (m *Mirror) acked(b *batch, r *kgo.Record, err error) {
	if err != nil {
		m.fail(fmt.Errorf("copy to %s/%d: %w", r.Topic, r.Partition, err))
		return
	}
	for {
		cur := b.maxOff.Load()
		if r.Offset <= cur || b.maxOff.CompareAndSwap(cur, r.Offset) {
			break
		}
	}
	if b.pending.Add(-1) != 0 {
		return
	}
	m.met.records.WithLabelValues(b.ps.topic).Add(float64(b.records))
	m.met.bytes.WithLabelValues(b.ps.topic).Add(float64(b.bytes))
	m.mu.Lock()
	b.done = true
	m.advance(b.ps)
	m.mu.Unlock()
}

// advance queues the syncs of the acknowledged batches at the head of
// ps's queue. m.mu must be held.
func (m *Mirror) advance(ps *partState) {
	now := time.Now().UnixMilli()
	queued := false
	for len(ps.queue) > 0 && ps.queue[0].done {
		b := ps.queue[0]
		ps.queue[0] = nil
		ps.queue = ps.queue[1:]
		if b.records > 0 {
			ps.tgtNext = b.maxOff.Load() + 1
			ps.lastTS = b.lastTS
		}
		s := offsetSync{Version: syncVersion, Topic: ps.topic, Partition: ps.partition, Target: ps.target,
			Source: b.srcNext, TargetOffset: ps.tgtNext, WrittenMs: now, LastTimestampMs: ps.lastTS}
		m.syncQ = append(m.syncQ, s)
		queued = true
	}
	if queued {
		m.signal()
	}
}

func (m *Mirror) signal() {
	select {
	case m.syncSig <- struct{}{}:
	default:
	}
}

// syncWriter writes the queued syncs in order until the mirror is closing
// and the queue is empty.
func (m *Mirror) syncWriter(ctx context.Context) error {
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			m.fail(fmt.Errorf("write offset sync to %s: %w", r.Topic, err))
		} else if r.Topic == m.cfg.syncsTopic() {
			m.met.syncs.Inc()
		}
	}
	for {
		m.mu.Lock()
		q, closing := m.syncQ, m.closing
		m.syncQ = nil
		m.mu.Unlock()
		last := lastPerPartition(q)
		for i, s := range q {
			// Progress: only the partition's last sync of this drain
			// (the topic is compacted). Progress and offset-syncs are
			// distinct partitions and may land in either order: a
			// restart from an older progress finds the copies past it
			// on the target and skips them.
			if last[tp{s.Topic, s.Partition}] == i {
				m.tgt.Produce(ctx, s.record(m.cfg.progressTopic()), promise)
			}
			m.tgt.Produce(ctx, s.record(m.cfg.syncsTopic()), promise)
		}
		if len(q) > 0 {
			continue
		}
		if closing {
			return nil
		}
		select {
		case <-m.syncSig:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fail records the first error of the run and stops it.
func (m *Mirror) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		m.failed = err
		m.cancel()
	}
}

func (m *Mirror) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

// lastPerPartition maps each partition of syncs to the index of its last.
func lastPerPartition(syncs []offsetSync) map[tp]int {
	last := make(map[tp]int, len(syncs))
	for i, s := range syncs {
		last[tp{s.Topic, s.Partition}] = i
	}
	return last
}
