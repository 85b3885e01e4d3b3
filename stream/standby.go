package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// Standby replicas (Kafka Streams' num.standby.replicas): an instance keeps
// warm copies of tasks owned by other instances by tailing their changelog
// partitions into the same local directory the task would use, with the same
// checkpoint (state.Checkpoint: the changelog offsets below which the local
// store holds every write). When such a task moves to the instance, its
// restore finds the checkpoint and replays only the changelog written since.
//
// Placement is a pure function of the group view (groupView.standbysOf): a
// task's standbys are the StandbyReplicas members following its owner in
// member-id order. Every instance computes it from the view it reads after
// each rebalance and starts or stops its standbys to match.
//
// Invariant: a task directory is open by at most one of {the active task,
// a standby} at a time. ensureTask claims the task (stopping its standby and
// waiting for it, or for one being stopped, to close the directory) before
// opening it; a standby starts only for unclaimed tasks, and opens the
// directory only once the previous standby of the task closed it; a task is
// unclaimed only after it closed.

// StandbyReplicas sets how many other instances keep a warm copy of each
// stateful task (Kafka Streams' num.standby.replicas). A copy costs the
// instance a consumer of the task's changelog partitions and the disk of its
// stores; it makes a takeover replay only the changelog tail instead of the
// whole changelog. Default: 0.
func StandbyReplicas(n int) Opt { return optFunc(func(c *config) { c.standbyReplicas = n }) }

// standbyManager runs this instance's standby tasks.
//
// Goroutine-safe. Lock order: standbyManager.mu, then standbyTask.mu; it
// never takes App.mu.
type standbyManager struct {
	a *App

	applied prometheus.Counter
	count   prometheus.Gauge
	lag     *prometheus.GaugeVec // by task: changelog records not applied yet

	mu      sync.Mutex
	ctx     context.Context // of the current session; nil when none
	claimed map[taskID]bool // active here (or being started): no standby
	running map[taskID]*standbyTask
	// stopping are standbys cancelled (no longer running) that may still
	// hold their task directory: claim and a new standby of the same task
	// wait for them.
	stopping map[taskID]*standbyTask

	cleaner *stateCleaner // deletes the directories of tasks unused here
	shared  sharedLimits  // committed offsets of the table source topics
}

// standbyTask tails one task's changelog partitions.
type standbyTask struct {
	id     taskID
	stores []*storeSpec
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	pos  map[string]int64 // changelog topic -> next offset to apply
	seen map[string]int64 // changelog topic -> one past the last record fetched (applied or held)
}

func newStandbyManager(a *App) (*standbyManager, error) {
	labels := prometheus.Labels{"app": a.id}
	m := &standbyManager{a: a, claimed: map[taskID]bool{}, running: map[taskID]*standbyTask{},
		stopping: map[taskID]*standbyTask{},
		applied: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "weir", Subsystem: "stream",
			Name: "standby_records_total", Help: "Changelog records applied to standby copies of other instances' tasks.",
			ConstLabels: labels}),
		count: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream",
			Name: "standby_tasks", Help: "Standby tasks (warm copies of other instances' tasks) on this instance.",
			ConstLabels: labels}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "weir", Subsystem: "stream",
			Name: "standby_lag_records", Help: "Changelog records a standby task has not applied yet (as of its last fetch; " +
				"for a table's source topic, up to the group's committed offset).",
			ConstLabels: labels}, []string{"task"}),
	}
	if r := a.cfg.registerer; r != nil && a.cfg.standbyReplicas > 0 {
		for _, c := range []prometheus.Collector{m.applied, m.count, m.lag} {
			if err := r.Register(c); err != nil {
				return nil, err
			}
		}
	}
	var err error
	if m.cleaner, err = newStateCleaner(m); err != nil {
		return nil, err
	}
	return m, nil
}

// start lets standbys run in ctx (one group session), and the state
// cleaner.
func (m *standbyManager) start(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	m.shared.reset()
	m.cleaner.start(ctx)
}

// claim makes id active on this instance: its standby, if any, is stopped
// and has closed the task directory when claim returns (also one that was
// being stopped already).
func (m *standbyManager) claim(id taskID) {
	m.mu.Lock()
	m.claimed[id] = true
	st := m.running[id]
	if st != nil {
		m.stopLocked(st)
	}
	prev := m.stopping[id]
	m.mu.Unlock()
	if prev != nil {
		m.waitStopped(prev)
	}
	if st != nil {
		m.a.cfg.logger.Info("standby promoted to active task", "task", id.String(), "positions", st.positions())
	}
}

// stopLocked cancels a running standby and moves it to m.stopping; wait for
// it with waitStopped. m.mu must be held.
func (m *standbyManager) stopLocked(st *standbyTask) {
	delete(m.running, st.id)
	m.count.Set(float64(len(m.running)))
	m.stopping[st.id] = st
	st.cancel()
}

// waitStopped waits until st closed its directory.
func (m *standbyManager) waitStopped(st *standbyTask) {
	<-st.done
	m.mu.Lock()
	if m.stopping[st.id] == st {
		delete(m.stopping, st.id)
	}
	m.mu.Unlock()
}

// unclaim: id's active task on this instance closed its directory.
func (m *standbyManager) unclaim(id taskID) {
	m.mu.Lock()
	delete(m.claimed, id)
	m.mu.Unlock()
}

// stopAll stops every standby (the session ends) and the state cleaner, and
// waits for them.
func (m *standbyManager) stopAll() {
	m.cleaner.stop()
	m.mu.Lock()
	for _, st := range m.running {
		m.stopLocked(st)
	}
	sts := slices.Collect(maps.Values(m.stopping))
	m.ctx = nil
	m.mu.Unlock()
	for _, st := range sts {
		m.waitStopped(st)
	}
}

// statefulTasks maps each task with stores to them, for a session's
// partition counts.
func (a *App) statefulTasks(partitions map[string]int32) map[taskID][]*storeSpec {
	out := map[taskID][]*storeSpec{}
	for _, name := range sortedKeys(a.stores) {
		spec := a.stores[name]
		for p := range partitions[name] {
			id := a.storeTask(spec, p)
			out[id] = append(out[id], spec)
		}
	}
	return out
}

// update starts and stops standbys to match the placement of view. Only a
// stable view places standbys; an unstable one changes nothing.
func (m *standbyManager) update(v *groupView) {
	n := m.a.cfg.standbyReplicas
	if n <= 0 || !v.stable || v.self == "" {
		return
	}
	m.a.query.mu.RLock()
	tasks := m.a.statefulTasks(m.a.query.partitions)
	m.a.query.mu.RUnlock()
	want := map[taskID][]*storeSpec{}
	for id, stores := range tasks {
		if slices.Contains(v.standbysOf(m.a.storeInput(stores[0], id.partition), n), v.self) {
			want[id] = stores
		}
	}
	var stop []*standbyTask
	m.mu.Lock()
	if m.ctx == nil || m.ctx.Err() != nil {
		m.mu.Unlock()
		return
	}
	for id, st := range m.running {
		finished := false
		select {
		case <-st.done:
			finished = true // failed: restarted below if still wanted
		default:
		}
		if _, ok := want[id]; !ok || finished {
			stop = append(stop, st)
			m.stopLocked(st)
		}
	}
	for id, stores := range want {
		m.startLocked(id, stores)
	}
	m.mu.Unlock()
	for _, st := range stop {
		m.waitStopped(st)
	}
}

// startLocked starts a standby of id unless one runs or id is claimed.
// m.mu must be held, with a session context set.
func (m *standbyManager) startLocked(id taskID, stores []*storeSpec) {
	if _, ok := m.running[id]; ok || m.claimed[id] {
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	st := &standbyTask{id: id, stores: stores, cancel: cancel, done: make(chan struct{}), pos: map[string]int64{}}
	m.running[id] = st
	m.count.Set(float64(len(m.running)))
	prev := m.stopping[id] // still holding the directory, maybe
	go func() {
		defer close(st.done)
		defer m.lag.DeleteLabelValues(id.String())
		if prev != nil {
			// Cancelled: it closes the directory promptly. Waited for
			// even if this one is cancelled too, so that st.done implies
			// prev.done (claim waits only for the latest).
			<-prev.done
			if ctx.Err() != nil {
				return
			}
		}
		if err := m.tail(ctx, st); err != nil && ctx.Err() == nil {
			m.a.cfg.logger.Warn("standby task failed; retried at the next group view", "task", id.String(), "err", err)
		}
	}()
}

func (st *standbyTask) positions() map[string]int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.pos)
}

// fetched returns, per changelog, one past the last record fetched: past
// positions() by the table records held back by a limit.
func (st *standbyTask) fetched() map[string]int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.seen)
}

// positions returns each running standby's changelog positions.
func (m *standbyManager) positions() map[taskID]map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[taskID]map[string]int64{}
	for id, st := range m.running {
		out[id] = st.positions()
	}
	return out
}

// tail keeps st's local stores up to date with their changelogs until ctx
// is done, checkpointing every commit interval and when it stops. A table's
// source topic is applied only below the group's committed offset of the
// partition (standby_limit.go). Its phases: open the local store and a
// consumer (openStandby), find where to start (startPositions) and become
// readable by AllowStale queries, then fetch and apply (standbyRun.step)
// until ctx is done.
func (m *standbyManager) tail(ctx context.Context, st *standbyTask) error {
	r, err := m.openStandby(st)
	if err != nil {
		return err
	}
	defer r.close()
	if err := r.begin(ctx); err != nil {
		return err
	}
	// Readable by AllowStale queries until it closes.
	q := m.a.query
	q.mu.Lock()
	q.standbys[st.id] = r.db
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		delete(q.standbys, st.id)
		q.mu.Unlock()
	}()
	for ctx.Err() == nil {
		if err := r.step(ctx); err != nil {
			return err
		}
	}
	if err := r.writeCheckpoint(); err != nil {
		return fmt.Errorf("standby %s: %w", st.id, err)
	}
	return nil
}

// standbyRun is one run of a standby task: its local store, its changelog
// consumer and positions. Used by the standby's goroutine only.
type standbyRun struct {
	m      *standbyManager
	st     *standbyTask
	logger *slog.Logger
	db     *state.DB
	cl     *kgo.Client
	adm    *kadm.Client

	tables       []string          // the table source topics among the changelogs
	store        map[string]string // changelog topic -> store name
	l            *limiter
	checkpointed map[string]int64 // the positions of the last checkpoint
	applied      int              // records applied by the current step
	// ends are the changelogs' end offsets as of their last fetch (high
	// watermark, or under ExactlyOnce last stable offset).
	ends                       map[string]int64
	lastCheckpoint, lastLimits time.Time
}

// openStandby opens st's local store (deleting an unusable one) and a
// consumer for its changelogs.
func (m *standbyManager) openStandby(st *standbyTask) (*standbyRun, error) {
	a := m.a
	logger := a.cfg.logger.With("standby", st.id.String())
	dir := a.taskDir(st.id)
	var stateOpts []state.Option
	for _, s := range st.stores {
		stateOpts = append(stateOpts, storeOptions(s)...)
	}
	db, err := state.Open(dir, logger, stateOpts...)
	if err != nil {
		logger.Warn("local store unusable; deleting it", "dir", dir, "err", err)
		if rerr := os.RemoveAll(dir); rerr != nil {
			return nil, fmt.Errorf("standby %s: %w (and removing it: %v)", st.id, err, rerr)
		}
		if db, err = state.Open(dir, logger, stateOpts...); err != nil {
			return nil, fmt.Errorf("standby %s: %w", st.id, err)
		}
	}
	// Control records (transaction markers) are kept so the position moves
	// past them, as the group consumer's committed offsets do. Under
	// ExactlyOnce committed records only, as the restore reads.
	opts := a.clientOpts(append([]kgo.Opt{kgo.KeepControlRecords()}, a.path.readOpts()...)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("standby %s: client: %w", st.id, err)
	}
	return &standbyRun{m: m, st: st, logger: logger, db: db, cl: cl, adm: kadm.NewClient(cl),
		tables: m.standbyTables(st), store: map[string]string{}, ends: map[string]int64{}}, nil
}

func (r *standbyRun) close() {
	r.cl.Close()
	r.db.Close()
}

// begin finds the start positions and the table limits, and starts
// consuming the changelogs from there.
func (r *standbyRun) begin(ctx context.Context) error {
	a, st := r.m.a, r.st
	pos, limits, err := r.m.startPositions(ctx, r.adm, r.db, st, r.tables)
	if err != nil {
		return err
	}
	from := map[string]map[int32]kgo.Offset{}
	for _, s := range st.stores {
		topic := a.storeChangelog(s)
		r.store[topic] = s.name
		from[topic] = map[int32]kgo.Offset{st.id.partition: kgo.NewOffset().At(pos[topic])}
	}
	r.l = &limiter{cl: r.cl, partition: st.id.partition, limits: map[string]*sourceLimit{}, pos: pos, seen: maps.Clone(pos)}
	for topic, limit := range limits {
		r.l.limits[topic] = &sourceLimit{limit: limit}
	}
	st.publish(r.l)
	r.cl.AddConsumePartitions(from)
	r.checkpointed = maps.Clone(pos)
	if f := a.cfg.seams.standbyCheckpointed; f != nil {
		f(st.id, r.checkpointOf(pos)) // the one it resumes from (zeros after a wipe)
	}
	now := a.cfg.clock.Now()
	r.lastCheckpoint, r.lastLimits = now, now
	return nil
}

func (r *standbyRun) checkpointOf(pos map[string]int64) state.Checkpoint {
	cp := state.Checkpoint{}
	for topic, off := range pos {
		cp[r.store[topic]] = off
	}
	return cp
}

// writeCheckpoint checkpoints the applied positions, if they moved.
func (r *standbyRun) writeCheckpoint() error {
	if maps.Equal(r.l.pos, r.checkpointed) {
		return nil
	}
	cp := r.checkpointOf(r.l.pos)
	if err := r.db.WriteCheckpoint(cp); err != nil {
		return err
	}
	r.checkpointed = maps.Clone(r.l.pos)
	if f := r.m.a.cfg.seams.standbyCheckpointed; f != nil {
		f(r.st.id, cp)
	}
	return nil
}

// apply applies one admitted changelog record to txn.
func (r *standbyRun) apply(txn *state.Txn, rec *kgo.Record) error {
	r.l.pos[rec.Topic] = max(r.l.pos[rec.Topic], rec.Offset+1)
	if rec.Attrs.IsControl() {
		return nil
	}
	if spec := r.m.a.stores[r.store[rec.Topic]]; spec.table && !spec.accepts(rec) {
		return nil // what processing the table's topic would skip (as a restore)
	}
	r.applied++
	return applyStoreChangelog(txn, r.m.a.stores[r.store[rec.Topic]], rec)
}

// step polls once (for at most a commit interval, so that limits are
// refreshed while nothing is fetched: a held table partition is not fetched
// at all), applies what it may, refreshes the table limits when due,
// publishes the positions and lag, and checkpoints when due. An error ends
// the standby (after a fetch error, with a checkpoint of what was applied;
// after an apply error, without: the positions are past what was
// committed). ctx ending is no error: the caller checks it.
func (r *standbyRun) step(ctx context.Context) error {
	a, st, l := r.m.a, r.st, r.l
	pctx, cancel := context.WithTimeout(ctx, a.cfg.commitInterval)
	fetches := r.cl.PollFetches(pctx)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	var ferr error
	fetches.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			ferr = fmt.Errorf("standby %s: fetch %s-%d: %w", st.id, topic, p, err)
		}
	})
	if ferr != nil {
		// Nothing of this poll is applied: the positions are those of
		// the last step, applied and committed.
		if err := r.writeCheckpoint(); err != nil {
			ferr = errors.Join(ferr, fmt.Errorf("standby %s: checkpoint: %w", st.id, err))
		}
		return ferr
	}
	txn := r.db.Begin()
	var applyErr error
	r.applied = 0
	fetches.EachRecord(func(rec *kgo.Record) {
		if applyErr == nil && l.admit(rec) {
			applyErr = r.apply(txn, rec)
		}
	})
	l.pauseHeld()
	if applyErr == nil {
		applyErr = r.refreshLimits(ctx, txn)
	}
	if applyErr == nil {
		// Straight to the database (as a restore): AllowStale queries
		// read it from another goroutine.
		applyErr = txn.CommitThrough()
	}
	txn.Discard()
	if applyErr != nil {
		return fmt.Errorf("standby %s: %w", st.id, applyErr)
	}
	r.m.applied.Add(float64(r.applied))
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		end := a.path.fetchedEnd(p)
		if p.Partition == st.id.partition && end >= 0 {
			r.ends[p.Topic] = end
		}
	})
	var lag int64
	for topic, end := range r.ends {
		lag += max(0, l.applicable(topic, end)-l.pos[topic])
	}
	r.m.lag.WithLabelValues(st.id.String()).Set(float64(lag))
	st.publish(l)
	if now := a.cfg.clock.Now(); now.Sub(r.lastCheckpoint) >= a.cfg.commitInterval {
		r.lastCheckpoint = now
		if err := r.writeCheckpoint(); err != nil {
			return fmt.Errorf("standby %s: %w", st.id, err)
		}
	}
	return nil
}

// refreshLimits reads the group's committed offsets of the table source
// topics every commit interval and applies the records they release to txn.
// On an error reading them the limits stay (logged); the records applied
// before are committed either way (their positions are taken).
func (r *standbyRun) refreshLimits(ctx context.Context, txn *state.Txn) error {
	a := r.m.a
	now := a.cfg.clock.Now()
	if len(r.tables) == 0 || now.Sub(r.lastLimits) < a.cfg.commitInterval {
		return nil
	}
	r.lastLimits = now
	lims, err := r.m.limits(ctx, r.adm, r.st.id.partition, r.tables, false)
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Warn("standby: committed offsets of the table sources; limits unchanged", "err", err)
		}
		return nil
	}
	for _, rec := range r.l.setLimits(lims) {
		if err := r.apply(txn, rec); err != nil {
			return err
		}
	}
	r.l.settle()
	r.l.resumeDrained()
	return nil
}

// publish copies the limiter's positions for readers on other goroutines.
func (st *standbyTask) publish(l *limiter) {
	st.mu.Lock()
	st.pos = maps.Clone(l.pos)
	st.seen = maps.Clone(l.seen)
	st.mu.Unlock()
}

// startPositions returns where st's changelogs are tailed from, and the
// limits of its table source topics (tables). The local checkpoint is used
// if it covers every store, is not past a changelog's end (recreated topic)
// and for a table not past the group's committed offset (a copy ahead of
// it: see standby_limit.go); otherwise the stores are wiped and tailed from
// the start.
func (m *standbyManager) startPositions(ctx context.Context, adm *kadm.Client, db *state.DB, st *standbyTask,
	tables []string,
) (pos, limits map[string]int64, err error) {
	a := m.a
	cp, err := db.Checkpoint()
	if err != nil {
		a.cfg.logger.Warn("standby: unreadable checkpoint; tailing from the start", "task", st.id.String(), "err", err)
		cp = nil
	}
	topics := make([]string, len(st.stores))
	for i, s := range st.stores {
		topics[i] = a.storeChangelog(s)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ends, err := a.path.changelogEnds(lctx, adm, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("standby %s: changelog end offsets: %w", st.id, err)
	}
	limits = map[string]int64{}
	if len(tables) > 0 {
		if limits, err = m.limits(ctx, adm, st.id.partition, tables, true); err != nil {
			return nil, nil, fmt.Errorf("standby %s: %w", st.id, err)
		}
	}
	pos = map[string]int64{}
	full := cp == nil
	for _, s := range st.stores {
		topic := a.storeChangelog(s)
		o, ok := ends.Lookup(topic, st.id.partition)
		if !ok {
			return nil, nil, fmt.Errorf("standby %s: changelog %s-%d: no end offset (no such partition)", st.id, topic, st.id.partition)
		}
		if o.Err != nil {
			return nil, nil, fmt.Errorf("standby %s: changelog %s-%d end offset: %w", st.id, topic, st.id.partition, o.Err)
		}
		c, ok := cp[s.name]
		if !ok || c > o.Offset {
			full = true
		}
		if limit, table := limits[topic]; table && ok && c > limit {
			a.cfg.logger.Warn("standby copy of a table is ahead of the group's committed offset "+
				"(written by an older version, or the offsets were reset); wiping it and tailing from the start",
				"task", st.id.String(), "topic", topic, "checkpoint", c, "committed", limit)
			full = true
		}
		pos[topic] = c
	}
	if full {
		if err := db.Wipe(); err != nil {
			return nil, nil, fmt.Errorf("standby %s: %w", st.id, err)
		}
		for topic := range pos {
			pos[topic] = 0
		}
	}
	a.cfg.logger.Info("standby task started", "task", st.id.String(), "from", pos, "limits", limits, "full", full)
	return pos, limits, nil
}
