package stream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// defaultProducerLinger is how long the App's producer waits to fill a
// batch (Kafka Streams sets its producer's linger.ms to 100; franz-go's
// default is 10ms). A commit, and the end of every ExactlyOnce transaction,
// flushes at once, so it delays nothing under ExactlyOnce (outputs are
// visible at the commit) and at-least-once outputs by at most this much.
// Measured on the keyed count (1M records, 2 shared cores, CPU per record,
// two runs of three rounds): 100ms vs 10ms, 10-12k instead of ~2.5k records
// per batch, 0.06 instead of 0.37 produce requests per 1,000 inputs, about
// 10% more events per CPU-second at-least-once and exactly-once (noisy:
// rounds spread +-10%); 0ms: 6.5 requests per 1,000 inputs and ~14% fewer.
const defaultProducerLinger = 100 * time.Millisecond

// commitTimeout bounds one flush-and-commit.
const commitTimeout = 30 * time.Second

// App runs a topology as one member of the consumer group named by its id.
// Several processes running the same App with the same id share the tasks
// (one per partition of each sub-topology, see Builder); a rebalance moves
// only the tasks that must move (the task balancer: sticky, cooperative),
// committing their progress first.
//
// Delivery is at-least-once: input offsets are committed only after every
// output, repartition, changelog and dead-letter record produced from the
// records below them is acknowledged by the cluster (acks=all, idempotent
// producer). A crash after an acknowledgement and before the commit replays
// the uncommitted input, so outputs may hold duplicates and counts may exceed
// the true counts; nothing is lost.
//
// An App's methods are safe for concurrent use; Run may be called once.
type App struct {
	id      string
	b       *Builder
	cfg     config
	metrics *metrics

	sources map[string]*sourceNode // by resolved topic
	stores  map[string]*storeSpec
	subs    []*subTopology
	subOf   []int // source index -> sub-topology index
	// partitions of the topics checked or created at start (set by
	// setupTopics before the group is joined; read-only after).
	partitions map[string]int32

	cl  *kgo.Client
	adm *kadm.Client
	// sess wraps cl under ExactlyOnce (nil otherwise).
	sess *kgo.GroupTransactSession
	// txn is the open transaction (ExactlyOnce) and the rebalance signal.
	txn eosState
	// producer hands a record to the client (cl.Produce); unit tests
	// replace it to run tasks without a broker.
	producer func(r *kgo.Record, promise func(*kgo.Record, error))
	// recycleRecords: producer is the client, which does not use a record
	// after its promise ran, so tasks may reuse it (task.recycle). Set
	// with producer, before any task exists.
	recycleRecords atomic.Bool

	mu       sync.Mutex
	tasks    map[taskID]*task
	assigned map[taskID]bool // assigned by the group, task not created yet

	fatalMu sync.Mutex
	fatal   error
	failed  atomic.Bool // fatal != nil, for the per-record check

	// memberUserData is advertised to the group in this member's
	// metadata; onTaskOwners receives every member's userData with its
	// partitions at each assignment (see taskBalancer). Both optional; set
	// before Run.
	memberUserData []byte
	onTaskOwners   func([]taskOwner)
	ownersMu       sync.Mutex
	owners         []taskOwner // the owners table of the latest assignment

	running    atomic.Bool
	lastCommit time.Time // loop goroutine only
	// flushRequests counts tasks whose queries wait for a flush of their
	// store cache (task.awaitFlush); the loop serves them between rounds.
	flushRequests atomic.Int32

	query    *queryState     // queryable state (query.go)
	standbys *standbyManager // standby replicas (standby.go)

	// crash is a test hook: when set, the App stops without committing or
	// checkpointing anything more, as a killed process would.
	crash atomic.Bool
}

// NewApp validates the topology and options. It does not connect: Run does.
func NewApp(appID string, b *Builder, opts ...Opt) (*App, error) {
	if err := validTopic(appID); err != nil {
		return nil, fmt.Errorf("stream: app id: %w", err)
	}
	if b == nil {
		return nil, errors.New("stream: nil builder")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.guarantee == ExactlyOnce && !cfg.commitIntervalSet {
		cfg.commitInterval = defaultEOSCommitInterval
	}
	var errs []error
	if err := cfg.validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, b.errs...)
	if len(b.sources) == 0 {
		errs = append(errs, errors.New("topology has no source"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("stream: app %s: %w", appID, err)
	}
	m, err := newMetrics(appID, cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("stream: app %s: metrics: %w", appID, err)
	}
	a := &App{id: appID, b: b, cfg: cfg, metrics: m, sources: map[string]*sourceNode{},
		stores: map[string]*storeSpec{}, tasks: map[taskID]*task{}, assigned: map[taskID]bool{}}
	for _, s := range b.sources {
		a.sources[a.topicOf(s)] = s
	}
	for _, s := range b.stores {
		a.stores[s.name] = s
	}
	a.subs = buildSubTopologies(b)
	a.subOf = make([]int, len(b.sources))
	for _, st := range a.subs {
		for _, s := range st.sources {
			a.subOf[s.idx] = st.idx
		}
	}
	a.query = newQueryState(a)
	if a.standbys, err = newStandbyManager(a); err != nil {
		return nil, fmt.Errorf("stream: app %s: metrics: %w", appID, err)
	}
	a.query.view.onView = a.standbys.update
	return a, nil
}

// ID returns the application id: the consumer group and the prefix of the
// App's internal topics.
func (a *App) ID() string { return a.id }

func (a *App) topicOf(s *sourceNode) string {
	if s.internal {
		return a.internalTopic(s.topic)
	}
	return s.topic
}

func (a *App) sinkTopic(s *sinkSpec) string {
	if s.internal {
		return a.internalTopic(s.topic)
	}
	return s.topic
}

func (a *App) internalTopic(suffix string) string { return a.id + "-" + suffix }

func (a *App) changelogTopic(store string) string { return a.internalTopic(store + "-changelog") }

// storeChangelog is the topic a store is restored from: its changelog, or
// for a table the table's source topic.
func (a *App) storeChangelog(st *storeSpec) string {
	if st.table {
		return a.topicOf(a.b.sources[st.source])
	}
	return a.changelogTopic(st.name)
}

func (a *App) storeSpec(name string) *storeSpec { return a.stores[name] }

func (a *App) taskDir(id taskID) string { return filepath.Join(a.cfg.stateDir, a.id, id.String()) }

func (a *App) backoff(attempt int) time.Duration {
	d := a.cfg.backoffMin
	for i := 1; i < attempt && d < a.cfg.backoffMax; i++ {
		d *= 2
	}
	return min(d, a.cfg.backoffMax)
}

// fail records the first fatal error; the processing loop stops on it.
func (a *App) fail(err error) {
	a.fatalMu.Lock()
	if a.fatal == nil {
		a.fatal = err
		a.failed.Store(true)
	}
	a.fatalMu.Unlock()
}

func (a *App) fatalErr() error {
	a.fatalMu.Lock()
	defer a.fatalMu.Unlock()
	return a.fatal
}

func (a *App) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	// Defaults first: the user's ClientOpts override them (see ClientOpts).
	opts := []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(defaultProducerLinger)}
	opts = append(opts, a.cfg.clientOpts...)
	opts = append(opts, kgo.SeedBrokers(a.cfg.seeds...))
	return append(opts, extra...)
}

// Run creates the internal topics, joins the group and processes records
// until ctx is done (then it flushes, commits and leaves the group, and
// returns nil) or a fatal error occurs (returned; nothing past the failure
// is committed). Processing errors in user code are not fatal: they go to
// the dead-letter topics.
func (a *App) Run(ctx context.Context) (err error) {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("stream: App.Run called twice")
	}
	stopQueries, err := a.serveQueries()
	if err != nil {
		return fmt.Errorf("stream: app %s: %w", a.id, err)
	}
	defer stopQueries()
	if err := a.setupTopics(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before starting: nothing to flush or commit
		}
		return fmt.Errorf("stream: app %s: %w", a.id, err)
	}
	for {
		err := a.session(ctx)
		if a.eos() && isFenced(err) && ctx.Err() == nil {
			// Another instance took this one's tasks while it stalled;
			// its transaction was aborted and nothing it did is visible.
			// Rejoin with a fresh session (a new producer epoch).
			a.cfg.logger.Warn("producer fenced; rejoining the group with a new session", "err", err)
			a.fatalMu.Lock()
			a.fatal = nil
			a.failed.Store(false)
			a.fatalMu.Unlock()
			a.metrics.fenced.Inc()
			continue
		}
		if err != nil {
			a.cfg.logger.Error("app stopped on a fatal error", "err", err)
			return fmt.Errorf("stream: app %s: %w", a.id, err)
		}
		return nil
	}
}

// session runs one group membership (one client) until ctx is done or a
// fatal error.
func (a *App) session(ctx context.Context) error {
	var topics []string
	for t := range a.sources {
		topics = append(topics, t)
	}
	manual := map[string]bool{}
	for _, st := range a.stores {
		if !st.table {
			manual[a.changelogTopic(st.name)] = true
		}
	}
	if a.memberUserData == nil {
		// Where this instance answers queries, for the group view.
		a.memberUserData = a.advertisedUserData()
	}
	opts := a.clientOpts(
		kgo.ConsumerGroup(a.id),
		kgo.ConsumeTopics(topics...),
		kgo.Balancers(a.newTaskBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(a.onAssigned),
		kgo.OnPartitionsRevoked(a.onRevoked),
		kgo.OnPartitionsLost(a.onLost),
		kgo.OnPartitionsCallbackBlocked(a.onRebalanceBlocked),
		// Control records (transaction markers) advance the committed
		// offset past them, as the Java consumer's position() does:
		// otherwise a transactional input shows a lag of 1 forever.
		kgo.KeepControlRecords(),
		kgo.RecordPartitioner(appPartitioner{manual: manual, byKey: kgo.StickyKeyPartitioner(nil)}),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	var cl *kgo.Client
	if a.eos() {
		instance, err := a.instanceID()
		if err != nil {
			return err
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
			return fmt.Errorf("client: %w", err)
		}
		a.sess = sess
		cl = sess.Client()
		// Initialise the producer id now: this fences the previous
		// incarnation (same transactional id) and aborts the transaction
		// it left open, which would otherwise hold the input offsets
		// unstable (and the changelogs' LSO) until it times out.
		if _, _, err := cl.ProducerID(ctx); err != nil {
			sess.Close()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("init transactional producer: %w", err)
		}
	} else {
		c, err := kgo.NewClient(opts...)
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		cl = c
	}
	a.cl = cl
	a.adm = kadm.NewClient(cl)
	a.recycleRecords.Store(true)
	a.producer = func(r *kgo.Record, promise func(*kgo.Record, error)) {
		// Not the Run context: records handed over before shutdown must
		// still be sent by the final flush.
		cl.Produce(context.Background(), r, promise)
	}
	a.lastCommit = a.cfg.clock.Now()
	a.standbys.start(ctx)
	stopQuerySession := a.startQuerySession(ctx, cl)
	err := a.loop(ctx)
	stopQuerySession()
	a.shutdown(err)
	return err
}

// appPartitioner sends changelog records to the partition set on the record
// (the task's partition) and everything else by key: murmur2 of the key
// bytes, as Java clients do, so a repartition topic is partitioned exactly as
// Kafka Streams would partition it.
type appPartitioner struct {
	manual map[string]bool
	byKey  kgo.Partitioner
}

func (p appPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.manual[topic] {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return p.byKey.ForTopic(topic)
}

// loop runs processing rounds: poll (rebalances are blocked from here), make
// sure the polled partitions' tasks exist and are restored, process each
// task's records on the workers, commit if due, allow rebalances.
func (a *App) loop(ctx context.Context) error {
	for {
		if err := a.fatalErr(); err != nil {
			a.closeTxn(false)
			return err
		}
		if ctx.Err() != nil {
			// Every round of an open transaction was complete.
			if err := a.closeTxn(true); err != nil {
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
		if a.sess != nil && !a.txn.open && a.txn.stale.Load() {
			// A revocation happened since the last transaction (see
			// eos.go); this poll's records are fetched again.
			err := a.clearStaleSession()
			a.allowRebalance()
			if err != nil {
				return err
			}
			continue
		}
		_, complete, err := a.round(ctx, fetches)
		if a.sess != nil {
			if a.txn.open && (err != nil || !complete || ctx.Err() != nil || a.failed.Load() || a.txnDue()) {
				if eerr := a.endTxn(complete && err == nil); eerr != nil && err == nil {
					err = eerr
				}
			}
		} else if now := a.cfg.clock.Now(); err == nil && now.Sub(a.lastCommit) >= a.cfg.commitInterval {
			a.lastCommit = now
			cerr := a.commit(ctx, a.allTasks(), false)
			if cerr != nil && ctx.Err() == nil {
				err = cerr
			}
			if cerr == nil && a.flushRequests.Load() > 0 {
				// Right after the commit the store caches hold only
				// state whose outputs and changelog are acknowledged.
				err = a.serveFlushes()
			}
		}
		if err == nil && a.sess != nil && !a.txn.open && a.flushRequests.Load() > 0 {
			// Between transactions: no task has writes in a state.Txn,
			// and a waiting query sees the transaction just committed.
			err = a.serveFlushes()
		}
		if !a.txn.open {
			a.allowRebalance()
		}
		if ferr := a.fatalErr(); ferr != nil {
			a.closeTxn(false)
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

func (a *App) eos() bool { return a.cfg.guarantee == ExactlyOnce }

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

// allowRebalance lets a waiting rebalance proceed. Under ExactlyOnce, never
// call it with a transaction open.
func (a *App) allowRebalance() {
	a.txn.rebalanceWaiting.Store(false)
	if a.sess != nil {
		a.sess.AllowRebalance()
	} else {
		a.cl.AllowRebalance()
	}
}

type batch struct {
	t    *task
	recs []*kgo.Record
}

// round processes the polled records: each task's records in order on one
// worker goroutine, tasks in parallel. It returns the tasks that processed
// records and whether every polled record was handled (not so when ctx ended
// or a fatal error stopped a task).
func (a *App) round(ctx context.Context, fetches kgo.Fetches) (touched []*task, complete bool, err error) {
	var ids []taskID
	a.mu.Lock()
	for id := range a.assigned {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	polled := map[taskID][][]*kgo.Record{}
	lag := map[taskID]int64{}
	var perr error
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		id, ok := a.taskOf(p.Topic, p.Partition)
		if !ok {
			perr = fmt.Errorf("polled partition %s-%d of a topic that is no source", p.Topic, p.Partition)
			return
		}
		if _, seen := polled[id]; !seen {
			ids = append(ids, id)
		}
		polled[id] = append(polled[id], p.Records)
		lag[id] += max(0, p.HighWatermark-(p.Records[len(p.Records)-1].Offset+1))
	})
	if perr != nil {
		return nil, false, perr
	}
	for _, id := range ids {
		if _, err := a.ensureTask(ctx, id); err != nil {
			return nil, false, err
		}
	}
	batches := make([]batch, 0, len(polled))
	a.mu.Lock()
	for id, parts := range polled {
		t := a.tasks[id]
		batches = append(batches, batch{t: t, recs: mergeByTimestamp(parts, a.tableFirst)})
		touched = append(touched, t)
		t.m.lag.Set(float64(lag[id]))
	}
	a.mu.Unlock()
	if len(batches) == 0 {
		return nil, true, nil
	}
	if a.sess != nil {
		if err := a.joinTxn(batches); err != nil {
			return nil, false, err
		}
	}

	var incomplete atomic.Bool
	sem := make(chan struct{}, a.cfg.workers)
	var wg sync.WaitGroup
	for _, b := range batches {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, r := range b.recs {
				if a.failed.Load() {
					// Stop producing once any output failed: nothing from
					// here on can be committed anyway.
					incomplete.Store(true)
					break
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
					incomplete.Store(true)
					break
				}
			}
			if err := b.t.endRound(); err != nil {
				a.fail(err)
				incomplete.Store(true)
				return
			}
			if a.sess == nil { // under ExactlyOnce, only once the transaction commits
				if err := b.t.flushState(); err != nil {
					a.fail(err)
				}
			}
		}()
	}
	wg.Wait()
	return touched, !incomplete.Load(), a.fatalErr()
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

// commit makes the progress of tasks durable, in this order:
//
//  1. flush: every record produced so far is acknowledged (or failed — a
//     failure is fatal and nothing is committed);
//  2. commit each task's input offset (one past its last handled record);
//  3. write each task's local checkpoint (synced) naming the changelog
//     offsets its stores cover: every task's if force (hand-over,
//     shutdown), else those due (task.checkpointDue).
//
// A crash between any two steps replays input (at-least-once); none loses it.
func (a *App) commit(ctx context.Context, tasks []*task, force bool) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if err := a.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if err := a.fatalErr(); err != nil {
		return err
	}
	if a.crash.Load() {
		return nil
	}
	if a.sess != nil {
		// Offsets are committed inside each round's transaction; a
		// task's next offsets are those of its last committed round.
		for _, t := range tasks {
			next := map[string]int64{}
			for topic, o := range t.next {
				next[topic] = o.Offset
			}
			t.tablesCovered(next)
		}
		return a.checkpoint(tasks, true)
	}
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
	var commitErr error
	if len(offsets) > 0 {
		a.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				commitErr = err
				return
			}
			commitErr = commitResponseErr(resp)
		})
		a.metrics.commits.Inc()
	}
	if commitErr != nil {
		// Not fatal: the offsets stay uncommitted and the records are
		// replayed by whoever owns the partitions next (at-least-once).
		a.cfg.logger.Warn("offset commit failed", "err", commitErr)
	} else {
		for _, t := range tasks {
			for topic, next := range t.next {
				t.committed[topic] = next.Offset
			}
			t.tablesCovered(t.committed)
		}
	}
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
			t.markUnflushed()
			continue
		}
		before := t.lastCheckpointAt
		if err := t.checkpoint(); err != nil {
			return err
		}
		if t.lastCheckpointAt != before {
			t.markFlushed() // WriteCheckpoint flushed the cache
		} else {
			t.markUnflushed() // nothing to claim: the cache may hold writes still
		}
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
		a.txn.stale.Store(true) // the transact session aborts its next End (see eos.go)
	}
	tasks := a.takeTasks(revoked)
	if len(tasks) > 0 && a.fatalErr() == nil && !a.crash.Load() {
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
	a.txn.stale.Store(true)
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
	if loopErr == nil && !a.crash.Load() {
		if err := a.commit(context.Background(), a.allTasks(), true); err != nil {
			a.cfg.logger.Warn("final commit failed; the next owner replays", "err", err)
		}
	}
	if loopErr != nil {
		a.fail(loopErr) // keep the revoke callback from committing
	}
	if a.sess != nil {
		a.sess.AllowRebalance()
		a.sess.Close()
	} else {
		a.cl.AllowRebalance()
		a.cl.Close()
	}
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
