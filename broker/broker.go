// Package broker is weir's Kafka-protocol server: a single-node broker that
// speaks the Apache Kafka wire protocol on top of the storage engine in
// broker/log.
//
// Layout (one file per concern, one file per API key):
//
//	broker.go        Config, Start, Close, the accept loop
//	conn.go          per-connection framing, pipelining, ordered responses
//	apis.go          the API table: each API registers its key, pinned
//	                 version range, handler and connection behaviour
//	order.go         ordering of a connection's requests per object
//	topics.go        topic registry: partitions, IDs, configs, persistence
//	topicconfig.go   topic config definitions, validation, defaults, synonyms
//	fetchsession.go  KIP-227 incremental fetch sessions
//	groups.go        wiring of the group coordinator (broker/group)
//	txns.go          wiring of the transaction coordinator (broker/txn)
//	metrics.go       Prometheus metrics
//	authz.go         authorization hook (ACLs in broker/authz), principal
//	authz_rules.go   the operation/resource each API requires, per API key
//	quota_enforce.go client quota charging, throttling and muting
//	                 (configs and sensors in broker/quota)
//	listener.go      listeners, each with its security protocol and
//	                 advertised address
//	tls.go           TLS of SSL/SASL_SSL listeners, reloaded on change
//	sasl.go          the SASL state machine of SASL listeners' connections
//	listener_security.go  per-listener TLS/SASL overrides (listener.name.*)
//	scram_store.go   SCRAM credentials, durable in the data dir
//	httpauth.go      authentication of the HTTP fronts (basic, mTLS, bearer);
//	authz_http.go    their ACL checks
//	internal_conn.go in-process connections with a principal of their own
//	auth/            server side of PLAIN, SCRAM and OAUTHBEARER
//	NN_name.go       the handler of API key NN, opening with a Behavior list
//
// Concurrency: every request is handled on its own goroutine; a connection
// writes responses strictly in the order the requests arrived. Produce
// requests on one connection append in arrival order per partition, and
// OffsetCommits apply in arrival order per group (order.go).
package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/broker/auth"
	"github.com/weirhq/weir/broker/authz"
	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/broker/quota"
	"github.com/weirhq/weir/broker/share"
	"github.com/weirhq/weir/vfs"
)

// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default (100 MiB).
const DefaultMaxRequestBytes = 100 << 20

// Config configures a Broker. The zero value of every field is a usable
// default; see EnsureDefaults.
type Config struct {
	// DataDir holds the topic registry, the cluster ID and the partition
	// logs. Required.
	DataDir string
	// FS is the file system all storage goes through (default: the OS).
	FS vfs.FS

	// KafkaAddr is the listen address, "127.0.0.1:0" for a random port.
	// Default "127.0.0.1:9092". Used when Listeners is empty: the broker
	// then has one PLAINTEXT listener on KafkaAddr advertised as
	// AdvertisedAddr.
	KafkaAddr string
	// AdvertisedAddr is the host:port returned in Metadata and
	// FindCoordinator; default the listener's address (the host name when
	// listening on all interfaces, as Kafka does).
	AdvertisedAddr string
	// Listeners, when set, replaces KafkaAddr and AdvertisedAddr: one
	// listener per entry, each with its security protocol (listener.go).
	// The first is the one Addr reports and the coordinators advertise to
	// requests that come from none (in-process callers).
	Listeners []Listener
	// TLS is the certificate of the SSL and SASL_SSL listeners (tls.go).
	TLS TLSConfig
	// SASL configures the SASL_PLAINTEXT and SASL_SSL listeners (sasl.go).
	SASL SASLConfig
	// ListenerSecurity overrides TLS and SASL for the named listeners
	// (Kafka's listener.name.<name>.*; listener_security.go).
	ListenerSecurity map[string]ListenerSecurity
	// NodeID is this broker's node ID (default 0).
	NodeID int32
	// ClusterID is used on first start when set; otherwise one is
	// generated. Either way it is persisted and the persisted value wins
	// on later starts.
	ClusterID string

	// AutoCreateTopics creates unknown topics on Metadata/Produce
	// (auto.create.topics.enable); off by default.
	AutoCreateTopics bool
	// DefaultPartitions is num.partitions for auto-created topics and for
	// CreateTopics with NumPartitions -1 (default 1).
	DefaultPartitions int32

	// Sync is the log's fsync policy (default wlog.SyncAlways: an
	// acks=all produce is answered after its data is fsynced).
	Sync         wlog.SyncPolicy
	SyncInterval time.Duration
	// RetentionCheckInterval is how often retention runs (log default when 0).
	RetentionCheckInterval time.Duration
	// CleanerInterval, CleanerBytesPerSec: the log cleaner's period (log
	// default 15s when 0, < 0 disables it) and I/O rate in bytes/s (0: log
	// default 250 MB/s, < 0 unlimited); passed to wlog.ManagerOptions.
	CleanerInterval    time.Duration
	CleanerBytesPerSec int64

	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms:
	// how long a new classic group waits for more members before its
	// first rebalance. 0 means Kafka's default (3s); negative means none
	// (tests, `weir dev`).
	GroupInitialRebalanceDelay time.Duration

	// ShareRecordLockDuration (group.share.record.lock.duration.ms,
	// default 30s), ShareDeliveryCountLimit
	// (group.share.delivery.count.limit, default 5) and ShareMaxRecordLocks
	// (group.share.partition.max.record.locks, default 2000) are the share
	// groups' broker-level settings (KIP-932; broker/share); groups may
	// override the first two with their share.* group configs.
	ShareRecordLockDuration time.Duration
	ShareDeliveryCountLimit int16
	ShareMaxRecordLocks     int

	// MaxRequestBytes is socket.request.max.bytes: a request frame larger
	// than this closes the connection. Default 100 MiB.
	MaxRequestBytes int32
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection with
	// nothing in flight that sends nothing for this long is closed
	// (default 10 minutes, Kafka's; negative: never).
	ConnectionsMaxIdle time.Duration
	// QueuedMaxRequestBytes is queued.max.request.bytes: the bytes of
	// request frames larger than 1 MiB being read, across connections;
	// past it reading stops until frames are read (see readbudget.go).
	// Default DefaultQueuedMaxRequestBytes (Kafka's default is
	// unbounded).
	QueuedMaxRequestBytes int64
	// MaxInFlightPerConn bounds the requests of one connection being
	// handled or waiting to be written (default 128). Reading from the
	// connection pauses while the bound is reached.
	MaxInFlightPerConn int

	// Authorizer is authorizer.class.name: "" (none: every request is
	// allowed and the ACL APIs answer SECURITY_DISABLED) or "acl" (also
	// accepted: Kafka's AclAuthorizer and StandardAuthorizer class names),
	// which enforces the ACLs stored in the data directory on every
	// request (authz_rules.go).
	Authorizer string
	// SuperUsers is super.users: principals ("User:name") allowed every
	// operation.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found: a
	// resource no ACL matches is open to everyone (default false).
	AllowEveryoneIfNoACLFound bool

	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time

	// principalForTest, if set, names the principal of a request from its
	// client id (empty: the connection's own). Tests only: it lets a test
	// act as several principals without authentication.
	principalForTest func(clientID string) string
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.KafkaAddr == "" {
		c.KafkaAddr = "127.0.0.1:9092"
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 1
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.ConnectionsMaxIdle == 0 {
		c.ConnectionsMaxIdle = 10 * time.Minute
	}
	if c.QueuedMaxRequestBytes <= 0 {
		c.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if c.MaxInFlightPerConn <= 0 {
		c.MaxInFlightPerConn = 128
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("broker: Config.DataDir is required")
	}
	if c.NodeID < 0 {
		return fmt.Errorf("broker: Config.NodeID %d is negative", c.NodeID)
	}
	if _, err := authorizerEnabled(c.Authorizer); err != nil {
		return err
	}
	return nil
}

// Broker is a running single-node Kafka-protocol broker. Its methods are
// safe for concurrent use.
type Broker struct {
	cfg    Config
	logger *slog.Logger

	ln        net.Listener // the first listener's
	host      string       // advertised by the first listener
	port      int32
	listeners []*listener
	tlsReload *tlsReloader // nil without TLS listeners

	scram       *scramStore             // SCRAM credentials (scram_store.go)
	jwt         *auth.JWTConfig         // OAUTHBEARER validation; nil if not configured
	saslMechs   []string                // enabled SASL mechanisms
	lisSASL     map[string]listenerSASL // per-listener overrides, by name (listener_security.go)
	scramSecret []byte                  // keys the decoy salts of unknown SCRAM users (scram_decoy.go)

	clusterID string
	logs      *wlog.Manager
	topics    *registry
	sessions  *fetchSessions
	groups    groupHandler
	shares    *share.Coordinator
	txns      txnHandler
	metrics   *metrics
	frames    framePool
	reading   *readBudget       // memory of frames being read (readbudget.go)
	authz     *authz.Authorizer // nil: no authorizer, every request allowed
	quotas    *quota.Store      // client quota configs (quota_enforce.go)
	sensors   *quota.Sensors
	lock      *dataDirLock // held from Start to the end of Close

	ctx    context.Context // canceled by Close: long polls return
	cancel context.CancelFunc

	mu      sync.Mutex
	conns   map[*conn]struct{}
	closing bool
	wg      sync.WaitGroup // accept loop and connections

	closeOnce sync.Once
	closeErr  error

	// panics counts requests that panicked (recovered, connection
	// closed); always 0 unless there is a bug. Tests and fuzzing assert it.
	panics atomic.Int64
}

// Start locks the data directory (ErrDataDirLocked, naming the holder, when
// another broker has it), recovers the topics and their logs, and starts
// listening. The broker is accepting connections when Start returns.
// ctx bounds only the startup; use Close to stop the broker.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &Broker{
		cfg:    cfg,
		logger: cfg.Logger.With("component", "broker"),
		conns:  make(map[*conn]struct{}),
	}
	b.reading = newReadBudget(cfg.QueuedMaxRequestBytes)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.sessions = newFetchSessions(1000)

	if err := vfs.MkdirAllDurable(cfg.FS, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("broker: create data dir: %w", err)
	}
	lock, err := lockDataDir(cfg.FS, cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b.lock = lock
	logs, err := wlog.OpenManager(wlog.ManagerOptions{
		FS:                     cfg.FS,
		Dir:                    logsDir(cfg.DataDir),
		Sync:                   cfg.Sync,
		SyncInterval:           cfg.SyncInterval,
		RetentionCheckInterval: cfg.RetentionCheckInterval,
		CleanerInterval:        cfg.CleanerInterval,
		CleanerBytesPerSec:     cfg.CleanerBytesPerSec,
		Now:                    cfg.Now,
		Logger:                 cfg.Logger,
	})
	if err != nil {
		_ = lock.release()
		return nil, fmt.Errorf("broker: open logs: %w", err)
	}
	b.logs = logs
	fail := func(err error) (*Broker, error) {
		if b.txns != nil {
			_ = b.txns.Close()
		}
		if b.groups != nil {
			_ = b.groups.Close()
		}
		if b.shares != nil {
			_ = b.shares.Close()
		}
		b.metrics.unregister() // nil-safe
		_ = b.logs.Close()
		_ = b.lock.release()
		b.cancel()
		return nil, err
	}

	b.topics, err = openRegistry(cfg.FS, cfg.DataDir, logs, cfg.Logger)
	if err != nil {
		return fail(fmt.Errorf("broker: %w", err))
	}
	b.clusterID, err = b.topics.ensureClusterID(cfg.ClusterID)
	if err != nil {
		return fail(fmt.Errorf("broker: %w", err))
	}
	if err := b.openSecurity(); err != nil { // authz.go, quota_enforce.go
		return fail(fmt.Errorf("broker: %w", err))
	}
	b.metrics = newMetrics(cfg.Registerer, b)
	b.scram, err = openScramStore(cfg.FS, cfg.DataDir)
	if err != nil {
		return fail(fmt.Errorf("broker: %w", err))
	}
	if err := b.saslSetup(ctx); err != nil {
		return fail(fmt.Errorf("broker: %w", err))
	}

	lcfgs, err := b.cfg.effectiveListeners()
	if err != nil {
		return fail(fmt.Errorf("broker: %w", err))
	}
	closeListeners := func() {
		for _, l := range b.listeners {
			l.ln.Close()
		}
	}
	if err := b.resolveListenerSecurity(lcfgs); err != nil {
		return fail(fmt.Errorf("broker: %w", err))
	}
	for _, lc := range lcfgs {
		var tcfg *tls.Config
		if lc.Protocol.TLS() {
			if tcfg, err = b.listenerTLS(lc); err != nil {
				closeListeners()
				return fail(fmt.Errorf("broker: listener %s: %w", lc.Name, err))
			}
		}
		l, err := b.openListener(lc, tcfg)
		if err != nil {
			closeListeners()
			return fail(fmt.Errorf("broker: %w", err))
		}
		b.listeners = append(b.listeners, l)
	}
	first := b.listeners[0]
	b.ln, b.host, b.port = first.ln, first.host, first.port
	ln := b.ln
	adv := net.JoinHostPort(b.host, strconv.Itoa(int(b.port)))
	if err := b.lock.setHolder(ln.Addr().String()); err != nil {
		closeListeners()
		return fail(fmt.Errorf("broker: %w", err))
	}

	// The group coordinator needs the advertised address, so it is built
	// once the listener is up.
	if err := b.startGroups(); err != nil {
		closeListeners()
		return fail(fmt.Errorf("broker: %w", err))
	}
	if err := b.startTxns(); err != nil {
		closeListeners()
		return fail(fmt.Errorf("broker: %w", err))
	}
	if err := b.startShares(); err != nil {
		ln.Close()
		return fail(fmt.Errorf("broker: %w", err))
	}

	for _, l := range b.listeners {
		b.wg.Add(1)
		go b.acceptLoop(l)
	}
	b.logger.Info("broker started", "addr", ln.Addr().String(), "advertised", adv,
		"listeners", FormatListeners(b.Listeners()),
		"cluster_id", b.clusterID, "node_id", cfg.NodeID, "data_dir", cfg.DataDir)
	return b, nil
}

// Addr is the address the broker listens on (host:port).
func (b *Broker) Addr() string { return b.ln.Addr().String() }

// ClusterID is the persisted cluster ID.
func (b *Broker) ClusterID() string { return b.clusterID }

// Close stops the broker gracefully: it stops accepting connections and
// reading requests, lets in-flight requests finish (long polls return
// early with what they have), writes their responses, then closes the group
// coordinator and the logs (fsync and clean-shutdown marker), and releases
// the data directory's lock. It is safe to call more than once.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closing = true
		conns := make([]*conn, 0, len(b.conns))
		for c := range b.conns {
			conns = append(conns, c)
		}
		b.mu.Unlock()

		var errs []error
		for _, l := range b.listeners {
			errs = append(errs, l.ln.Close())
		}
		b.cancel()
		for _, c := range conns {
			c.stopReading()
		}
		b.wg.Wait()
		if b.txns != nil {
			errs = append(errs, b.txns.Close())
		}
		if b.groups != nil {
			errs = append(errs, b.groups.Close())
		}
		if b.shares != nil {
			errs = append(errs, b.shares.Close())
		}
		errs = append(errs, b.logs.Close())
		// The lock goes last: another broker may open the directory as
		// soon as it is released.
		errs = append(errs, b.lock.release())
		b.metrics.unregister()
		b.closeErr = errors.Join(errs...)
		b.logger.Info("broker stopped")
	})
	return b.closeErr
}

func (b *Broker) acceptLoop(l *listener) {
	defer b.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE...) must not spin the CPU.
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff < time.Second {
				backoff *= 2
			}
			b.logger.Warn("accept failed", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-b.ctx.Done():
				return
			}
		}
		backoff = 0
		if l.tls != nil {
			nc = tls.Server(newTLSWire(nc), l.tls)
		}
		c := newConn(b, nc)
		c.lis = l
		if l.Protocol.SASL() {
			c.sasl = &saslConn{}
		}
		if !b.track(c) {
			return
		}
	}
}

// track registers c and serves it on its own goroutine until it ends. It
// returns false, closing c's socket, when the broker is closing.
func (b *Broker) track(c *conn) bool {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		c.nc.Close()
		return false
	}
	b.conns[c] = struct{}{}
	b.wg.Add(1)
	b.mu.Unlock()
	b.metrics.connections.Inc()
	go func() {
		defer b.wg.Done()
		if c.handshake() {
			c.serve()
		} else {
			c.cancel()
			c.nc.Close()
		}
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		b.metrics.connections.Dec()
	}()
	return true
}

// advertisedHost is the host to advertise for a listener on host: itself,
// or for an unspecified address (0.0.0.0, ::), which clients cannot connect
// to, the machine's host name (as Kafka without advertised.listeners), or
// 127.0.0.1 if that is unknown.
func advertisedHost(host string, hostname func() (string, error)) string {
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return host
	}
	if h, err := hostname(); err == nil && h != "" {
		return h
	}
	return "127.0.0.1"
}

func newClusterID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

func newUUID() [16]byte {
	var u [16]byte
	for {
		_, _ = rand.Read(u[:])
		// The all-zero UUID means "no ID" on the wire and Kafka reserves
		// the metadata topic ID; neither comes out of 16 random bytes in
		// practice, but the loop makes that a guarantee.
		if u != ([16]byte{}) {
			return u
		}
	}
}
