package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
	wlog "github.com/weirhq/weir/broker/log"
)

// serveOptions are the settings of weir serve. Every field is a flag, and
// every flag can also come from WEIR_* or the config file (config.go).
type serveOptions struct {
	configFile string

	dataDir           string
	kafkaAddr         string
	advertisedAddr    string
	httpAddr          string
	nodeID            int32
	clusterID         string
	autoCreateTopics  bool
	defaultPartitions int32
	sync              string
	syncInterval      time.Duration
	retentionCheck    time.Duration
	groupInitialDelay time.Duration
	maxRequestBytes   int32
	queuedMaxBytes    int64
	shareLock         time.Duration
	shareLimit        int16
	logLevel          string
	logFormat         string
	shutdownTimeout   time.Duration
	registryAddr      string // registry.go

	authz        authzOptions    // serve_authz.go
	security     securityOptions // serve_security.go
	http         httpOptions     // serve_http.go
	kafkaAddrSet bool            // --kafka-addr or --advertised-addr given (any source)
}

func newServeCmd() *cobra.Command { return newServeCmdFor(&serveOptions{}) }

// newServeCmdFor builds the serve command with its flags bound to o.
func newServeCmdFor(o *serveOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker: Kafka protocol on --kafka-addr, /metrics, /healthz and the admin API on --http-addr",
		Long: `Run weir's single-node Kafka-protocol broker until SIGINT or SIGTERM.

Any Kafka client can connect to --kafka-addr. Data lives in --data-dir and survives
restarts; an acks=all produce is answered only after its data is fsynced (--sync always).
On SIGINT/SIGTERM the broker stops accepting connections, finishes in-flight requests,
fsyncs and closes every log; a second signal exits immediately.

Every flag can also be set with an environment variable (WEIR_ plus the flag name in
upper case, '-' as '_': WEIR_DATA_DIR) or a config file (--config or WEIR_CONFIG): a
JSON object or flat YAML ("data-dir: /var/lib/weir" lines). The command line wins over
the environment, which wins over the file.

The HTTP endpoints (--http-addr and the schema registry) take the Kafka listeners'
credentials: basic auth against the SCRAM users, client certificates (--http-tls), bearer
tokens with OAUTHBEARER; they are required as soon as a listener authenticates its clients
(--http-auth), and the ACLs apply (docs/security.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.load(cmd, os.Getenv); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.configFile, "config", "", "settings file (JSON object or flat YAML); also WEIR_CONFIG")
	f.StringVar(&o.dataDir, "data-dir", "./weir-data", "directory for topics, logs and metadata")
	f.StringVar(&o.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "Kafka protocol listen address (host:port; port 0 picks one)")
	f.StringVar(&o.advertisedAddr, "advertised-addr", "", "host:port clients are told to connect to (default: the listen address)")
	f.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:9644", `HTTP address for /metrics, /healthz and the read-only admin API /v1/ ("" or "off" disables)`)
	f.Int32Var(&o.nodeID, "node-id", 0, "broker node ID")
	f.StringVar(&o.clusterID, "cluster-id", "", "cluster ID used on first start (default: generated); persisted in the data dir")
	f.BoolVar(&o.autoCreateTopics, "auto-create-topics", false, "create unknown topics on metadata/produce requests (auto.create.topics.enable)")
	f.Int32Var(&o.defaultPartitions, "default-partitions", 1, "partitions of auto-created topics and of CreateTopics without a count (num.partitions)")
	f.StringVar(&o.sync, "sync", "always", `fsync policy: "always" (acks=all answered after fsync, group commit) or "interval" (fsync every --sync-interval; not durable)`)
	f.DurationVar(&o.syncInterval, "sync-interval", 0, `fsync period with --sync interval (default: the log's default)`)
	f.DurationVar(&o.retentionCheck, "retention-check-interval", 0, "how often retention is applied (default: the log's default)")
	f.DurationVar(&o.groupInitialDelay, "group-initial-rebalance-delay", 3*time.Second, "how long a new consumer group waits for more members before its first rebalance (group.initial.rebalance.delay.ms; 0 for none)")
	f.Int32Var(&o.maxRequestBytes, "max-request-bytes", broker.DefaultMaxRequestBytes, "largest request frame accepted (socket.request.max.bytes); larger frames close the connection")
	f.Int64Var(&o.queuedMaxBytes, "queued-max-request-bytes", broker.DefaultQueuedMaxRequestBytes, "bytes of large request frames (over 1 MiB) being read across all connections (queued.max.request.bytes); past it the broker stops reading until memory is returned, it does not fail requests")
	f.DurationVar(&o.shareLock, "share-record-lock-duration", 30*time.Second, "how long a share group member holds the records it acquired before they are redelivered (group.share.record.lock.duration.ms; 1s-1h; groups may override it)")
	f.Int16Var(&o.shareLimit, "share-delivery-count-limit", 5, "deliveries of a record to share group members before it is archived (group.share.delivery.count.limit; 2-10; groups may override it)")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.registryAddr, "registry-addr", defaultRegistryAddr, registryAddrUsage)
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "longest a clean shutdown may take before weir gives up waiting")
	o.security.addFlags(f)
	o.authz.addFlags(f)
	o.http.addFlags(f)
	return cmd
}

// load applies the environment and config file to the flags not given on
// the command line, then validates the result.
func (o *serveOptions) load(cmd *cobra.Command, getenv func(string) string) error {
	fs := cmd.Flags()
	if !fs.Changed("config") {
		o.configFile = getenv("WEIR_CONFIG")
	}
	var file map[string]string
	if o.configFile != "" {
		var err error
		if file, err = loadConfigFile(o.configFile); err != nil {
			return err
		}
		o.security.takeListenerSettings(file) // listener.name.* (serve_security.go)
	}
	if err := applySettings(fs, getenv, file, "config"); err != nil {
		return err
	}
	if o.dataDir == "" {
		return errors.New("--data-dir must not be empty")
	}
	o.kafkaAddrSet = fs.Changed("kafka-addr") || fs.Changed("advertised-addr")
	if err := o.security.apply(&broker.Config{}); err != nil {
		return err
	}
	if err := o.http.validate(); err != nil {
		return err
	}
	if _, err := o.syncPolicy(); err != nil {
		return err
	}
	if _, err := o.logger(io.Discard); err != nil {
		return err
	}
	if o.maxRequestBytes <= 0 {
		return fmt.Errorf("--max-request-bytes must be positive, got %d", o.maxRequestBytes)
	}
	if o.queuedMaxBytes <= 0 {
		return fmt.Errorf("--queued-max-request-bytes must be positive, got %d", o.queuedMaxBytes)
	}
	if o.shareLock < time.Second || o.shareLock > time.Hour {
		return fmt.Errorf("--share-record-lock-duration must be between 1s and 1h, got %s", o.shareLock)
	}
	if o.shareLimit < 2 || o.shareLimit > 10 {
		return fmt.Errorf("--share-delivery-count-limit must be between 2 and 10, got %d", o.shareLimit)
	}
	if o.defaultPartitions <= 0 {
		return fmt.Errorf("--default-partitions must be positive, got %d", o.defaultPartitions)
	}
	return nil
}

func (o *serveOptions) syncPolicy() (wlog.SyncPolicy, error) {
	switch strings.ToLower(o.sync) {
	case "always":
		return wlog.SyncAlways, nil
	case "interval":
		return wlog.SyncInterval, nil
	}
	return 0, fmt.Errorf(`--sync must be "always" or "interval", got %q`, o.sync)
}

func (o *serveOptions) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(o.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf(`--log-format must be "text" or "json", got %q`, o.logFormat)
}

// brokerConfig translates the settings into the broker's configuration.
func (o *serveOptions) brokerConfig(logger *slog.Logger, reg prometheus.Registerer) (broker.Config, error) {
	sync, err := o.syncPolicy()
	if err != nil {
		return broker.Config{}, err
	}
	delay := o.groupInitialDelay
	if delay <= 0 {
		delay = -1 // the broker reads 0 as "Kafka's default" and negative as none
	}
	cfg := broker.Config{
		DataDir:                    o.dataDir,
		GroupInitialRebalanceDelay: delay,
		KafkaAddr:                  o.kafkaAddr,
		AdvertisedAddr:             o.advertisedAddr,
		NodeID:                     o.nodeID,
		ClusterID:                  o.clusterID,
		AutoCreateTopics:           o.autoCreateTopics,
		DefaultPartitions:          o.defaultPartitions,
		Sync:                       sync,
		SyncInterval:               o.syncInterval,
		RetentionCheckInterval:     o.retentionCheck,
		MaxRequestBytes:            o.maxRequestBytes,
		QueuedMaxRequestBytes:      o.queuedMaxBytes,
		ShareRecordLockDuration:    o.shareLock,
		ShareDeliveryCountLimit:    o.shareLimit,
		Logger:                     logger,
		Registerer:                 reg,
	}
	if err := o.security.apply(&cfg); err != nil {
		return broker.Config{}, err
	}
	o.authz.apply(&cfg)
	if len(cfg.Listeners) > 0 && o.kafkaAddrSet && logger != nil {
		logger.Warn("--listeners given: --kafka-addr and --advertised-addr are ignored")
	}
	return cfg, nil
}

// run starts the broker and the HTTP server and blocks until ctx is done
// (a signal) or the HTTP server fails, then shuts both down: HTTP first, so
// /healthz reports unavailable while the broker drains, then the broker
// (which fsyncs and marks every log cleanly closed).
func (o *serveOptions) run(ctx context.Context, logOut io.Writer) error {
	logger, err := o.logger(logOut)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	bi := readBuildInfo()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		bi.collector(),
	)
	cfg, err := o.brokerConfig(logger, reg)
	if err != nil {
		return err
	}
	regAddr := o.registryAddr
	if regAddr != "" && regAddr != "off" && cfg.Authorizer != "" {
		// The in-process registry is trusted code of this process; its
		// principal cannot be claimed from the network (serve_http.go).
		cfg.SuperUsers = append(slices.Clone(cfg.SuperUsers), registryPrincipal)
	}
	// Startup (recovery of every log) is bounded by the signal only: a
	// large data dir may take a while, and Ctrl-C must still work.
	b, err := broker.Start(ctx, cfg)
	if err != nil {
		return err
	}

	// Both HTTP fronts authenticate with the listeners' credentials and
	// apply the broker's ACLs (serve_http.go).
	front, err := o.http.front(b, o.http.mode(b.Listeners(), cfg.TLS, cfg.ListenerSecurity))
	if err != nil {
		return errors.Join(err, b.Close())
	}

	// The in-process schema registry talks to the broker over in-process
	// connections as registryPrincipal, whatever the listeners are.
	rs, err := startRegistryServer(ctx, regAddr, regAddr != defaultRegistryAddr && regAddr != "off", []string{b.Addr()}, "_schemas", logger, front,
		kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return b.DialInternal(registryPrincipal) }))
	if err != nil {
		return errors.Join(err, b.Close())
	}
	if rs != nil {
		warnHTTPExposed(logOut, logger, "the schema registry", rs.Addr(), front)
	}

	var healthy atomic.Bool
	healthy.Store(true)
	var srv *http.Server
	httpErr := make(chan error, 1)
	if o.httpAddr != "" && o.httpAddr != "off" {
		ln, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			return errors.Join(fmt.Errorf("http listen: %w", err), rs.Close(), b.Close())
		}
		// The broker's read-only admin API (/v1/..., like Redpanda's on
		// 9644) shares the address with /metrics and /healthz.
		srv = &http.Server{
			Handler:           serveHandler(b, front, newHTTPHandler(reg, &healthy)),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
		go func() { httpErr <- srv.Serve(front.listener(ln)) }()
		logger.Info("http listening", "addr", ln.Addr().String(), "endpoints", "/metrics /healthz /v1/partitions/{topic}",
			"front", frontSummary(front))
		warnHTTPExposed(logOut, logger, "the HTTP API", ln.Addr().String(), front)
	}
	warnExposed(logOut, logger, b.Listeners(), cfg.TLS, cfg.ListenerSecurity)
	logger.Info("weir serving", "kafka_addr", b.Addr(), "listeners", broker.FormatListeners(b.Listeners()),
		"data_dir", o.dataDir, "version", bi.String())

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down (signal again to exit immediately)")
	case err := <-httpErr:
		runErr = fmt.Errorf("http server: %w", err)
		logger.Error("http server failed, shutting down", "err", err)
	}
	healthy.Store(false)

	done := make(chan error, 1)
	go func() {
		var errs []error
		if srv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := srv.Shutdown(sctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			}
			cancel()
		}
		if err := rs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("schema registry close: %w", err))
		}
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker close: %w", err))
		}
		done <- errors.Join(errs...)
	}()
	select {
	case err := <-done:
		if err != nil {
			return errors.Join(runErr, err)
		}
	case <-time.After(o.shutdownTimeout):
		return errors.Join(runErr, fmt.Errorf("shutdown did not finish within %s", o.shutdownTimeout))
	}
	logger.Info("stopped cleanly")
	return runErr
}

// newHTTPHandler serves Prometheus metrics from reg and a health check that
// answers 200 while the broker serves and 503 once shutdown has begun.
func newHTTPHandler(reg *prometheus.Registry, healthy *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "shutting down\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}
