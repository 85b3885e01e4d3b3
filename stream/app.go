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
	"github.com/twmb/franz-go/pkg/kgo"
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
// Delivery is at-least-once by default: input offsets are committed only
// after every output, repartition, changelog and dead-letter record produced
// from the records below them is acknowledged by the cluster (acks=all,
// idempotent producer). A crash after an acknowledgement and before the
// commit replays the uncommitted input, so outputs may hold duplicates and
// counts may exceed the true counts; nothing is lost. With
// Delivery(ExactlyOnce) the outputs, changelog writes and input offsets
// of each commit interval are one Kafka transaction instead, and stores and
// read_committed readers see each record's effects exactly once (see
// ExactlyOnce).
//
// An App's methods are safe for concurrent use; Run may be called once.
type App struct {
	id      string
	b       *Builder
	cfg     config
	metrics *metrics
	// path is what the App does differently under its delivery guarantee
	// (path_alo.go, path_eos.go): the round, commit and rebalance phases.
	path guaranteePath

	sources map[string]*sourceNode // by resolved topic
	stores  map[string]*storeSpec
	subs    []*subTopology
	subOf   []int // source index -> sub-topology index
	// partitions of the topics checked or created at start (set by
	// setupTopics before the group is joined; read-only after).
	partitions map[string]int32

	// cl is the current group session's client (under ExactlyOnce the
	// transact session's).
	cl  *kgo.Client
	adm *kadm.Client
	// producer hands a record to the client (cl.Produce), or to the
	// Driver's log (seams.producer).
	producer func(r *kgo.Record, promise func(*kgo.Record, error))
	// recycleRecords: producer does not use a record after its promise
	// ran, so tasks may reuse it (task.recycle). Set with producer, before
	// any task exists.
	recycleRecords atomic.Bool
	// rebalance signals a group rebalance waiting for the loop.
	rebalance rebalanceSignal
	// maxEventTime is the largest stream time of the App's tasks (ms, 0:
	// none yet): the timestamp of a marker whose writer saw no record
	// (eventtime_markers.go).
	maxEventTime atomic.Int64
	// globals is the instance's replica of its global tables, while Run
	// runs (globaltable.go).
	globals atomic.Pointer[globalState]

	mu       sync.Mutex
	tasks    map[taskID]*task
	assigned map[taskID]bool // assigned by the group, task not created yet

	fatalMu sync.Mutex
	fatal   error
	failed  atomic.Bool // fatal != nil, for the per-record check

	// memberUserData is advertised to the group in this member's
	// metadata (where this instance answers queries, for the group view;
	// see taskBalancer). Set before the first session.
	memberUserData []byte
	ownersMu       sync.Mutex
	owners         []taskOwner // the owners table of the latest assignment

	running atomic.Bool
	// flushRequests counts tasks whose queries wait for a flush of their
	// store cache (task.awaitFlush); the loop serves them between rounds.
	flushRequests atomic.Int32

	// bounded is the state of a bounded run (RunBounded; nil: Run).
	bounded *boundedRun

	query    *queryState     // queryable state (query.go)
	standbys *standbyManager // standby replicas (standby.go)
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
		stores: map[string]*storeSpec{}, tasks: map[taskID]*task{}, assigned: map[taskID]bool{},
		memberUserData: cfg.seams.memberUserData}
	a.path = newGuaranteePath(a)
	if p := cfg.seams.producer; p != nil {
		a.producer = p
		a.recycleRecords.Store(cfg.seams.producerRecycles)
	}
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
func (a *App) Run(ctx context.Context) (err error) { return a.run(ctx, nil) }

// run is Run, bounded if b is not nil (RunBounded).
func (a *App) run(ctx context.Context, b *boundedRun) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("stream: App.Run called twice")
	}
	a.bounded = b
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
	// Global tables are restored before anything is processed.
	stopGlobals, err := a.startGlobals(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("stream: app %s: %w", a.id, err)
	}
	defer stopGlobals()
	for {
		err := a.session(ctx)
		if err != nil && ctx.Err() == nil && a.path.rejoin(err) {
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
	if a.memberUserData == nil {
		// Where this instance answers queries, for the group view.
		a.memberUserData = a.advertisedUserData()
	}
	instance, err := a.groupInstanceID()
	if err != nil {
		return err
	}
	cl, err := a.path.connect(ctx, a.groupOpts(instance))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.cl = cl
	a.adm = kadm.NewClient(cl)
	a.recycleRecords.Store(true)
	a.producer = func(r *kgo.Record, promise func(*kgo.Record, error)) {
		// Not the Run context: records handed over before shutdown must
		// still be sent by the final flush.
		cl.Produce(context.Background(), r, promise)
	}
	a.standbys.start(ctx)
	stopQuerySession := a.startQuerySession(ctx, cl)
	if a.bounded != nil {
		err = a.boundedLoop(ctx)
	} else {
		err = a.loop(ctx)
	}
	stopQuerySession()
	a.shutdown(err)
	if instance != "" {
		a.leaveGroup(instance)
	}
	return err
}

// groupOpts are the options of a session's group client under either
// guarantee: the App's subscription, its static membership (instance, ""
// for none), balancer and rebalance callbacks, manual commits, and its
// partitioner.
func (a *App) groupOpts(instance string) []kgo.Opt {
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
	markers := map[string]bool{}
	for _, topic := range a.repartitionTopics() {
		markers[topic] = true
	}
	var static []kgo.Opt
	if instance != "" {
		static = append(static, kgo.InstanceID(instance))
	}
	return a.clientOpts(append(static,
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
		kgo.RecordPartitioner(appPartitioner{manual: manual, markers: markers, byKey: kgo.StickyKeyPartitioner(nil)}),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)...)
}

// appPartitioner sends changelog records to the partition set on the record
// (the task's partition) and everything else by key: murmur2 of the key
// bytes, as Java clients do, so a repartition topic is partitioned exactly as
// Kafka Streams would partition it.
// A repartition topic's watermark markers go to the partition set on them.
type appPartitioner struct {
	manual  map[string]bool
	markers map[string]bool // repartition topics
	byKey   kgo.Partitioner
}

func (p appPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.manual[topic] {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	if p.markers[topic] {
		return markerPartitioner{byKey: p.byKey.ForTopic(topic)}
	}
	return p.byKey.ForTopic(topic)
}
