package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/testcerts"
)

// Kafka's property names in the config file set the listeners, TLS and
// SASL; flags for the common case give the same.
func TestServeSecuritySettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "weir.yaml")
	if err := os.WriteFile(file, []byte(`
data-dir: /d
listeners: PLAINTEXT://127.0.0.1:9092,CLIENTS://0.0.0.0:9093
advertised.listeners: CLIENTS://kafka.example.com:9093
listener.security.protocol.map: CLIENTS:SASL_SSL
sasl.enabled.mechanisms: SCRAM-SHA-512,OAUTHBEARER
connections.max.reauth.ms: 3600000
tls-cert: /etc/weir/cert.pem
tls-key: /etc/weir/key.pem
oauth-jwks-file: /etc/weir/jwks.json
oauth-issuer: https://idp
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &serveOptions{}
	cmd := newServeCmdFor(o)
	if err := cmd.ParseFlags([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	if err := o.load(cmd, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.brokerConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []broker.Listener{
		{Name: "PLAINTEXT", Addr: "127.0.0.1:9092", Protocol: broker.Plaintext},
		{Name: "CLIENTS", Addr: "0.0.0.0:9093", Advertised: "kafka.example.com:9093", Protocol: broker.SASLSSL},
	}
	if len(cfg.Listeners) != 2 || cfg.Listeners[0] != want[0] || cfg.Listeners[1] != want[1] {
		t.Fatalf("listeners %+v", cfg.Listeners)
	}
	if cfg.TLS.CertFile != "/etc/weir/cert.pem" || cfg.TLS.KeyFile != "/etc/weir/key.pem" ||
		strings.Join(cfg.SASL.Mechanisms, ",") != "SCRAM-SHA-512,OAUTHBEARER" || cfg.SASL.MaxReauth != time.Hour ||
		cfg.SASL.OAuth.JWKSFile != "/etc/weir/jwks.json" || cfg.SASL.OAuth.Issuer != "https://idp" {
		t.Fatalf("security config %+v %+v", cfg.TLS, cfg.SASL)
	}

	for _, bad := range [][]string{
		{"--listeners", "BOGUS://127.0.0.1:1"},
		{"--advertised-listeners", "PLAINTEXT://x:1"},
		{"--listeners", "PLAINTEXT://127.0.0.1:1", "--listener-security-protocol-map", "X:TLS"},
	} {
		o := &serveOptions{}
		cmd := newServeCmdFor(o)
		if err := cmd.ParseFlags(bad); err != nil {
			t.Fatal(err)
		}
		if err := o.load(cmd, func(string) string { return "" }); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// weir serve warns, on the terminal and in the log, about each listener
// reachable from other machines without authentication, and only those.
func TestWarnExposedListeners(t *testing.T) {
	ls := []broker.Listener{
		{Name: "LOCAL", Addr: "127.0.0.1:9092", Protocol: broker.Plaintext},
		{Name: "LOCAL6", Addr: "[::1]:9092", Protocol: broker.Plaintext},
		{Name: "LOCALHOST", Addr: "localhost:9092", Protocol: broker.Plaintext},
		{Name: "OPEN", Addr: "[::]:9093", Protocol: broker.Plaintext},
		{Name: "LAN", Addr: "10.1.2.3:9093", Protocol: broker.Plaintext},
		{Name: "TLSONLY", Addr: "0.0.0.0:9094", Protocol: broker.SSL},
		{Name: "SASL", Addr: "0.0.0.0:9095", Protocol: broker.SASLSSL},
		{Name: "SASLPT", Addr: "0.0.0.0:9096", Protocol: broker.SASLPlaintext},
	}
	var term, logs bytes.Buffer
	warnExposed(&term, slog.New(slog.NewTextHandler(&logs, nil)), ls, broker.TLSConfig{}, nil)
	for _, name := range []string{"OPEN", "LAN", "TLSONLY"} {
		if !strings.Contains(term.String(), "listener "+name+" ") || !strings.Contains(logs.String(), "listener="+name) {
			t.Errorf("no warning for %s:\n%s\n%s", name, term.String(), logs.String())
		}
	}
	for _, name := range []string{"LOCAL", "LOCAL6", "LOCALHOST", "SASL", "SASLPT"} {
		if strings.Contains(term.String(), "listener "+name+" ") {
			t.Errorf("warning for %s:\n%s", name, term.String())
		}
	}
	if !strings.Contains(term.String(), "WITHOUT AUTHENTICATION") {
		t.Fatalf("banner not loud: %s", term.String())
	}
	// SSL with required client certificates authenticates.
	term.Reset()
	warnExposed(&term, slog.New(slog.DiscardHandler), ls[5:6], broker.TLSConfig{ClientCAFile: "/ca.pem"}, nil)
	if term.Len() != 0 {
		t.Fatalf("warned for mTLS listener: %s", term.String())
	}
}

// startSecureBroker starts a broker with a PLAINTEXT and a SASL_SSL
// listener in dir.
func startSecureBroker(t *testing.T, dir string, ca *testcerts.CA) *broker.Broker {
	t.Helper()
	srv := ca.Server("server")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{
		DataDir: dir, Registerer: prometheus.NewRegistry(), GroupInitialRebalanceDelay: -1,
		Listeners: []broker.Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"}, {Name: "SASL_SSL", Addr: "127.0.0.1:0", Protocol: broker.SASLSSL}},
		TLS:       broker.TLSConfig{CertFile: srv.CertFile, KeyFile: srv.KeyFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// weir user create/list/delete over the protocol, then the client
// commands over SASL_SSL with the user's password; the offline mode
// writes the first user into a stopped broker's data directory.
func TestUserCommandAndSecureClient(t *testing.T) {
	ca := testcerts.NewCA(t, "")
	dir := t.TempDir()
	b := startSecureBroker(t, dir, ca)
	plain := b.ListenerAddr("PLAINTEXT")
	secure := b.ListenerAddr("SASL_SSL")

	mustCLI(t, "pw-Alice-991\n", "user", "create", "alice", "--password-stdin", "-b", plain)
	if out := mustCLI(t, "", "user", "list", "-b", plain); !strings.Contains(out, "alice") || !strings.Contains(out, "SCRAM-SHA-512(8192)") {
		t.Fatalf("list: %s", out)
	}
	t.Setenv("WEIR_SASL_PASSWORD", "pw-Alice-991")
	sec := []string{"-b", secure, "--tls-ca", ca.File, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--timeout", "10s"}
	mustCLI(t, "", append([]string{"topic", "create", "secured", "-p", "2"}, sec...)...)
	if out := mustCLI(t, "", append([]string{"topic", "list"}, sec...)...); !strings.Contains(out, "secured") {
		t.Fatalf("topic list over SASL_SSL: %s", out)
	}
	t.Setenv("WEIR_SASL_PASSWORD", "wrong-pw-55")
	_, errOut, code := runCLI(t, "", append([]string{"topic", "list"}, sec...)...)
	if code == 0 || strings.Contains(errOut, "wrong-pw-55") {
		t.Fatalf("wrong password: exit %d, stderr %s", code, errOut)
	}
	mustCLI(t, "", "user", "delete", "alice", "-b", plain)
	if out := mustCLI(t, "", "user", "list", "-b", plain); strings.Contains(out, "alice") {
		t.Fatalf("alice still listed: %s", out)
	}

	// Offline: the broker is stopped; the user is written into its
	// data directory and logs in after a restart.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEIR_USER_PASSWORD", "pw-Bob-1234")
	mustCLI(t, "", "user", "create", "bob", "--data-dir", dir, "--mechanism", "SCRAM-SHA-256")
	if out := mustCLI(t, "", "user", "list", "--data-dir", dir); !strings.Contains(out, "bob") {
		t.Fatalf("offline list: %s", out)
	}
	b = startSecureBroker(t, dir, ca)
	t.Setenv("WEIR_SASL_PASSWORD", "pw-Bob-1234")
	sec = []string{"-b", b.ListenerAddr("SASL_SSL"), "--tls-ca", ca.File, "--sasl-mechanism", "PLAIN", "--sasl-user", "bob", "--timeout", "10s"}
	if out := mustCLI(t, "", append([]string{"topic", "list"}, sec...)...); !strings.Contains(out, "secured") {
		t.Fatalf("topic list as bob: %s", out)
	}
	// The data directory of a running broker is refused.
	if _, errOut, code := runCLI(t, "", "user", "create", "carol", "--data-dir", dir); code == 0 || !strings.Contains(errOut, "in use") {
		t.Fatalf("offline create on a running broker: exit %d %s", code, errOut)
	}
}

// weir serve as a process with a PLAINTEXT and a SASL_SSL listener: the
// first user is made offline, the client commands work over SASL_SSL with
// it, and loopback listeners draw no exposure warning.
func TestServeSecureListenersProcess(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "")
	srv := ca.Server("server")
	t.Setenv("WEIR_USER_PASSWORD", "pw-Proc-4455")
	mustCLI(t, "", "user", "create", "ops", "--data-dir", dir)
	p := startServe(t, nil, "--data-dir", dir, "--registry-addr", "off",
		"--listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"--tls-cert", srv.CertFile, "--tls-key", srv.KeyFile, "--connections-max-reauth-ms", "60000")
	var secure string
	p.mu.Lock()
	for _, l := range p.lines {
		if l["msg"] == "weir serving" {
			ls, _ := l["listeners"].(string)
			for _, part := range strings.Split(ls, ",") {
				if rest, ok := strings.CutPrefix(part, "SASL_SSL://"); ok {
					secure = rest
				}
			}
		}
	}
	p.mu.Unlock()
	if secure == "" {
		t.Fatalf("no SASL_SSL listener logged:\n%s", p.log())
	}
	t.Setenv("WEIR_SASL_PASSWORD", "pw-Proc-4455")
	sec := []string{"-b", secure, "--tls-ca", ca.File, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "ops", "--timeout", "10s"}
	mustCLI(t, "", append([]string{"topic", "create", "proc-secured"}, sec...)...)
	if out := mustCLI(t, "", append([]string{"topic", "list"}, sec...)...); !strings.Contains(out, "proc-secured") {
		t.Fatalf("topic list: %s", out)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.log())
	}
	if log := p.log(); strings.Contains(log, "WITHOUT AUTHENTICATION") || strings.Contains(log, "pw-Proc-4455") {
		t.Fatalf("unexpected warning or secret in the log:\n%s", log)
	}
}
