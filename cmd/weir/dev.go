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
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/demo/surge"
	"github.com/weirhq/weir/stream"
)

// defaultDevHTTPAddr is weir dev's --http-addr default, weir serve's.
const defaultDevHTTPAddr = "127.0.0.1:9644"

// devOptions are the flags of weir dev.
type devOptions struct {
	dataDir    string
	kafkaAddr  string
	httpAddr   string
	rate       float64
	duration   time.Duration
	partitions int32
	refresh    time.Duration
	seed       uint64
	plain      bool
	logLevel   string
	registry   string // registry.go
	queryAddr  string
}

func newDevCmd() *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the demo: embedded broker + the surge-pricing stream app + a generator, results live",
		Long: `Run weir doing its main job, with nothing else to install: an embedded broker
(the same as weir serve), the example stream application of
internal/demo/surge (ride requests and driver statuses per zone → a surge price multiplier per zone,
with keyed state, two repartitions and changelogs), and a generator of realistic
JSON events with event timestamps.

It prints the application's delivery guarantees (per topic, with the mechanism),
then a table of the zones that refreshes as results change. Other clients can
connect to --kafka-addr meanwhile, e.g.
  kcat -C -b 127.0.0.1:9092 -t zone-surge -f '%k %s\n'
  weir consume ride-requests -f kv
  weir consume zone-demand -f kv --key-format windowed:string --value-format int64
  weir group describe surge
  weir describe surge
  curl 'http://127.0.0.1:9645/v1/stores/zone-stats/get?key=airport'

Unlike weir serve, dev creates a topic the first time a client produces to it or
asks for it (auto.create.topics.enable, as Redpanda's dev mode), so any client can
start writing at once. Prometheus metrics of the broker and the app are served on
--http-addr (/metrics, /healthz).

Ctrl-C or SIGTERM stops the generator, the app (which commits what it processed)
and the broker. With --duration the demo stops by itself once the app has
processed everything generated. Data stays in --data-dir: run it again and the
counts continue.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", filepath.Join("weir-data", "dev"), `directory for the broker's data ("broker/") and the app's state ("app/"); "" for a temporary one removed at exit`)
	f.StringVar(&o.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "Kafka protocol listen address (port 0 picks one)")
	f.StringVar(&o.httpAddr, "http-addr", defaultDevHTTPAddr, `HTTP address for /metrics and /healthz (port 0 picks one; "" or "off" disables)`)
	f.Float64Var(&o.rate, "rate", 20, "generated events per second (0: no generator; produce to ride-requests and driver-status yourself)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long, once everything generated is processed (0: until interrupted)")
	f.Int32Var(&o.partitions, "partitions", 3, "partitions of the demo's topics when they are created")
	f.DurationVar(&o.refresh, "refresh", time.Second, "how often the table is redrawn (when it changed)")
	f.Uint64Var(&o.seed, "seed", 0, "generator seed (0: from the clock)")
	f.BoolVar(&o.plain, "plain", false, "append each table instead of redrawing in place (automatic when stdout is not a terminal)")
	f.StringVar(&o.registry, "registry-addr", defaultRegistryAddr, registryAddrUsage)
	f.StringVar(&o.queryAddr, "query-addr", defaultDevQueryAddr, `serve the app's query API (GET /v1/stores/..., /v1/describe: what weir describe reads) on this address, behind the broker's HTTP authentication and ACLs ("" or "off": not served)`)
	f.StringVar(&o.logLevel, "log-level", "warn", "log level of the broker and the app (to stderr): debug, info, warn, error")
	return cmd
}

func (o *devOptions) run(ctx context.Context, stdout, stderr io.Writer) (err error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if o.rate < 0 || o.partitions <= 0 || o.refresh <= 0 || o.duration < 0 {
		return errors.New("--rate and --duration must be >= 0, --partitions and --refresh > 0")
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	dir := o.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "weir-dev-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	b, err := broker.Start(ctx, broker.Config{
		DataDir:   filepath.Join(dir, "broker"),
		KafkaAddr: o.kafkaAddr,
		// Topics appear on first use, as in Redpanda's dev mode (serve
		// keeps Kafka's choice of off unless asked).
		AutoCreateTopics: true,
		// The demo's consumers start at once instead of after Kafka's 3s
		// group.initial.rebalance.delay.ms.
		GroupInitialRebalanceDelay: -1,
		Logger:                     logger.With("component", "broker"),
		Registerer:                 reg,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while the broker recovered its data
		}
		if errors.Is(err, broker.ErrDataDirLocked) {
			return fmt.Errorf("start broker: %w (another broker uses --data-dir %s)", err, dir)
		}
		return fmt.Errorf("start broker on %s: %w (another broker there? try --kafka-addr 127.0.0.1:0)", o.kafkaAddr, err)
	}
	defer func() {
		if cerr := b.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("broker close: %w", cerr)
		}
	}()
	metrics := ""
	if o.httpAddr != "" && o.httpAddr != "off" {
		ln, err := net.Listen("tcp", o.httpAddr)
		switch {
		case err != nil && o.httpAddr == defaultDevHTTPAddr:
			// As for the registry: a busy default (a weir serve running)
			// does not stop the demo.
			logger.Warn("metrics not served: the address is busy (set --http-addr, or off)", "addr", o.httpAddr, "err", err)
		case err != nil:
			return fmt.Errorf("http listen on %s: %w (try --http-addr 127.0.0.1:0, or off)", o.httpAddr, err)
		default:
			var healthy atomic.Bool
			healthy.Store(true)
			srv := &http.Server{Handler: newHTTPHandler(reg, &healthy), ReadHeaderTimeout: 10 * time.Second}
			go srv.Serve(ln)
			defer func() {
				healthy.Store(false)
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if serr := srv.Shutdown(sctx); serr != nil && err == nil {
					err = fmt.Errorf("http shutdown: %w", serr)
				}
			}()
			metrics = fmt.Sprintf(", metrics on http://%s/metrics", ln.Addr())
		}
	}
	rs, err := startRegistryServer(ctx, o.registry, o.registry != defaultRegistryAddr, []string{b.Addr()}, "_schemas", logger, nil)
	if err != nil {
		return err
	}
	defer rs.Close()
	fmt.Fprintf(stdout, "weir dev: broker on %s%s, data in %s; topics are created on first use; Ctrl-C stops\n", b.Addr(), metrics, dir)
	fmt.Fprintf(stdout, "  watch it with: kcat -C -b %s -t %s -f '%%k %%s\\n'   or   weir consume %s --brokers %s -f kv\n\n",
		b.Addr(), surge.SurgeTopic, surge.SurgeTopic, b.Addr())

	// The query API goes through the broker's HTTP front, as weir serve's
	// endpoints do (serve_http.go): dev's broker has no users nor
	// authorizer, so requests without credentials are served.
	var appOpts []stream.Opt
	if o.queryAddr != "" && o.queryAddr != "off" && o.queryAddrFree(logger) {
		appOpts = append(appOpts, stream.QueryServer(o.queryAddr),
			stream.QueryMiddleware(queryFront(b, broker.HTTPAuthOptional, surge.AppID, streamChangelog(surge.AppID))))
		fmt.Fprintf(stdout, "  query the app's state: curl http://%s/v1/stores/%s/get?key=airport   describe it: weir describe %s --brokers %s\n\n",
			o.queryAddr, "zone-stats", surge.AppID, b.Addr())
	}

	seed := o.seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	err = surge.RunDemo(ctx, surge.DemoOptions{
		Brokers:    []string{b.Addr()},
		Partitions: o.partitions,
		StateDir:   filepath.Join(dir, "app"),
		Rate:       o.rate,
		Seed:       seed,
		Duration:   o.duration,
		Refresh:    o.refresh,
		Out:        stdout,
		Live:       !o.plain && isTerminal(stdout),
		Logger:     logger.With("component", "app"),
		Registerer: reg,
		AppOpts:    appOpts,
	})
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stdout, "weir dev: stopped")
	}
	return nil
}

// isTerminal reports whether w is a terminal (redrawing in place works).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// defaultDevQueryAddr is where weir dev serves the demo app's query API
// unless told otherwise.
const defaultDevQueryAddr = "127.0.0.1:9645"

// queryAddrFree reports whether the query API's address can be bound. The
// default address being busy (another weir dev) is not an error: the API
// is then not served, as the schema registry is not on its default.
func (o *devOptions) queryAddrFree(logger *slog.Logger) bool {
	if o.queryAddr != defaultDevQueryAddr {
		return true // the App's Run reports an address it cannot bind
	}
	ln, err := net.Listen("tcp", o.queryAddr)
	if err != nil {
		logger.Warn("query API not served: its address is busy (set --query-addr, or off)", "addr", o.queryAddr, "err", err)
		return false
	}
	ln.Close()
	return true
}
