package stream

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Exactly-once runtime.
//
// One Kafka transaction spans the processing rounds of a commit interval
// (Kafka Streams' commit.interval.ms, 100ms by default under ExactlyOnce):
// it holds every output, changelog, repartition and dead-letter record of
// those rounds and the input offsets of every task that processed records,
// and the tasks' store writes stay in their state.Txn until it commits
// (flushState) or aborts (abortRound). A transaction ends when the interval
// elapses, when it holds defaultMaxTxnRecords input records, when a group rebalance
// is waiting, on shutdown, or on an error (abort).
//
// Rebalances: the client blocks rebalances from the poll that returns
// records until AllowRebalance (BlockRebalanceOnPoll), and the loop calls
// AllowRebalance only when no transaction is open (holdsRebalance). So a
// revocation always finds the previous transaction committed: the tasks that
// move hand over committed progress and the tasks that stay lose nothing. A
// waiting rebalance is signalled by the client (OnPartitionsCallbackBlocked);
// the loop then cuts its poll short and ends the transaction after the
// current round, so a rebalance waits at most one round.
//
// kgo.GroupTransactSession remembers a revocation (or loss) until its next
// End and aborts that End, whether or not a transaction was open when the
// revocation happened. Since every revocation here happens between
// transactions, the loop clears that memory with an empty End (no EndTxn is
// sent) before the first round after a revocation, discarding that poll's
// records (skipRound): End rewinds the consumer to the committed offsets,
// which are exactly the processed position because the previous transaction
// committed. Zombie fencing is unchanged: a member that was kicked out while
// stalled commits with a stale generation (KIP-447) or a fenced epoch and
// aborts.

// defaultMaxTxnRecords bounds the input records of one transaction: the
// pending store writes are held in memory and an abort redoes them all.
const defaultMaxTxnRecords = 50_000

// defaultEOSCommitInterval is the commit interval under ExactlyOnce unless
// CommitInterval is set (as Kafka Streams' processing.guarantee=exactly_once_v2).
const defaultEOSCommitInterval = 100 * time.Millisecond

// exactlyOnce is the exactly-once guaranteePath. Its fields belong to the
// loop goroutine, but stale (set by the group callbacks).
type exactlyOnce struct {
	a    *App
	sess *kgo.GroupTransactSession // of the current group session

	open    bool      // a transaction is open
	start   time.Time // clock time of its Begin
	records int       // input records handled in it (control records included)
	tasks   []*task   // tasks with records in it, each once
	joined  map[*task]bool

	// stale is set when the group revoked or lost partitions since the
	// session's last End (the session would abort its next End).
	stale atomic.Bool
}

// connect creates the transact session, with the transactional id
// "<app>-<instance id>", and initialises its producer id at once: this
// fences the previous incarnation (same transactional id) and aborts the
// transaction it left open, which would otherwise hold the input offsets
// unstable (and the changelogs' LSO) until it times out.
func (p *exactlyOnce) connect(ctx context.Context, opts []kgo.Opt) (*kgo.Client, error) {
	a := p.a
	instance, err := a.instanceID()
	if err != nil {
		return nil, err
	}
	// A stalled instance's open transaction holds back read_committed
	// readers until it times out: 10s (as Kafka Streams) unless the
	// ClientOpts say otherwise.
	opts = append([]kgo.Opt{kgo.TransactionTimeout(10 * time.Second)}, opts...)
	opts = append(opts,
		kgo.TransactionalID(a.id+"-"+instance),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	cl := sess.Client()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		sess.Close()
		return nil, fmt.Errorf("init transactional producer: %w", err)
	}
	p.sess = sess
	return cl, nil
}

// pollWait is what is left of the open transaction's interval (a commit
// interval if none is open).
func (p *exactlyOnce) pollWait() time.Duration {
	wait := p.a.cfg.commitInterval
	if p.open {
		wait -= p.a.cfg.clock.Now().Sub(p.start)
		wait = max(wait, time.Millisecond)
	}
	return wait
}

// skipRound clears the session's memory of a revocation that happened
// between transactions (see the file comment); this poll's records are
// fetched again.
func (p *exactlyOnce) skipRound() (bool, error) {
	if p.open || !p.stale.Load() {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	p.stale.Store(false)
	if _, err := p.sess.End(ctx, kgo.TryAbort); err != nil {
		return true, fmt.Errorf("reset transaction session: %w", err)
	}
	return true, nil
}

// beginRound makes the batches' tasks part of the open transaction, beginning
// one if none is open.
func (p *exactlyOnce) beginRound(batches []batch) error {
	if !p.open {
		if err := p.sess.Begin(); err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
		p.open = true
		p.start = p.a.cfg.clock.Now()
		p.records = 0
		if p.joined == nil {
			p.joined = map[*task]bool{}
		}
	}
	for _, b := range batches {
		p.records += len(b.recs)
		if !p.joined[b.t] {
			p.joined[b.t] = true
			p.tasks = append(p.tasks, b.t)
			// Restored if the transaction aborts.
			b.t.beginRound()
		}
	}
	return nil
}

// taskDone leaves the task's store writes in its state.Txn: they reach the
// database only once the transaction commits.
func (p *exactlyOnce) taskDone(*task) error { return nil }

// endRound ends the open transaction when it is due or the round did not
// complete (abort), then, between transactions, serves the queries waiting
// for a flush: no task has writes in a state.Txn, and a waiting query sees
// the transaction just committed.
func (p *exactlyOnce) endRound(ctx context.Context, complete bool, err error) error {
	a := p.a
	if p.open && (err != nil || !complete || ctx.Err() != nil || a.failed.Load() || p.due()) {
		if eerr := p.end(complete && err == nil); eerr != nil && err == nil {
			err = eerr
		}
	}
	if err == nil && !p.open && a.flushRequests.Load() > 0 {
		err = a.serveFlushes()
	}
	return err
}

// due reports whether the open transaction should end now.
func (p *exactlyOnce) due() bool {
	a := p.a
	return a.cfg.txnPerRound || p.records >= a.cfg.maxTxnRecords || a.rebalance.waiting.Load() ||
		a.cfg.clock.Now().Sub(p.start) >= a.cfg.commitInterval || p.burst()
}

// burst reports whether a task of the transaction left window closes for
// the next round (window_burst.go): the transaction ends with this round's,
// so it holds at most one round's bounded closes per operator.
func (p *exactlyOnce) burst() bool {
	for _, t := range p.tasks {
		if t.closesPending() {
			return true
		}
	}
	return false
}

// end ends the open transaction: commit if every record of it was handled
// and every output acknowledged, else abort. On commit the tasks' store
// writes are applied locally and checkpointed; on abort they are dropped and
// the client rewinds to the committed offsets, so the records are processed
// again.
func (p *exactlyOnce) end(commit bool) error {
	a := p.a
	tasks := p.tasks
	p.open = false
	p.tasks = nil
	clear(p.joined)
	if a.killed() {
		// A killed process ends nothing: its transaction stays open until
		// the next incarnation (same transactional id) fences it, or the
		// transaction times out.
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if commit {
		// The tables' collapsed updates belong to the transaction
		// (tableupdates.go). Then every record of the transaction must be
		// acknowledged before it may commit: a failed output (fatal,
		// recorded by the produce promise) turns the commit into an abort.
		if err := flushTablesForCommit(tasks, false); err != nil {
			a.fail(err)
		}
		if err := a.cl.Flush(ctx); err != nil || a.fatalErr() != nil {
			commit = false
		}
	}
	try := kgo.TryAbort
	if commit {
		try = kgo.TryCommit
	}
	if commit {
		// Readers of the outputs see the transaction at End, before
		// flushState puts its store writes in the cache: from here on a
		// query waits for the flush that follows (serveFlushes, between
		// transactions) instead of reading Pebble without them.
		for _, t := range tasks {
			if t.txn != nil {
				t.markUnflushed()
			}
		}
	}
	// The transaction's offsets carry the tasks' watermark states (metadata).
	wc := prepareWatermarkCommit(tasks)
	committed, err := p.sess.End(wc.txnCommitContext(ctx), try)
	if committed {
		wc.committed()
	}
	p.stale.Store(false)
	for _, t := range tasks {
		if committed {
			if ferr := t.flushState(); ferr != nil && err == nil {
				err = ferr
			}
		} else {
			t.abortRound()
		}
	}
	if committed {
		a.metrics.commits.Inc()
		if err == nil {
			tablesCommitted(tasks) // tables: their source offsets just committed
			err = a.checkpoint(tasks, false)
		}
	} else {
		a.metrics.txnAborts.Inc()
		if commit {
			a.cfg.logger.Warn("transaction aborted (rebalance or fencing); its records are processed again")
		}
	}
	if err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	return nil
}

func (p *exactlyOnce) holdsRebalance() bool { return p.open }

// commitOffsets: the offsets were committed inside each round's
// transaction; a task's next offsets are those of its last committed round,
// which its tables hold their source topics up to.
func (p *exactlyOnce) commitOffsets(_ context.Context, tasks []*task) { tablesCommitted(tasks) }

// revoked: the transact session aborts its next End (see the file comment).
func (p *exactlyOnce) revoked() { p.stale.Store(true) }

// stop ends the open transaction, if any: committed if every round of it
// was complete and the loop stops for ctx, aborted on a fatal error.
func (p *exactlyOnce) stop(commit bool) error {
	if !p.open {
		return nil
	}
	return p.end(commit)
}

// rejoin: another instance took this one's tasks while it stalled; its
// transaction was aborted and nothing it did is visible. Run rejoins with a
// fresh session (a new producer epoch).
func (p *exactlyOnce) rejoin(err error) bool { return isFenced(err) }

// readOpts: committed records only (restores and standbys).
func (p *exactlyOnce) readOpts() []kgo.Opt {
	return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}
}

// changelogEnds are the last stable offsets: records of open transactions
// are not state yet.
func (p *exactlyOnce) changelogEnds(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.ListedOffsets, error) {
	return adm.ListCommittedOffsets(ctx, topics...)
}

func (p *exactlyOnce) fetchedEnd(fp kgo.FetchTopicPartition) int64 { return fp.LastStableOffset }

func (p *exactlyOnce) mechanism() string { return mechExactlyOnce }

func (p *exactlyOnce) stateMechanism() string {
	return mechExactlyOnce + "; local stores apply a round only after its transaction commits: state is exact"
}
