package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/registry"
)

// defaultRegistryAddr is where weir serve and weir dev serve the schema
// registry unless told otherwise (the Confluent Schema Registry's port).
const defaultRegistryAddr = "127.0.0.1:8081"

const registryAddrUsage = `schema registry listen address (Confluent REST API; "" or "off" disables)`

// registryServer is a schema registry served over HTTP.
type registryServer struct {
	reg *registry.Registry
	srv *http.Server
	ln  net.Listener
}

// startRegistryServer starts a schema registry on the cluster at brokers and
// serves it on addr; "" or "off" starts nothing (nil, nil). When the address
// is busy and required is false (the flag was left at its default), it logs
// why and starts nothing, so a second local broker still starts. front (nil:
// plain HTTP, no authentication) is weir serve's TLS, authentication and
// ACLs (serve_http.go); clientOpts are added to the registry's Kafka
// clients.
func startRegistryServer(ctx context.Context, addr string, required bool, brokers []string, topic string, logger *slog.Logger, front *httpFront, clientOpts ...kgo.Opt) (*registryServer, error) {
	if addr == "" || addr == "off" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if !required {
			logger.Warn("schema registry not started: its address is busy (set --registry-addr, or off)", "addr", addr, "err", err)
			return nil, nil
		}
		return nil, fmt.Errorf("schema registry listen on %s: %w", addr, err)
	}
	rcfg := registry.Config{Brokers: brokers, Topic: topic, Logger: logger.With("component", "registry"), ClientOpts: clientOpts}
	if front != nil {
		rcfg.Authorizer = front.authorizer
	}
	reg, err := registry.Start(ctx, rcfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	rs := &registryServer{reg: reg, ln: ln, srv: &http.Server{
		Handler:           front.handler(reg.Handler()),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}}
	go func() {
		if err := rs.srv.Serve(front.listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("schema registry http server failed", "err", err)
		}
	}()
	logger.Info("schema registry listening", "addr", ln.Addr().String(), "topic", topic, "scheme", front.scheme())
	return rs, nil
}

// Addr is the address the registry listens on.
func (rs *registryServer) Addr() string { return rs.ln.Addr().String() }

// Close stops serving (in-flight requests get 5 s) and stops the registry.
// A nil registryServer is a no-op.
func (rs *registryServer) Close() error {
	if rs == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := rs.srv.Shutdown(ctx)
	return errors.Join(err, rs.reg.Close())
}

// newRegistryCmd is weir registry: the schema registry alone, against any
// Kafka-compatible cluster.
func newRegistryCmd() *cobra.Command {
	var (
		addr, topic, logLevel string
	)
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Run a Confluent-compatible schema registry against any Kafka-compatible cluster",
		Long: `Run weir's schema registry (the Confluent Schema Registry REST API v1) against the
cluster at --brokers, with its state in the compacted topic --topic (created if missing).
Several registries may share a cluster: each takes over writing when it writes (see the
registry package doc), and all serve reads from the topic.

weir serve and weir dev already serve one on 127.0.0.1:8081 beside their broker.`,
		Args: cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&addr, "listen", defaultRegistryAddr, "HTTP listen address")
	f.StringVar(&topic, "topic", registry.DefaultTopic, "topic holding the schemas")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var level slog.Level
		if err := level.UnmarshalText([]byte(logLevel)); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
		logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
		return runRegistry(cmd.Context(), addr, cf, topic, logger, cmd.OutOrStdout())
	}
	return cmd
}

func runRegistry(ctx context.Context, addr string, cf *clientFlags, topic string, logger *slog.Logger, out io.Writer) error {
	if addr == "" || addr == "off" {
		return errors.New("--listen is required")
	}
	startCtx, cancel := context.WithTimeout(ctx, cf.timeout)
	rs, err := startRegistryServer(startCtx, addr, true, cf.brokers, topic, logger, nil)
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "weir registry: serving http://%s (topic %s on %v); Ctrl-C stops\n", rs.Addr(), topic, cf.brokers)
	<-ctx.Done()
	return rs.Close()
}
