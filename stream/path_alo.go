package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// At-least-once runtime.
//
// A round's store writes go to the local database as each task's batch ends
// (taskDone). Every CommitInterval the loop commits: it flushes the producer
// (every output, changelog, repartition and dead-letter record so far is
// acknowledged, or the App fails), then commits each task's input offset (one
// past its last handled record), then writes the checkpoints that are due. A
// crash between any two steps replays input from the last committed offsets:
// duplicates, never loss. Rebalances wait only for the round in progress; a
// revoked task commits first (App.onRevoked).

// atLeastOnce is the at-least-once guaranteePath.
type atLeastOnce struct {
	a          *App
	lastCommit time.Time // loop goroutine only
}

func (p *atLeastOnce) connect(_ context.Context, opts []kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	p.lastCommit = p.a.cfg.clock.Now()
	return cl, nil
}

func (p *atLeastOnce) pollWait() time.Duration { return p.a.cfg.commitInterval }

func (p *atLeastOnce) skipRound() (bool, error) { return false, nil }

func (p *atLeastOnce) beginRound([]batch) error { return nil }

// taskDone writes the task's round to its store (its cache): nothing waits
// for a transaction. Its outputs may be visible before the next commit, so
// from here its queries wait for the flush after that commit.
func (p *atLeastOnce) taskDone(t *task) error {
	if err := t.flushState(); err != nil {
		return err
	}
	t.noteCached()
	return nil
}

// endRound commits every task when the commit interval has passed, then
// serves the queries waiting for a flush: right after a commit the store
// caches hold only state whose outputs and changelog are acknowledged.
func (p *atLeastOnce) endRound(ctx context.Context, _ bool, err error) error {
	a := p.a
	now := a.cfg.clock.Now()
	if err != nil || now.Sub(p.lastCommit) < a.cfg.commitInterval {
		return err
	}
	p.lastCommit = now
	if err := a.commit(ctx, a.allTasks(), false); err != nil {
		if ctx.Err() == nil {
			return err
		}
		return nil
	}
	if a.flushRequests.Load() > 0 {
		return a.serveFlushes()
	}
	return nil
}

func (p *atLeastOnce) holdsRebalance() bool { return false }

// commitOffsets commits each task's next input offsets, where they moved. A
// failed commit is not fatal: the offsets stay uncommitted and whoever owns
// the partitions next replays the records.
func (p *atLeastOnce) commitOffsets(ctx context.Context, tasks []*task) {
	a := p.a
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, t := range tasks {
		for topic, next := range t.next {
			if c, ok := t.committed[topic]; ok && next.Offset <= c {
				continue
			}
			if offsets[topic] == nil {
				offsets[topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[topic][t.id.partition] = next
		}
	}
	// Each partition's commit carries its task's watermark state (metadata);
	// a partition whose watermark alone moved is committed at its offset.
	wc := prepareWatermarkCommit(tasks)
	wc.addTo(offsets)
	var commitErr error
	if len(offsets) > 0 {
		a.cl.CommitOffsetsSync(wc.offsetCommitContext(ctx), offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				commitErr = err
				return
			}
			commitErr = commitResponseErr(resp)
		})
		a.metrics.commits.Inc()
	}
	if commitErr != nil {
		a.cfg.logger.Warn("offset commit failed", "err", commitErr)
		return
	}
	if len(offsets) > 0 {
		wc.committed()
	}
	for _, t := range tasks {
		for topic, next := range t.next {
			t.committed[topic] = next.Offset
		}
		t.tablesCovered(t.committed)
		t.notifyCommitted()
	}
}

func (p *atLeastOnce) revoked() {}

func (p *atLeastOnce) stop(bool) error { return nil }

func (p *atLeastOnce) rejoin(error) bool { return false }

// readOpts: a restore or standby reads every record below the high
// watermark (nothing the App writes is transactional).
func (p *atLeastOnce) readOpts() []kgo.Opt { return nil }

func (p *atLeastOnce) changelogEnds(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.ListedOffsets, error) {
	return adm.ListEndOffsets(ctx, topics...)
}

func (p *atLeastOnce) fetchedEnd(fp kgo.FetchTopicPartition) int64 { return fp.HighWatermark }

func (p *atLeastOnce) mechanism() string { return mechAtLeastOnce }

func (p *atLeastOnce) stateMechanism() string {
	return mechAtLeastOnce + "; the store may count a replayed record twice (state >= true state)"
}
