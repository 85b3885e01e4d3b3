package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The exactly-once copy works in rounds: one fetch, then one transaction
// on the target holding the round's copies and the syncs of every batch
// (progress and offset-syncs). A crash before the commit aborts the
// transaction (the next instance's producer initialisation fences it), and
// the restart resumes from the last committed progress: a read_committed
// reader of the target sees every source record exactly once.

// roundTimeout bounds one round (produce, flush, commit) once started,
// even while the mirror stops.
const roundTimeout = 60 * time.Second

func (m *Mirror) loopEOS(ctx context.Context) error {
	rescanAt := time.Now().Add(m.cfg.RescanInterval)
	for ctx.Err() == nil {
		fs := m.poll(ctx, rescanAt)
		if err := m.pollErrors(fs); err != nil {
			return err
		}
		if batches := m.fetchedBatches(fs); len(batches) > 0 {
			// Fill the round with what is already buffered: fewer,
			// larger transactions.
			for n := fetchedRecords(batches); n < m.cfg.MaxPollRecords; {
				more := m.src.PollRecords(nil, m.cfg.MaxPollRecords-n) //nolint:staticcheck // nil: only what is buffered
				if more.NumRecords() == 0 {
					break
				}
				if err := m.pollErrors(more); err != nil {
					return err
				}
				bs := m.fetchedBatches(more)
				batches = append(batches, bs...)
				n += fetchedRecords(bs)
			}
			if err := m.commitRound(ctx, batches); err != nil {
				return err
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

func (m *Mirror) commitRound(parent context.Context, batches []*batch) (err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), roundTimeout)
	defer cancel()
	if err := m.tgt.BeginTransaction(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = m.tgt.EndTransaction(ctx, kgo.TryAbort)
		}
	}()
	var mu sync.Mutex
	var perr error
	for _, b := range batches {
		promise := func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				perr = errors.Join(perr, err)
				mu.Unlock()
				return
			}
			for {
				cur := b.maxOff.Load()
				if r.Offset <= cur || b.maxOff.CompareAndSwap(cur, r.Offset) {
					break
				}
			}
		}
		for _, r := range b.recs {
			if !r.Attrs.IsControl() {
				m.tgt.Produce(ctx, b.ps.copyOf(r), promise)
			}
		}
	}
	if err := m.tgt.Flush(ctx); err != nil {
		return fmt.Errorf("flush round: %w", err)
	}
	if perr != nil {
		return fmt.Errorf("copy round: %w", perr)
	}
	now := time.Now().UnixMilli()
	type next struct{ tgt, ts int64 }
	nexts := make([]next, len(batches))
	// A partition may have several batches in a round: each starts
	// where the one before it in the round ended.
	running := map[*partState]next{}
	var recs []*kgo.Record
	var syncs []offsetSync
	for i, b := range batches {
		prev, ok := running[b.ps]
		if !ok {
			prev = next{b.ps.tgtNext, b.ps.lastTS}
		}
		nexts[i] = prev
		if b.records > 0 {
			nexts[i] = next{b.maxOff.Load() + 1, b.lastTS}
		}
		running[b.ps] = nexts[i]
		s := offsetSync{Version: syncVersion, Topic: b.ps.topic, Partition: b.ps.partition, Target: b.ps.target,
			Source: b.srcNext, TargetOffset: nexts[i].tgt, WrittenMs: now, LastTimestampMs: nexts[i].ts}
		syncs = append(syncs, s)
	}
	last := lastPerPartition(syncs)
	for i, s := range syncs {
		if last[tp{s.Topic, s.Partition}] == i {
			recs = append(recs, s.record(m.cfg.progressTopic()))
		}
		recs = append(recs, s.record(m.cfg.syncsTopic()))
	}
	if err := m.tgt.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("write offset syncs: %w", err)
	}
	if err := m.tgt.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit round: %w", err)
	}
	for i, b := range batches {
		b.ps.tgtNext, b.ps.lastTS = nexts[i].tgt, nexts[i].ts
		m.met.records.WithLabelValues(b.ps.topic).Add(float64(b.records))
		m.met.bytes.WithLabelValues(b.ps.topic).Add(float64(b.bytes))
	}
	m.met.syncs.Add(float64(len(batches)))
	return nil
}

func fetchedRecords(bs []*batch) int {
	n := 0
	for _, b := range bs {
		n += len(b.recs)
	}
	return n
}
