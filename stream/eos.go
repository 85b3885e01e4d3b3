package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
// AllowRebalance only when no transaction is open. So a revocation always
// finds the previous transaction committed: the tasks that move hand over
// committed progress and the tasks that stay lose nothing. A waiting
// rebalance is signalled by the client (OnPartitionsCallbackBlocked); the
// loop then cuts its poll short and ends the transaction after the current
// round, so a rebalance waits at most one round.
//
// kgo.GroupTransactSession remembers a revocation (or loss) until its next
// End and aborts that End, whether or not a transaction was open when the
// revocation happened. Since every revocation here happens between
// transactions, the loop clears that memory with an empty End (no EndTxn is
// sent) before the first round after a revocation, discarding that poll's
// records: End rewinds the consumer to the committed offsets, which are
// exactly the processed position because the previous transaction committed.
// Zombie fencing is unchanged: a member that was kicked out while stalled
// commits with a stale generation (KIP-447) or a fenced epoch and aborts.

// defaultMaxTxnRecords bounds the input records of one transaction: the
// pending store writes are held in memory and an abort redoes them all.
const defaultMaxTxnRecords = 50_000

// defaultEOSCommitInterval is the commit interval under ExactlyOnce unless
// CommitInterval is set (as Kafka Streams' processing.guarantee=exactly_once_v2).
const defaultEOSCommitInterval = 100 * time.Millisecond

// eosState is the transaction state of an App. The fields without a lock
// belong to the loop goroutine.
type eosState struct {
	open    bool
	start   time.Time // clock time of the Begin
	records int       // input records handled in the transaction (control records included)
	tasks   []*task   // tasks with records in the transaction, each once
	joined  map[*task]bool

	// rebalanceWaiting is set when a group rebalance waits for the loop to
	// allow it; cleared when the loop allows rebalances.
	rebalanceWaiting atomic.Bool
	// stale is set when the group revoked or lost partitions since the
	// session's last End (the session would abort its next End).
	stale atomic.Bool

	pollMu     sync.Mutex
	pollCancel context.CancelFunc // of the poll in progress, if any
}

// poll polls the client, for at most the time left in the open transaction
// (or a commit interval), returning early when a rebalance waits.
func (a *App) poll(ctx context.Context) kgo.Fetches {
	wait := a.cfg.commitInterval
	if a.txn.open {
		wait -= a.cfg.clock.Now().Sub(a.txn.start)
		wait = max(wait, time.Millisecond)
	}
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	a.txn.pollMu.Lock()
	a.txn.pollCancel = cancel
	a.txn.pollMu.Unlock()
	if a.txn.rebalanceWaiting.Load() {
		cancel()
	}
	var fetches kgo.Fetches
	if a.sess != nil {
		fetches = a.sess.PollRecords(pctx, a.cfg.maxPollRecords)
	} else {
		fetches = a.cl.PollRecords(pctx, a.cfg.maxPollRecords)
	}
	a.txn.pollMu.Lock()
	a.txn.pollCancel = nil
	a.txn.pollMu.Unlock()
	return fetches
}

// onRebalanceBlocked is the client's OnPartitionsCallbackBlocked hook: a
// rebalance waits for AllowRebalance.
func (a *App) onRebalanceBlocked(context.Context, *kgo.Client) {
	a.txn.rebalanceWaiting.Store(true)
	a.txn.pollMu.Lock()
	if a.txn.pollCancel != nil {
		a.txn.pollCancel()
	}
	a.txn.pollMu.Unlock()
}

// joinTxn makes the batches' tasks part of the open transaction, beginning
// one if none is open. Loop goroutine, before the batches run.
func (a *App) joinTxn(batches []batch) error {
	if !a.txn.open {
		if err := a.sess.Begin(); err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
		a.txn.open = true
		a.txn.start = a.cfg.clock.Now()
		a.txn.records = 0
		if a.txn.joined == nil {
			a.txn.joined = map[*task]bool{}
		}
	}
	for _, b := range batches {
		a.txn.records += len(b.recs)
		if !a.txn.joined[b.t] {
			a.txn.joined[b.t] = true
			a.txn.tasks = append(a.txn.tasks, b.t)
			// Restored if the transaction aborts.
			b.t.beginRound()
		}
	}
	return nil
}

// txnDue reports whether the open transaction should end now.
func (a *App) txnDue() bool {
	return a.cfg.txnPerRound || a.txn.records >= a.cfg.maxTxnRecords || a.txn.rebalanceWaiting.Load() ||
		a.cfg.clock.Now().Sub(a.txn.start) >= a.cfg.commitInterval
}

// endTxn ends the open transaction: commit if every record of it was handled
// and every output acknowledged, else abort. On commit the tasks' store
// writes are applied locally and checkpointed; on abort they are dropped and
// the client rewinds to the committed offsets, so the records are processed
// again.
func (a *App) endTxn(commit bool) error {
	tasks := a.txn.tasks
	a.txn.open = false
	a.txn.tasks = nil
	clear(a.txn.joined)
	if a.crash.Load() {
		// A killed process ends nothing: its transaction stays open until
		// the next incarnation (same transactional id) fences it, or the
		// transaction times out.
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if commit {
		// Every record of the transaction must be acknowledged before it
		// may commit: a failed output (fatal, recorded by the produce
		// promise) turns the commit into an abort.
		if err := a.cl.Flush(ctx); err != nil || a.fatalErr() != nil {
			commit = false
		}
	}
	try := kgo.TryAbort
	if commit {
		try = kgo.TryCommit
	}
	committed, err := a.sess.End(ctx, try)
	a.txn.stale.Store(false)
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

// closeTxn ends the transaction if one is open (the loop is stopping).
func (a *App) closeTxn(commit bool) error {
	if !a.txn.open {
		return nil
	}
	return a.endTxn(commit)
}

// clearStaleSession makes the session forget a revocation that happened
// between transactions (see the file comment); no transaction is open. The
// records of the poll just made are dropped: End rewinds the consumer to the
// committed offsets.
func (a *App) clearStaleSession() error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	a.txn.stale.Store(false)
	if _, err := a.sess.End(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("reset transaction session: %w", err)
	}
	return nil
}

// instanceID returns this instance's id, kept in the state directory so a
// restarted instance uses the same transactional id and fences the
// transactions its previous incarnation left open.
func (a *App) instanceID() (string, error) {
	dir := filepath.Join(a.cfg.stateDir, a.id)
	path := filepath.Join(dir, "instance-id")
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if validTopic(id) == nil && len(id) == 32 {
			return id, nil
		}
		a.cfg.logger.Warn("invalid instance id file; writing a new one", "path", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("instance id: %w", err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return id, nil
}
