package stream

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// guaranteePath is everything an App does differently under one delivery
// guarantee: the at-least-once path (path_alo.go) or the exactly-once path
// (path_eos.go). NewApp picks one; the rest of the runtime calls it at the
// phases of the processing loop (app_loop.go) and never asks which guarantee
// it runs:
//
//	connect        a group session starts: the group client (and, exactly
//	               once, the transactional producer; it fences the previous
//	               incarnation)
//	pollWait       how long the next poll may wait
//	skipRound      after a poll, before its round: drop the poll's records?
//	beginRound     the round's batches are about to run on the workers
//	taskDone       one task's batch ended (on that task's worker)
//	endRound       the round ended: commit (or end the transaction) if due
//	holdsRebalance a waiting rebalance must wait (a transaction is open)
//	commitOffsets  tasks are handed over or shut down: their input offsets
//	revoked        the group revoked or lost partitions
//	stop           the loop ends: complete (or abort) what is open
//	rejoin         Run starts a new session after this error
//
// and how the App reads back what it wrote (restores and standbys):
// readOpts, changelogEnds, fetchedEnd; and how App.Describe states it:
// mechanism, stateMechanism.
//
// Every method but the reads and the descriptions runs on the loop
// goroutine, or in the group callbacks that run while the loop waits for a
// poll (rebalances are blocked from a poll until allowRebalance).
type guaranteePath interface {
	connect(ctx context.Context, opts []kgo.Opt) (*kgo.Client, error)
	pollWait() time.Duration
	skipRound() (skip bool, err error)
	beginRound(batches []batch) error
	taskDone(t *task) error
	endRound(ctx context.Context, complete bool, roundErr error) error
	holdsRebalance() bool
	// commitOffsets makes the input progress of tasks durable once every
	// record they produced is acknowledged (App.commit flushed). Under
	// ExactlyOnce it is called only at hand-over and shutdown, with a
	// forced checkpoint.
	commitOffsets(ctx context.Context, tasks []*task)
	revoked()
	stop(commit bool) error
	rejoin(err error) bool

	readOpts() []kgo.Opt
	changelogEnds(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.ListedOffsets, error)
	fetchedEnd(p kgo.FetchTopicPartition) int64
	mechanism() string
	stateMechanism() string
}

func newGuaranteePath(a *App) guaranteePath {
	if a.cfg.guarantee == ExactlyOnce {
		return &exactlyOnce{a: a}
	}
	return &atLeastOnce{a: a}
}
