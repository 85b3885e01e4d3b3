package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/watermark"
)

// Opt configures an App. Options are applied in order by NewApp and the
// resulting configuration is validated once; a later option overrides an
// earlier one of the same kind.
type Opt interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

// Clock is the processing-time clock of an App: it times commits and retry
// backoff. It never decides event time. Tests inject one to drive time.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done, returning ctx.Err() in that case.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type config struct {
	seeds          []string
	clientOpts     []kgo.Opt
	stateDir       string
	workers        int
	commitInterval time.Duration
	maxAttempts    int
	backoffMin     time.Duration
	backoffMax     time.Duration
	maxPollRecords int
	replication    int16
	logger         *slog.Logger
	registerer     prometheus.Registerer
	clock          Clock
	guarantee      Guarantee
	// commitIntervalSet: CommitInterval was given (else the default depends
	// on the guarantee: see defaultEOSCommitInterval).
	commitIntervalSet bool
	// txnPerRound ends each ExactlyOnce transaction after one processing
	// round (the runtime before transactions spanned the commit interval);
	// benchmarks compare the two.
	txnPerRound bool
	// maxTxnRecords: an ExactlyOnce transaction ends once it holds this
	// many input records (tests lower it).
	maxTxnRecords int
	storeCache    int64       // bytes per task; see StoreCache (cache.go)
	errors        errorConfig // policy.go
	// closeBurst: window closes per operator and round (WindowClosesPerRound).
	closeBurst int
	// checkpointInterval: see defaultCheckpointInterval (tests lower it).
	checkpointInterval time.Duration
	// watermark is the watermark strategy (Watermarks, eventtime.go);
	// markers how often repartition writers send theirs
	// (WatermarkMarkers, eventtime_markers.go).
	watermark watermark.Config
	markers   markerConfig

	// queryable state and standby replicas (query.go, standby.go)
	query           queryConfig
	standbyReplicas int
	cleanupDelay    time.Duration // unused task directories are deleted after it (statecleaner.go)

	// groupInstanceID overrides the App's group.instance.id when
	// groupInstanceIDSet ("" then means dynamic membership); see
	// GroupInstanceID.
	groupInstanceID    string
	groupInstanceIDSet bool

	seams seams
}

// seams are an App's substitutions for tests and the Driver, set only by
// unexported options (the Driver's producer in driver.go, the tests' in
// seams_test.go). The zero value is production.
type seams struct {
	// producer replaces the group client as the tasks' producer (the
	// Driver's log, or a unit test's capture); producerRecycles says it
	// does not keep a record after its promise ran (see recycleRecords).
	producer         func(r *kgo.Record, promise func(*kgo.Record, error))
	producerRecycles bool
	// killed, once it reports true, makes the App stop as a killed process
	// would: nothing more is committed, checkpointed or ended (the group is
	// still left).
	killed func() bool
	// memberUserData replaces the userData the App advertises to the
	// group; onTaskOwners receives every owners table the balancer computes.
	memberUserData []byte
	onTaskOwners   func([]taskOwner)
	// standbyCheckpointed is called by a standby's goroutine with the
	// checkpoint it starts from (zeros after a wipe) and after each
	// checkpoint it writes.
	standbyCheckpointed func(taskID, state.Checkpoint)
	// restoreBatch is called by a restore after each batch of changelog
	// records it committed to the local store, with the records applied so
	// far.
	restoreBatch func(applied int)
}

// killed reports whether a test has killed the App (seams.killed).
func (a *App) killed() bool { return a.cfg.seams.killed != nil && a.cfg.seams.killed() }

func defaultConfig() config {
	return config{
		stateDir:           filepath.Join(os.TempDir(), "weir-stream"),
		workers:            runtime.GOMAXPROCS(0),
		commitInterval:     time.Second,
		maxAttempts:        3,
		backoffMin:         100 * time.Millisecond,
		backoffMax:         5 * time.Second,
		maxPollRecords:     1000,
		replication:        -1,
		logger:             slog.New(slog.DiscardHandler),
		clock:              realClock{},
		guarantee:          AtLeastOnce,
		maxTxnRecords:      defaultMaxTxnRecords,
		storeCache:         defaultStoreCache,
		closeBurst:         defaultCloseBurst,
		checkpointInterval: defaultCheckpointInterval,
		cleanupDelay:       defaultStateCleanupDelay,
		query: queryConfig{client: &http.Client{Timeout: 10 * time.Second,
			Transport: http.DefaultTransport.(*http.Transport).Clone()}},
	}
}

func (c *config) validate() error {
	var errs []error
	if len(c.seeds) == 0 {
		errs = append(errs, errors.New("no seed brokers (use stream.Brokers)"))
	}
	if c.stateDir == "" {
		errs = append(errs, errors.New("empty state directory"))
	}
	if c.workers < 1 {
		errs = append(errs, fmt.Errorf("workers %d < 1", c.workers))
	}
	if c.commitInterval <= 0 {
		errs = append(errs, fmt.Errorf("commit interval %v <= 0", c.commitInterval))
	}
	if c.closeBurst < 1 {
		errs = append(errs, fmt.Errorf("window closes per round %d < 1", c.closeBurst))
	}
	if c.maxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts %d < 1", c.maxAttempts))
	}
	if c.backoffMin < 0 || c.backoffMax < c.backoffMin {
		errs = append(errs, fmt.Errorf("retry backoff [%v, %v] is not a valid range", c.backoffMin, c.backoffMax))
	}
	if c.maxPollRecords < 1 {
		errs = append(errs, fmt.Errorf("max poll records %d < 1", c.maxPollRecords))
	}
	if c.replication == 0 || c.replication < -1 {
		errs = append(errs, fmt.Errorf("replication factor %d: want -1 (broker default) or >= 1", c.replication))
	}
	if c.logger == nil || c.clock == nil {
		errs = append(errs, errors.New("nil logger or clock"))
	}
	if _, err := watermark.New(c.watermark); err != nil {
		errs = append(errs, err)
	}
	if c.markers.interval < 0 {
		errs = append(errs, fmt.Errorf("watermark marker interval %v < 0", c.markers.interval))
	}
	if c.storeCache < 0 {
		errs = append(errs, fmt.Errorf("store cache %d bytes < 0", c.storeCache))
	}
	if c.guarantee != AtLeastOnce && c.guarantee != ExactlyOnce {
		errs = append(errs, fmt.Errorf("%w: delivery guarantee %v", ErrUnsupported, c.guarantee))
	}
	if c.groupInstanceID != "" {
		if err := validTopic(c.groupInstanceID); err != nil {
			errs = append(errs, fmt.Errorf("group instance id: %w", err))
		}
	}
	errs = append(errs, c.validateQuery()...)
	return errors.Join(errs...)
}

// ErrUnsupported is returned by NewApp for a configuration this version does
// not implement yet.
var ErrUnsupported = errors.New("stream: unsupported")

// Brokers sets the seed brokers (host:port) of the Kafka-protocol cluster:
// weir's broker, Kafka or Redpanda. Required.
func Brokers(seeds ...string) Opt {
	return optFunc(func(c *config) { c.seeds = append([]string(nil), seeds...) })
}

// ClientOpts adds franz-go options (TLS, SASL, client id, ...) to every client
// the App creates. Options the App depends on (consumer group, balancer,
// manual commits, partitioner) are applied after these and win. The App's own
// producer defaults, applied before these (so these override them): no
// compression (Kafka's producer default; franz-go's is snappy), because the
// App's outputs and changelog records are small and compressing them costs
// CPU in the App and in the broker that validates every batch; and a linger
// of 100ms (kgo.ProducerLinger; Kafka Streams' linger.ms for its producer,
// franz-go's default is 10ms): fewer, fuller batches, while every commit
// flushes at once, so at-least-once outputs wait at most that long and
// ExactlyOnce outputs (visible at their transaction's commit) no longer.
func ClientOpts(opts ...kgo.Opt) Opt {
	return optFunc(func(c *config) { c.clientOpts = append(c.clientOpts, opts...) })
}

// StateDir sets the directory holding the App's local stores, one
// subdirectory per task. Default: $TMPDIR/weir-stream. The local copy is a
// cache: losing it costs a full restore from the changelogs, never data.
func StateDir(dir string) Opt { return optFunc(func(c *config) { c.stateDir = dir }) }

// Workers sets how many goroutines run tasks. A task always runs on one
// goroutine at a time. Default: GOMAXPROCS.
func Workers(n int) Opt { return optFunc(func(c *config) { c.workers = n }) }

// CommitInterval sets how often input offsets are committed (after every
// output and changelog write is acknowledged). A shorter interval means fewer
// duplicates after a crash and more commit traffic. Under ExactlyOnce it is
// the span of one transaction: outputs become visible to read_committed
// readers at most this long after they are produced. Default: 1s
// at-least-once, 100ms under ExactlyOnce.
//
// Kafka Streams' commit.interval.ms defaults to 30s at-least-once and 100ms
// under exactly_once_v2. weir's exactly-once default is the same; its
// at-least-once default is shorter because a crash replays everything since
// the last commit (duplicates downstream, counts above the truth): 1s bounds
// that to about a second of input, and a commit costs little here — one
// OffsetCommit after a producer flush, the tasks' local checkpoints being
// written at most every 2s whatever the interval (below), where a Kafka
// Streams commit also flushes its caches and checkpoints its stores.
//
// A commit (or transaction end) also writes the tasks' local checkpoints
// (their stores' cached writes go to the local database, synced) when 2s
// passed since the last: a crash replays the changelog written since, up to
// about that much per task, over the local store. Hand-over and shutdown
// always checkpoint. Queries still see every commit (a query has the task
// flush its cached writes after the next commit first).
func CommitInterval(d time.Duration) Opt {
	return optFunc(func(c *config) { c.commitInterval, c.commitIntervalSet = d, true })
}

// MaxAttempts sets how many times a record whose processing fails (returns an
// error or panics) is tried before it goes to the dead-letter topic. Default: 3.
func MaxAttempts(n int) Opt { return optFunc(func(c *config) { c.maxAttempts = n }) }

// RetryBackoff sets the backoff between processing attempts: min after the
// first failure, doubling up to max. Default: 100ms to 5s.
func RetryBackoff(min, max time.Duration) Opt {
	return optFunc(func(c *config) { c.backoffMin, c.backoffMax = min, max })
}

// MaxPollRecords bounds how many records one processing round takes. Default: 1000.
func MaxPollRecords(n int) Opt { return optFunc(func(c *config) { c.maxPollRecords = n }) }

// ReplicationFactor sets the replication factor of the internal topics the App
// creates (changelogs, repartition and dead-letter topics). Default: -1, the
// broker's default.
func ReplicationFactor(n int16) Opt { return optFunc(func(c *config) { c.replication = n }) }

// Logger sets the structured logger. Default: discard.
func Logger(l *slog.Logger) Opt { return optFunc(func(c *config) { c.logger = l }) }

// Registerer sets where the App registers its Prometheus metrics. Default:
// none (metrics are kept but not registered).
func Registerer(r prometheus.Registerer) Opt { return optFunc(func(c *config) { c.registerer = r }) }

// ProcessingClock sets the processing-time clock. Default: the system clock.
func ProcessingClock(clk Clock) Opt { return optFunc(func(c *config) { c.clock = clk }) }

// WithClock is ProcessingClock, its former name (kept for existing code).
func WithClock(clk Clock) Opt { return ProcessingClock(clk) }

// GroupInstanceID sets the App's group.instance.id: its identity as a static
// member of the consumer group (KIP-345). Default: "<app id>-<instance id>",
// the instance id generated at the first start and kept in the StateDir
// (the file <StateDir>/<app id>/instance-id), so every App is a static
// member. Each running instance needs its own id (own StateDir, or its own
// GroupInstanceID): two members with one id fence each other.
//
// A static member that restarts takes its tasks back at once, with no
// rebalance: a process killed (kill -9, OOM, power loss) and restarted
// resumes its tasks as soon as it rejoined, instead of after the dead
// member's session timeout (45s) as a new member would. While it is down
// its tasks wait for it (up to the session timeout; then the group moves
// them). An App that stops (Run returns) leaves the group explicitly, so
// its tasks move to the other instances at once.
//
// "" turns static membership off: every start joins as a new member.
func GroupInstanceID(id string) Opt {
	return optFunc(func(c *config) { c.groupInstanceID, c.groupInstanceIDSet = id, true })
}

// Delivery sets the delivery guarantee. Default: AtLeastOnce. See
// ExactlyOnce for what it costs and requires.
func Delivery(g Guarantee) Opt { return optFunc(func(c *config) { c.guarantee = g }) }

// WithGuarantee is Delivery, its former name (kept for existing code).
func WithGuarantee(g Guarantee) Opt { return Delivery(g) }
