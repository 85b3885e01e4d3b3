package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// loop runs processing rounds until ctx is done or a fatal error:
//
//  1. poll (rebalances are blocked from here until allowRebalance);
//  2. skipRound: the guarantee may drop this poll's records;
//  3. round: make sure the polled partitions' tasks exist and are restored,
//     process each task's records on the workers;
//  4. endRound: commit (or end the transaction) if due;
//  5. allow a waiting rebalance, unless the guarantee holds it.
func (a *App) loop(ctx context.Context) error {
	for {
		if err := a.fatalErr(); err != nil {
			a.path.stop(false)
			return err
		}
		if ctx.Err() != nil {
			// Every round of an open transaction was complete.
			if err := a.path.stop(true); err != nil {
				a.cfg.logger.Warn("final transaction failed; the next owner replays", "err", err)
			}
			return nil
		}
		fetches := a.poll(ctx)
		if fetches.IsClientClosed() {
			return errors.New("client closed")
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				a.cfg.logger.Warn("fetch error", "topic", topic, "partition", p, "err", err)
			}
		})
		if skip, err := a.path.skipRound(); skip {
			a.allowRebalance()
			if err != nil {
				return err
			}
			continue
		}
		complete, err := a.round(ctx, fetches)
		err = a.path.endRound(ctx, complete, err)
		if !a.path.holdsRebalance() {
			a.allowRebalance()
		}
		if ferr := a.fatalErr(); ferr != nil {
			a.path.stop(false)
			return ferr
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// rebalanceSignal tells the loop that a group rebalance waits for it: the
// poll in progress is cut short, and under ExactlyOnce the open transaction
// ends after the current round. It also carries a query's wake-up
// (wakeForFlush): the poll in progress, or else the next one, is cut short
// once, so that the loop reaches the end of its round, where it serves
// flushes, without waiting out the poll.
type rebalanceSignal struct {
	// waiting is set when a rebalance waits for the loop to allow it;
	// cleared when the loop allows rebalances.
	waiting atomic.Bool

	mu         sync.Mutex
	pollCancel context.CancelFunc // of the poll in progress, if any
	wake       bool               // cut the next poll short (a wake-up came between polls)
}

// poll polls the client for at most the guarantee's pollWait, returning
// early when a rebalance waits or a query asked for a flush.
func (a *App) poll(ctx context.Context) kgo.Fetches {
	wait := a.path.pollWait()
	if a.bounded != nil && a.bounded.quick {
		wait = boundedPollWait // a bounded run past its input: ticks, repartitions
	}
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	s := &a.rebalance
	s.mu.Lock()
	s.pollCancel = cancel
	woken := s.wake
	s.wake = false
	s.mu.Unlock()
	if woken || s.waiting.Load() || a.closesPending() {
		// A burst of window closes left some for the next round: it
		// runs now, with what the client has buffered.
		cancel()
	}
	fetches := a.cl.PollRecords(pctx, a.cfg.maxPollRecords)
	s.mu.Lock()
	s.pollCancel = nil
	s.mu.Unlock()
	return fetches
}

// wakeForFlush cuts the loop's poll short once (the one in progress, or the
// next): a query waits for the loop to flush a task's store cache
// (task.awaitFlush), which it does at the end of a round, and an idle loop
// would otherwise sit in its poll for up to a commit interval. Any goroutine.
func (a *App) wakeForFlush() {
	s := &a.rebalance
	s.mu.Lock()
	if s.pollCancel != nil {
		s.pollCancel()
	} else {
		s.wake = true
	}
	s.mu.Unlock()
}

// onRebalanceBlocked is the client's OnPartitionsCallbackBlocked hook: a
// rebalance waits for AllowRebalance.
func (a *App) onRebalanceBlocked(context.Context, *kgo.Client) {
	s := &a.rebalance
	s.waiting.Store(true)
	s.mu.Lock()
	if s.pollCancel != nil {
		s.pollCancel()
	}
	s.mu.Unlock()
}

// allowRebalance lets a waiting rebalance proceed. Never call it while the
// guarantee holds rebalances (an open transaction).
func (a *App) allowRebalance() {
	a.rebalance.waiting.Store(false)
	a.cl.AllowRebalance()
}

// serveFlushes flushes the store caches queries wait for (see
// task.awaitFlush). Loop goroutine, between transactions.
func (a *App) serveFlushes() error {
	for _, t := range a.allTasks() {
		if err := t.flushIfWanted(); err != nil {
			return err
		}
	}
	return nil
}

// batch is one task's records of a round, in processing order.
type batch struct {
	t    *task
	recs []*kgo.Record
}

// round processes the polled records: each task's records in order on one
// worker goroutine, tasks in parallel. It reports whether every polled
// record was handled (not so when ctx ended or a fatal error stopped a task).
func (a *App) round(ctx context.Context, fetches kgo.Fetches) (complete bool, err error) {
	polled, err := a.collect(fetches)
	if err != nil {
		return false, err
	}
	if err := a.ensureTasks(ctx, polled); err != nil {
		return false, err
	}
	batches := a.batches(polled)
	if len(batches) == 0 {
		return true, nil
	}
	if err := a.path.beginRound(batches); err != nil {
		return false, err
	}
	return a.runBatches(ctx, batches), a.fatalErr()
}

// polledTask is what a poll returned for one task: its partitions' records
// (each in offset order) and their lag behind the high watermarks.
type polledTask struct {
	parts [][]*kgo.Record
	lag   int64
}

// collect groups the polled records by task.
func (a *App) collect(fetches kgo.Fetches) (map[taskID]*polledTask, error) {
	polled := map[taskID]*polledTask{}
	var err error
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 || err != nil {
			return
		}
		id, ok := a.taskOf(p.Topic, p.Partition)
		if !ok {
			err = fmt.Errorf("polled partition %s-%d of a topic that is no source", p.Topic, p.Partition)
			return
		}
		pt := polled[id]
		if pt == nil {
			pt = &polledTask{}
			polled[id] = pt
		}
		pt.parts = append(pt.parts, p.Records)
		pt.lag += max(0, p.HighWatermark-(p.Records[len(p.Records)-1].Offset+1))
	})
	return polled, err
}

// ensureTasks creates and restores the tasks assigned since the last round
// and those polled.
func (a *App) ensureTasks(ctx context.Context, polled map[taskID]*polledTask) error {
	var ids []taskID
	a.mu.Lock()
	for id := range a.assigned {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for id := range polled {
		ids = append(ids, id) // maybe assigned too: ensureTask is idempotent
	}
	for _, id := range ids {
		if _, err := a.ensureTask(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// batches orders each polled task's records for processing (by timestamp
// across its partitions, see mergeByTimestamp), and adds an empty batch (a
// tick) for every other task with time-driven operators (timed.go).
func (a *App) batches(polled map[taskID]*polledTask) []batch {
	batches := make([]batch, 0, len(polled))
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, pt := range polled {
		t := a.tasks[id]
		batches = append(batches, batch{t: t, recs: mergeByTimestamp(pt.parts, a.tableFirst)})
		t.m.lag.Set(float64(pt.lag))
	}
	// A tick for each task with time-driven operators that polled
	// nothing: an idle input's timeout or the processing clock may close
	// its windows or fire its timers.
	for id, t := range a.tasks {
		if _, ok := polled[id]; !ok && len(t.timed) > 0 {
			batches = append(batches, batch{t: t})
		}
	}
	return batches
}

// runBatches runs each batch on a worker (at most cfg.workers at once) and
// reports whether every record was handled.
func (a *App) runBatches(ctx context.Context, batches []batch) (complete bool) {
	var incomplete atomic.Bool
	sem := make(chan struct{}, a.cfg.workers)
	var wg sync.WaitGroup
	for _, b := range batches {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if !a.runBatch(ctx, b) {
				incomplete.Store(true)
			}
		}()
	}
	wg.Wait()
	return !incomplete.Load()
}

// runBatch handles a task's records in order, expires what its stream time
// passed, and ends the task's part of the round (taskDone). It reports
// whether every record was handled; a failure is recorded with fail.
func (a *App) runBatch(ctx context.Context, b batch) (complete bool) {
	complete = true
	for _, r := range b.recs {
		if a.failed.Load() {
			// Stop producing once any output failed: nothing from
			// here on can be committed anyway.
			complete = false
			break
		}
		if n, ok := b.t.next[r.Topic]; ok && r.Offset < n.Offset {
			// Below what the task has handled: the client moved its
			// position back without the task asking (it resets a
			// partition it believes lost records, e.g. after a leader
			// epoch answer it cannot reconcile). The task's state,
			// outputs and open transaction already hold this record;
			// handling it again would count it twice, also under
			// ExactlyOnce. (A rewind the task asks for — an aborted
			// transaction — restores next first, see abortRound.)
			b.t.m.redelivered.Inc()
			continue
		}
		if r.Attrs.IsControl() {
			// A transaction marker: nothing to process, but the
			// committed position moves past it.
			b.t.next[r.Topic] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			continue
		}
		if err := b.t.handle(ctx, r); err != nil {
			if ctx.Err() == nil {
				a.fail(err)
			}
			complete = false
			break
		}
	}
	if err := b.t.endBatch(); err != nil {
		a.fail(err)
		return false
	}
	if err := a.path.taskDone(b.t); err != nil {
		a.fail(err)
	}
	return complete
}

// ensureTask returns the task for id, creating and restoring it first if
// needed.
func (a *App) ensureTask(ctx context.Context, id taskID) (*task, error) {
	a.mu.Lock()
	t, ok := a.tasks[id]
	a.mu.Unlock()
	if ok {
		return t, nil
	}
	if id.sub < 0 || id.sub >= len(a.subs) {
		return nil, fmt.Errorf("task %s of an unknown sub-topology", id)
	}
	a.standbys.claim(id) // its standby copy, if any, closes the directory first
	t, err := a.newTask(id)
	if err != nil {
		a.standbys.unclaim(id)
		return nil, err
	}
	t.tablesAtCommit = true // the commits flush its tables (tableupdates.go)
	for _, s := range t.stores {
		if n, ok := a.partitions[s.changelog]; ok && id.partition >= n {
			t.close()
			a.standbys.unclaim(id)
			return nil, fmt.Errorf("%w: task %s: changelog %s has %d partitions (the input grew since it was created; "+
				"reset the application to re-create its internal topics)", ErrPartitionMismatch, id, s.changelog, n)
		}
	}
	if err := t.restore(ctx); err != nil {
		t.close()
		a.standbys.unclaim(id)
		return nil, err
	}
	if err := t.resumeCommittedWatermark(ctx); err != nil {
		t.close()
		a.standbys.unclaim(id)
		return nil, err
	}
	a.taskQueryable(t)
	a.mu.Lock()
	a.tasks[id] = t
	delete(a.assigned, id)
	a.metrics.tasksOpened.Inc()
	a.metrics.tasks.Set(float64(len(a.tasks)))
	a.mu.Unlock()
	return t, nil
}

func (a *App) allTasks() []*task {
	a.mu.Lock()
	defer a.mu.Unlock()
	ts := make([]*task, 0, len(a.tasks))
	for _, t := range a.tasks {
		ts = append(ts, t)
	}
	return ts
}
