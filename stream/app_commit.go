package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commit makes the progress of tasks durable, in this order:
//
//  0. the tasks' tables flush their collapsed updates (tableupdates.go;
//     none are held under ExactlyOnce between transactions);
//  1. flush: every record produced so far is acknowledged (or failed — a
//     failure is fatal and nothing is committed);
//  2. commit each task's input offset (one past its last handled record):
//     guaranteePath.commitOffsets (under ExactlyOnce each transaction
//     committed them already);
//  3. write each task's local checkpoint (synced) naming the changelog
//     offsets its stores cover: every task's if force (hand-over,
//     shutdown), else those due (task.checkpointDue).
//
// A crash between any two steps replays input (at-least-once); none loses it.
func (a *App) commit(ctx context.Context, tasks []*task, force bool) error {
	if a.killed() {
		return nil
	}
	if err := flushTablesForCommit(tasks, a.cfg.guarantee != ExactlyOnce); err != nil {
		a.fail(err) // the tables' updates are incomplete: commit nothing from here on
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if err := a.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if err := a.fatalErr(); err != nil {
		return err
	}
	if a.killed() {
		return nil
	}
	a.path.commitOffsets(ctx, tasks)
	return a.checkpoint(tasks, force)
}

// checkpoint writes the tasks' local checkpoints: every task's if force
// (hand-over, shutdown), else those due (task.checkpointDue: after a
// periodic commit or an ExactlyOnce transaction). Call only when every
// record produced so far is acknowledged (and under ExactlyOnce, committed).
func (a *App) checkpoint(tasks []*task, force bool) error {
	wrote := false
	for _, t := range tasks {
		if !force && !t.checkpointDue() {
			t.noteFlushed()
			continue
		}
		if err := t.checkpoint(); err != nil {
			return err
		}
		t.noteFlushed() // a checkpoint written flushed the cache
		wrote = true
	}
	if !wrote {
		return nil
	}
	// Sampled when something was written: Pebble's metrics are not free.
	var size uint64
	for _, t := range tasks {
		if t.db != nil {
			size += t.db.DiskSize()
		}
	}
	a.metrics.storeBytes.Set(float64(size))
	return nil
}

func (a *App) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for topic, ps := range assigned {
		for _, p := range ps {
			id, ok := a.taskOf(topic, p)
			if !ok {
				a.cfg.logger.Warn("assigned a partition of a topic that is no source", "topic", topic, "partition", p)
				continue
			}
			if _, running := a.tasks[id]; !running {
				a.assigned[id] = true
			}
		}
	}
	a.cfg.logger.Info("partitions assigned", "partitions", assigned)
	a.query.view.invalidate()
}

// onRevoked commits the progress of the revoked tasks and closes them. With
// the cooperative protocol only the tasks that move are revoked; the others
// keep running untouched.
func (a *App) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) > 0 {
		a.path.revoked()
	}
	tasks := a.takeTasks(revoked)
	if len(tasks) > 0 && a.fatalErr() == nil && !a.killed() {
		if err := a.commit(ctx, tasks, true); err != nil {
			a.cfg.logger.Warn("commit on revoke failed; the new owner replays", "err", err)
		}
	}
	a.closeTasks(tasks)
	a.query.view.invalidate()
	if len(revoked) > 0 {
		a.cfg.logger.Info("partitions revoked", "partitions", revoked)
	}
}

// onLost closes the lost tasks without committing: another member may own
// them already.
func (a *App) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	a.path.revoked()
	a.closeTasks(a.takeTasks(lost))
	a.query.view.invalidate()
	a.cfg.logger.Warn("partitions lost", "partitions", lost)
}

func (a *App) takeTasks(tps map[string][]int32) []*task {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*task
	// A task goes when any of its partitions goes (the task balancer
	// moves a task's partitions together).
	for topic, ps := range tps {
		for _, p := range ps {
			id, ok := a.taskOf(topic, p)
			if !ok {
				continue
			}
			delete(a.assigned, id)
			if t, ok := a.tasks[id]; ok {
				out = append(out, t)
				delete(a.tasks, id)
			}
		}
	}
	a.metrics.tasks.Set(float64(len(a.tasks)))
	return out
}

func (a *App) closeTasks(ts []*task) {
	for _, t := range ts {
		a.metrics.tasksClosed.Inc()
		a.taskUnqueryable(t)
		if err := t.close(); err != nil {
			a.cfg.logger.Warn("close task", "task", t.id.String(), "err", err)
		}
		a.standbys.unclaim(t.id)
	}
}

// shutdown flushes and commits (unless the loop failed), leaves the group and
// closes every task.
func (a *App) shutdown(loopErr error) {
	if loopErr == nil && !a.killed() {
		if err := a.commit(context.Background(), a.allTasks(), true); err != nil {
			a.cfg.logger.Warn("final commit failed; the next owner replays", "err", err)
		}
	}
	if loopErr != nil {
		a.fail(loopErr) // keep the revoke callback from committing
	}
	a.cl.AllowRebalance()
	a.cl.Close()
	a.mu.Lock()
	rest := make([]*task, 0, len(a.tasks))
	for id, t := range a.tasks {
		rest = append(rest, t)
		delete(a.tasks, id)
	}
	clear(a.assigned)
	a.metrics.tasks.Set(0)
	a.mu.Unlock()
	a.closeTasks(rest)
}

// commitResponseErr returns the first per-partition error of an OffsetCommit
// response.
func commitResponseErr(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit %s-%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// isFenced reports whether err means another producer with this
// transactional id, or a newer group generation, took over: the instance's
// open transaction is aborted and it must rejoin with a new session.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping)
}
