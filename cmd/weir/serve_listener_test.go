package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
)

// Kafka's listener.name.<name>.* keys in the config file override the
// TLS and SASL settings of one listener; the others keep the broker-wide
// ones. Unknown listeners or settings are errors.
func TestServeListenerSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "weir.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (broker.Config, error) {
		o := &serveOptions{}
		cmd := newServeCmdFor(o)
		if err := cmd.ParseFlags([]string{"--config", file}); err != nil {
			t.Fatal(err)
		}
		if err := o.load(cmd, func(string) string { return "" }); err != nil {
			return broker.Config{}, err
		}
		return o.brokerConfig(nil, nil)
	}
	write(`
data-dir: /d
listeners: PLAINTEXT://127.0.0.1:9092,CLIENTS://0.0.0.0:9093,INTERNAL_SASL://127.0.0.1:9094,MTLS://0.0.0.0:9095
listener.security.protocol.map: CLIENTS:SASL_SSL,INTERNAL_SASL:SASL_PLAINTEXT,MTLS:SSL
tls-cert: /etc/weir/cert.pem
tls-key: /etc/weir/key.pem
sasl.enabled.mechanisms: PLAIN,SCRAM-SHA-512
listener.name.clients.sasl.enabled.mechanisms: SCRAM-SHA-512
listener.name.clients.connections.max.reauth.ms: 60000
listener.name.INTERNAL_SASL.sasl.enabled.mechanisms: plain, scram-sha-256
listener.name.mtls.ssl.client.auth: required
listener.name.mtls.tls-client-ca: /etc/weir/clients-ca.pem
listener.name.mtls.tls-cert: /etc/weir/mtls.pem
`)
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	minute := time.Minute
	want := map[string]broker.ListenerSecurity{
		"CLIENTS":       {SASLMechanisms: []string{"SCRAM-SHA-512"}, MaxReauth: &minute},
		"INTERNAL_SASL": {SASLMechanisms: []string{"PLAIN", "SCRAM-SHA-256"}},
		"MTLS": {TLS: &broker.TLSConfig{CertFile: "/etc/weir/mtls.pem", KeyFile: "/etc/weir/key.pem",
			ClientCAFile: "/etc/weir/clients-ca.pem", ClientAuth: "required"}},
	}
	if !reflect.DeepEqual(cfg.ListenerSecurity, want) {
		t.Fatalf("listener security %+v, want %+v", cfg.ListenerSecurity, want)
	}
	if cfg.TLS.ClientCAFile != "" || strings.Join(cfg.SASL.Mechanisms, ",") != "PLAIN,SCRAM-SHA-512" {
		t.Fatalf("broker-wide settings changed: %+v %+v", cfg.TLS, cfg.SASL.Mechanisms)
	}
	// The MTLS listener requires client certificates: not exposed, and
	// the HTTP fronts default to required.
	if ex := exposedListeners(cfg.Listeners, cfg.TLS, cfg.ListenerSecurity); len(ex) != 0 {
		t.Fatalf("exposed: %v", ex)
	}
	if m := (&httpOptions{}).mode(cfg.Listeners[3:], cfg.TLS, cfg.ListenerSecurity); m != broker.HTTPAuthRequired {
		t.Fatalf("http auth mode with only the mTLS listener: %s", m)
	}

	for _, bad := range []struct{ body, want string }{
		{"listeners: PLAINTEXT://127.0.0.1:1\nlistener.name.nope.sasl.enabled.mechanisms: PLAIN\n", "listener-name-nope"},
		{"listeners: SASL_SSL://127.0.0.1:1\nlistener.name.sasl_ssl.colour: blue\n", "listener-name-sasl-ssl-colour"},
		{"listeners: SASL_SSL://127.0.0.1:1\nlistener.name.sasl_ssl.connections.max.reauth.ms: -5\n", "milliseconds"},
		{"kafka-addr: 127.0.0.1:1\nlistener.name.plaintext.tls-cert: /c.pem\n", "need --listeners"},
	} {
		write("data-dir: /d\n" + bad.body)
		if _, err := load(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error naming %q", bad.body, err, bad.want)
		}
	}
}

// A real weir serve with one SASL listener limited to SCRAM-SHA-512: a
// PLAIN client is refused there, a SCRAM one is served, and PLAIN still
// works on the listener that keeps the broker-wide mechanisms.
func TestServeListenerMechanismsProcess(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WEIR_USER_PASSWORD", "pw-Lis-7788")
	mustCLI(t, "", "user", "create", "dana", "--data-dir", dir)
	file := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(file, []byte(`
listeners: PLAINTEXT://127.0.0.1:0,STRICT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0
listener.security.protocol.map: STRICT:SASL_PLAINTEXT
listener.name.strict.sasl.enabled.mechanisms: SCRAM-SHA-512
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, nil, "--config", file, "--data-dir", dir, "--registry-addr", "off")
	addrs := map[string]string{}
	p.mu.Lock()
	for _, l := range p.lines {
		if l["msg"] == "weir serving" {
			ls, _ := l["listeners"].(string)
			for _, part := range strings.Split(ls, ",") {
				if name, addr, ok := strings.Cut(part, "://"); ok {
					addrs[name] = addr
				}
			}
		}
	}
	p.mu.Unlock()
	t.Setenv("WEIR_SASL_PASSWORD", "pw-Lis-7788")
	list := func(listener, mech string) (string, int) {
		out, errOut, code := runCLI(t, "", "topic", "list", "-b", addrs[listener], "--sasl-mechanism", mech, "--sasl-user", "dana", "--timeout", "5s")
		return out + errOut, code
	}
	if out, code := list("STRICT", "PLAIN"); code == 0 {
		t.Fatalf("PLAIN served on the SCRAM-only listener: %s", out)
	}
	if out, code := list("STRICT", "SCRAM-SHA-512"); code != 0 {
		t.Fatalf("SCRAM-SHA-512 on STRICT: exit %d %s", code, out)
	}
	if out, code := list("SASL_PLAINTEXT", "PLAIN"); code != 0 {
		t.Fatalf("PLAIN on SASL_PLAINTEXT: exit %d %s", code, out)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.log())
	}
}
