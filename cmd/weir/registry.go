package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/auth"
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
	// auth is the standalone registry's cluster authentication (nil in
	// weir serve, whose broker authenticates).
	auth *registry.ClusterAuth
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
	if rs.auth != nil {
		rs.auth.Close()
	}
	return errors.Join(err, rs.reg.Close())
}

// newRegistryCmd is weir registry: the schema registry alone, against any
// Kafka-compatible cluster.
func newRegistryCmd() *cobra.Command {
	var (
		addr, topic, logLevel string
		hf                    registryHTTPFlags
	)
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Run a Confluent-compatible schema registry against any Kafka-compatible cluster",
		Long: `Run weir's schema registry (the Confluent Schema Registry REST API v1) against the
cluster at --brokers, with its state in the compacted topic --topic (created if missing).
Several registries may share a cluster: each takes over writing when it writes (see the
registry package doc), and all serve reads from the topic. The registry's own connection
uses the --tls-* and --sasl-* flags.

Its REST API authenticates and authorizes with the cluster's users and ACLs; the registry
keeps no credentials of its own:
  - basic auth (user:password) is checked by logging in to the cluster as that user with
    --http-auth-mechanism (SCRAM-SHA-512 by default, SCRAM-SHA-256 or PLAIN);
  - a bearer token by logging in with OAUTHBEARER;
  - a client certificate (--http-tls-client-ca) is the principal User:<subject>, as on a
    Kafka SSL listener; its ACLs are listed with DescribeAcls over the registry's own
    connection (which then needs DESCRIBE on the cluster), --http-super-users standing for
    the cluster's super.users.
A subject is authorized as its topic (orders-value: topic orders): reading a subject takes
DESCRIBE on the topic, registering WRITE, deleting DELETE, its compatibility level
DESCRIBE_CONFIGS (or DESCRIBE) to read and ALTER_CONFIGS to change; the global level the
same on the cluster. The registry asks the cluster what the user may do (KIP-430
authorized operations over the user's own connection). Logins and answers are cached for
--http-auth-cache-ttl; a user's failed login makes their next new attempt wait (1s,
doubling up to a minute). Missing or wrong credentials get 401, a missing ACL 403
(error_code 40301).

--http-auth required (the default when the registry's own connection authenticates:
--sasl-mechanism or --tls-cert) refuses requests without credentials; optional serves them
as User:ANONYMOUS, asking the cluster over a connection without SASL.

weir serve and weir dev already serve one on 127.0.0.1:8081 beside their broker.`,
		Args: cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&addr, "listen", defaultRegistryAddr, "HTTP listen address")
	f.StringVar(&topic, "topic", registry.DefaultTopic, "topic holding the schemas")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	hf.addFlags(f)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var level slog.Level
		if err := level.UnmarshalText([]byte(logLevel)); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
		if err := hf.validate(); err != nil {
			return err
		}
		logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
		return runRegistry(cmd.Context(), addr, cf, &hf, topic, logger, cmd.OutOrStdout())
	}
	return cmd
}

func runRegistry(ctx context.Context, addr string, cf *clientFlags, hf *registryHTTPFlags, topic string, logger *slog.Logger, out io.Writer) error {
	if addr == "" || addr == "off" {
		return errors.New("--listen is required")
	}
	if cf.sec == nil {
		cf.sec = &clientSecurity{}
	}
	own, err := cf.sec.kgoOpts()
	if err != nil {
		return err
	}
	front, ca, err := hf.front(cf, own, logger)
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, cf.timeout)
	rs, err := startRegistryServer(startCtx, addr, true, cf.brokers, topic, logger, front, own...)
	cancel()
	if err != nil {
		ca.Close()
		return err
	}
	rs.auth = ca
	warnHTTPExposed(out, logger, "the schema registry", addr, front)
	fmt.Fprintf(out, "weir registry: serving %s://%s (topic %s on %v; %s); Ctrl-C stops\n", front.scheme(), rs.Addr(), topic, cf.brokers, frontSummary(front))
	<-ctx.Done()
	return rs.Close()
}

// registryHTTPFlags are weir registry's settings of its REST API's
// security: weir serve's --http-auth and --http-client-auth
// (httpOptions), its own certificate (weir serve's front uses the broker's)
// and how it checks credentials against the cluster.
type registryHTTPFlags struct {
	httpOptions
	tlsCert, tlsKey, tlsClientCA string
	mechanism                    string
	cacheTTL                     time.Duration
	superUsers                   []string
}

func (h *registryHTTPFlags) addFlags(f *pflag.FlagSet) {
	f.StringVar(&h.auth, "http-auth", "", `"required": every request authenticates (basic auth, a bearer token or a client certificate), else 401; "optional": requests without credentials are User:ANONYMOUS. Default: required when the registry's own connection authenticates (--sasl-mechanism or --tls-cert), else optional`)
	f.StringVar(&h.tlsCert, "http-tls-cert", "", "PEM certificate (chain): serve HTTPS (reloaded when the files change)")
	f.StringVar(&h.tlsKey, "http-tls-key", "", "PEM private key of --http-tls-cert")
	f.StringVar(&h.tlsClientCA, "http-tls-client-ca", "", "PEM CA bundle client certificates are verified against (mTLS; principal User:<subject>)")
	f.StringVar(&h.clientAuth, "http-client-auth", "", `client certificates: "requested" (default with --http-tls-client-ca: verified when presented, so basic auth and mTLS clients share the port), "required" or "none"`)
	f.StringVar(&h.mechanism, "http-auth-mechanism", "", "SASL mechanism basic-auth credentials are checked with against the cluster: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN (default: --sasl-mechanism when it is one of them, else SCRAM-SHA-512)")
	f.DurationVar(&h.cacheTTL, "http-auth-cache-ttl", 30*time.Second, "how long a login (successful or not) and the operations the cluster allows it are cached")
	f.StringSliceVar(&h.superUsers, "http-super-users", nil, "the cluster's super.users (User:name,...), for client-certificate principals, whose ACLs the registry evaluates itself")
}

func (h *registryHTTPFlags) validate() error {
	h.tls = h.tlsCert != "" || h.tlsKey != ""
	if h.tls && (h.tlsCert == "" || h.tlsKey == "") {
		return errors.New("--http-tls-cert and --http-tls-key go together")
	}
	if h.tlsClientCA != "" && !h.tls {
		return errors.New("--http-tls-client-ca needs --http-tls-cert and --http-tls-key")
	}
	if h.clientAuth != "" && h.clientAuth != "none" && h.tlsClientCA == "" {
		return fmt.Errorf("--http-client-auth %s needs --http-tls-client-ca", h.clientAuth)
	}
	switch strings.ToUpper(h.mechanism) {
	case "", auth.Plain, auth.ScramSHA256, auth.ScramSHA512:
	default:
		return fmt.Errorf("--http-auth-mechanism %q: want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN", h.mechanism)
	}
	if err := h.httpOptions.validate(); err != nil {
		return fmt.Errorf("%w (--http-tls-cert serves HTTPS)", err)
	}
	return nil
}

// front is the registry's HTTP front: TLS, and authentication and ACLs by
// the cluster. own are the registry's own connection options (its SASL or
// client certificate), used only to list the ACLs of mTLS principals.
func (h *registryHTTPFlags) front(cf *clientFlags, own []kgo.Opt, logger *slog.Logger) (*httpFront, *registry.ClusterAuth, error) {
	sec := cf.sec
	mode := broker.HTTPAuthOptional
	if sec.saslMechanism != "" || sec.tlsCert != "" {
		mode = broker.HTTPAuthRequired
	}
	if h.auth != "" {
		mode, _ = broker.ParseHTTPAuthMode(h.auth) // validated
	}
	mech := strings.ToUpper(h.mechanism)
	if m := strings.ToUpper(sec.saslMechanism); mech == "" && (m == auth.Plain || m == auth.ScramSHA256 || m == auth.ScramSHA512) {
		mech = m
	}
	// The logins' connections: the registry's TLS settings without its
	// client certificate or SASL, which would make every login the
	// registry's own principal.
	loginSec := clientSecurity{tls: sec.tls || sec.tlsCA != "" || sec.tlsCert != "", tlsCA: sec.tlsCA}
	loginOpts, err := loginSec.kgoOpts()
	if err != nil {
		return nil, nil, err
	}
	var aclOpts []kgo.Opt
	if h.tlsClientCA != "" {
		aclOpts = append([]kgo.Opt{}, own...)
	}
	ca, err := registry.NewClusterAuth(registry.ClusterAuthConfig{
		Brokers: cf.brokers, ClientOpts: loginOpts, ACLClientOpts: aclOpts, SuperUsers: h.superUsers,
		Mechanism: mech, Required: mode == broker.HTTPAuthRequired, TTL: h.cacheTTL, Timeout: cf.timeout,
		Logger: logger.With("component", "registry-auth"),
	})
	if err != nil {
		return nil, nil, err
	}
	f := &httpFront{mode: mode, authorizer: ca.Authorizer(), wrap: ca.Middleware}
	if h.tls {
		c, err := broker.NewHTTPTLSConfig(broker.TLSConfig{CertFile: h.tlsCert, KeyFile: h.tlsKey, ClientCAFile: h.tlsClientCA},
			h.clientAuth, logger)
		if err != nil {
			ca.Close()
			return nil, nil, fmt.Errorf("--http-tls-cert: %w", err)
		}
		f.tls = c
	}
	return f, ca, nil
}
