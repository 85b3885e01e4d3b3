package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weirhq/weir/internal/testcerts"
)

func TestParseListeners(t *testing.T) {
	ls, err := ParseListeners("PLAINTEXT://127.0.0.1:9092, clients://:9093,SSL://0.0.0.0:9094",
		"CLIENTS://kafka.example.com:19093", "CLIENTS:SASL_SSL")
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{Name: "PLAINTEXT", Addr: "127.0.0.1:9092", Protocol: Plaintext},
		{Name: "CLIENTS", Addr: ":9093", Advertised: "kafka.example.com:19093", Protocol: SASLSSL},
		{Name: "SSL", Addr: "0.0.0.0:9094", Protocol: SSL},
	}
	if len(ls) != len(want) {
		t.Fatalf("got %+v", ls)
	}
	for i := range want {
		if ls[i] != want[i] {
			t.Errorf("listener %d: %+v, want %+v", i, ls[i], want[i])
		}
	}
	for _, c := range [][3]string{
		{"", "", ""},
		{"INTERNAL://127.0.0.1:1", "", ""},          // not a protocol, not mapped
		{"PLAINTEXT://127.0.0.1", "", ""},           // no port
		{"PLAINTEXT://a:1,PLAINTEXT://b:2", "", ""}, // name twice
		{"PLAINTEXT://a:1", "SSL://b:2", ""},        // advertised for no listener
		{"X://a:1", "", "X:TLS"},                    // bad protocol
		{"PLAINTEXT://a:1", "PLAINTEXT://b:2,PLAINTEXT://c:3", ""},
	} {
		if _, err := ParseListeners(c[0], c[1], c[2]); err == nil {
			t.Errorf("ParseListeners(%q, %q, %q) accepted", c[0], c[1], c[2])
		}
	}
}

// secEnv is a broker with a PLAINTEXT listener (for the admin driver), a
// SASL_SSL, a SASL_PLAINTEXT and an SSL (mTLS) listener, a user per SCRAM
// mechanism and a JWT issuer.
type secEnv struct {
	b      *Broker
	cfg    Config
	ca     *testcerts.CA
	server testcerts.Pair
	issuer *testcerts.Issuer
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	alicePass = "alice-Secret-7731"
	bobPass   = "bob-Secret-0420"
)

func newSecEnv(t *testing.T, mod ...func(*Config)) *secEnv {
	t.Helper()
	dir := t.TempDir()
	e := &secEnv{ca: testcerts.NewCA(t, dir), logs: &syncBuffer{}}
	e.server = e.ca.Server("server")
	e.issuer = testcerts.NewIssuer(t, dir, "k1")
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, cfg := testBroker(t, append([]func(*Config){func(c *Config) {
		c.Listeners = []Listener{
			{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SASL_SSL", Addr: "127.0.0.1:0", Protocol: SASLSSL},
			{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: SASLPlaintext},
			{Name: "MTLS", Addr: "127.0.0.1:0", Protocol: SSL},
		}
		c.TLS = TLSConfig{CertFile: e.server.CertFile, KeyFile: e.server.KeyFile, ClientCAFile: e.ca.File, ClientAuth: "requested"}
		c.SASL = SASLConfig{OAuth: OAuthConfig{JWKSFile: e.issuer.JWKSFile, Issuer: "https://idp.test", Audience: "weir"}}
		c.Logger = logger
	}}, mod...)...)
	e.b, e.cfg = b, cfg
	adm := kadm.NewClient(e.client(t, "PLAINTEXT", nil))
	ctx := testCtx(t)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: alicePass},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: bobPass},
	})
	if err != nil {
		t.Fatal(err)
	}
	res.EachError(func(a kadm.AlteredUserSCRAM) { t.Fatalf("alter %s: %v %s", a.User, a.Err, a.ErrMessage) })
	return e
}

// client is a franz-go client of the named listener, with TLS on TLS
// listeners and mech (if not nil) for SASL.
func (e *secEnv) client(t *testing.T, listener string, mech sasl.Mechanism, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(e.b.ListenerAddr(listener)), kgo.RetryTimeout(5 * time.Second),
		kgo.RequestRetries(1), kgo.ConnIdleTimeout(time.Minute)}
	for _, l := range e.b.listeners {
		if l.Name == listener && l.Protocol.TLS() {
			opts = append(opts, kgo.DialTLSConfig(e.ca.ClientTLS(nil)))
		}
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (e *secEnv) token(exp time.Duration) string {
	return e.issuer.Sign(map[string]any{"sub": "svc-orders", "iss": "https://idp.test", "aud": "weir",
		"exp": time.Now().Add(exp).Unix(), "iat": time.Now().Unix()})
}

// produceConsume writes a record through cl and reads it back.
func produceConsume(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	ctx := testCtx(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v-" + topic)}).FirstErr(); err != nil {
		return err
	}
	cl.AddConsumeTopics(topic)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		if recs := fs.Records(); len(recs) > 0 {
			if string(recs[0].Value) != "v-"+topic {
				t.Fatalf("read %q", recs[0].Value)
			}
			return nil
		}
	}
	return ctx.Err()
}

// Every mechanism over SASL_SSL and SASL_PLAINTEXT: a franz-go client
// authenticates, creates a topic, produces and consumes; the connection's
// principal is the user (or the token's subject).
func TestSASLMechanismsEndToEnd(t *testing.T) {
	e := newSecEnv(t)
	mechs := map[string]sasl.Mechanism{
		"plain-alice": plain.Auth{User: "alice", Pass: alicePass}.AsMechanism(),
		"plain-bob":   plain.Auth{User: "bob", Pass: bobPass}.AsMechanism(),
		"scram256":    scram.Auth{User: "alice", Pass: alicePass}.AsSha256Mechanism(),
		"scram512":    scram.Auth{User: "bob", Pass: bobPass}.AsSha512Mechanism(),
		"oauthbearer": oauth.Auth{Token: e.token(time.Hour)}.AsMechanism(),
	}
	want := map[string]string{"plain-alice": "User:alice", "plain-bob": "User:bob", "scram256": "User:alice",
		"scram512": "User:bob", "oauthbearer": "User:svc-orders"}
	for _, lis := range []string{"SASL_SSL", "SASL_PLAINTEXT"} {
		for name, m := range mechs {
			t.Run(lis+"/"+name, func(t *testing.T) {
				cl := e.client(t, lis, m)
				topic := strings.ToLower("sec-" + lis + "-" + name)
				if err := produceConsume(t, cl, topic); err != nil {
					t.Fatal(err)
				}
				if got := e.principalsOn(lis); !got[want[name]] {
					t.Fatalf("principals on %s: %v, want %s", lis, got, want[name])
				}
				cl.Close()
			})
		}
	}
}

// principalsOn is the set of principals of the open connections of a
// listener.
func (e *secEnv) principalsOn(listener string) map[string]bool {
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	out := map[string]bool{}
	for c := range e.b.conns {
		if c.lis != nil && c.lis.Name == listener {
			out[c.principal] = true
		}
	}
	return out
}

// Wrong password, unknown user, wrong mechanism, expired or foreign token:
// franz-go gets Kafka's error codes; the broker's logs carry none of the
// secrets used.
func TestSASLFailuresAndNoSecretsInLogs(t *testing.T) {
	e := newSecEnv(t, func(c *Config) {
		c.SASL.Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"}
		c.SASL.FailedAuthDelay = 10 * time.Millisecond
	})
	expired := e.token(-time.Hour)
	other := testcerts.NewIssuer(t, "", "k1").Sign(map[string]any{"sub": "x", "iss": "https://idp.test", "aud": "weir",
		"exp": time.Now().Add(time.Hour).Unix()})
	cases := []struct {
		name string
		mech sasl.Mechanism
		want *kerr.Error
	}{
		{"plain wrong password", plain.Auth{User: "alice", Pass: "guess-Pw-1"}.AsMechanism(), kerr.SaslAuthenticationFailed},
		{"plain unknown user", plain.Auth{User: "mallory", Pass: "guess-Pw-2"}.AsMechanism(), kerr.SaslAuthenticationFailed},
		{"scram wrong password", scram.Auth{User: "alice", Pass: "guess-Pw-3"}.AsSha256Mechanism(), kerr.SaslAuthenticationFailed},
		{"scram unknown user", scram.Auth{User: "mallory", Pass: "guess-Pw-4"}.AsSha256Mechanism(), kerr.SaslAuthenticationFailed},
		{"scram-512 not enabled", scram.Auth{User: "bob", Pass: bobPass}.AsSha512Mechanism(), kerr.UnsupportedSaslMechanism},
		{"expired token", oauth.Auth{Token: expired}.AsMechanism(), kerr.SaslAuthenticationFailed},
		{"token of another key", oauth.Auth{Token: other}.AsMechanism(), kerr.SaslAuthenticationFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := e.client(t, "SASL_SSL", c.mech)
			err := cl.Ping(testCtx(t))
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %s", err, c.want.Message)
			}
		})
	}
	// A client without SASL on a SASL listener is closed, not served.
	cl := e.client(t, "SASL_PLAINTEXT", nil)
	if err := cl.Ping(testCtx(t)); err == nil {
		t.Fatal("unauthenticated client served on a SASL listener")
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "SASL authentication failed") {
		t.Fatalf("failures not logged:\n%s", logs)
	}
	for _, secret := range []string{"guess-Pw-1", "guess-Pw-2", "guess-Pw-3", "guess-Pw-4", bobPass, alicePass,
		expired, expired[len(expired)-30:], other[len(other)-30:]} {
		if strings.Contains(logs, secret) {
			t.Fatalf("logs contain a secret (%.6s...)", secret)
		}
	}
	if n := counterValue(t, e.b.metrics.authentications.WithLabelValues("SCRAM-SHA-256", "failure")); n < 2 {
		t.Fatalf("SCRAM failures counted %v", n)
	}
}

// dialListener opens a raw connection to a listener (TLS if it is one).
func (e *secEnv) dialListener(t *testing.T, name string) *rawConn {
	t.Helper()
	addr := e.b.ListenerAddr(name)
	var nc net.Conn
	var err error
	if name == "SASL_SSL" || name == "MTLS" {
		nc, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, e.ca.ClientTLS(nil))
	} else {
		nc, err = net.DialTimeout("tcp", addr, 5*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func handshake(v int16, mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = v, mech
	return r
}

func authenticate(v int16, msg []byte) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = v, msg
	return r
}

// The state machine on the wire: ILLEGAL_SASL_STATE for SaslAuthenticate
// before SaslHandshake and for a second handshake, the enabled list with
// UNSUPPORTED_SASL_MECHANISM, requests before authentication close the
// connection, and PLAINTEXT listeners answer as before.
func TestSASLStateMachine(t *testing.T) {
	e := newSecEnv(t)
	t.Run("authenticate before handshake", func(t *testing.T) {
		c := e.dialListener(t, "SASL_PLAINTEXT")
		r := c.roundTrip(authenticate(1, []byte("\x00alice\x00"+alicePass)), 1).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("code %d", r.ErrorCode)
		}
		c.expectClosed()
	})
	t.Run("second handshake", func(t *testing.T) {
		c := e.dialListener(t, "SASL_PLAINTEXT")
		if r := c.roundTrip(handshake(1, "PLAIN"), 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("first handshake: %d", r.ErrorCode)
		}
		if r := c.roundTrip(handshake(1, "PLAIN"), 2).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("second handshake: %d", r.ErrorCode)
		}
		c.expectClosed()
	})
	t.Run("unsupported mechanism", func(t *testing.T) {
		c := e.dialListener(t, "SASL_SSL")
		r := c.roundTrip(handshake(1, "GSSAPI"), 1).(*kmsg.SASLHandshakeResponse)
		if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(r.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER" {
			t.Fatalf("%d %v", r.ErrorCode, r.SupportedMechanisms)
		}
		c.expectClosed()
	})
	t.Run("request before authentication", func(t *testing.T) {
		c := e.dialListener(t, "SASL_SSL")
		av := c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 1).(*kmsg.ApiVersionsResponse)
		if av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
			t.Fatal("ApiVersions refused before authentication")
		}
		c.send(kmsg.NewPtrMetadataRequest(), 2)
		c.expectClosed()
	})
	t.Run("plain over raw frames", func(t *testing.T) {
		c := e.dialListener(t, "SASL_PLAINTEXT")
		c.roundTrip(handshake(1, "PLAIN"), 1)
		r := c.roundTrip(authenticate(2, []byte("\x00alice\x00"+alicePass)), 2).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
			t.Fatalf("%d %d", r.ErrorCode, r.SessionLifetimeMillis)
		}
		md := c.roundTrip(kmsg.NewPtrMetadataRequest(), 3).(*kmsg.MetadataResponse)
		if len(md.Brokers) != 1 {
			t.Fatal("no metadata after authentication")
		}
		// A handshake on an authenticated connection re-authenticates;
		// another principal is refused.
		c.roundTrip(handshake(1, "PLAIN"), 4)
		r = c.roundTrip(authenticate(2, []byte("\x00bob\x00"+bobPass)), 5).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("principal change: %d", r.ErrorCode)
		}
		c.expectClosed()
	})
	t.Run("plaintext listener", func(t *testing.T) {
		c := e.dialListener(t, "PLAINTEXT")
		if r := c.roundTrip(handshake(1, "PLAIN"), 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
			t.Fatalf("%d", r.ErrorCode)
		}
		if r := c.roundTrip(authenticate(1, nil), 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("%d", r.ErrorCode)
		}
	})
}

// KIP-368: with connections.max.reauth.ms, SaslAuthenticate v1+ tells the
// lifetime (bounded by the token's exp); a connection that does not
// re-authenticate is closed at its next request past it, and franz-go,
// which re-authenticates, keeps working across several lifetimes.
func TestReauthentication(t *testing.T) {
	e := newSecEnv(t, func(c *Config) { c.SASL.MaxReauth = 1500 * time.Millisecond })

	c := e.dialListener(t, "SASL_PLAINTEXT")
	c.roundTrip(handshake(1, "PLAIN"), 1)
	r := c.roundTrip(authenticate(1, []byte("\x00alice\x00"+alicePass)), 2).(*kmsg.SASLAuthenticateResponse)
	if r.ErrorCode != 0 || r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > 1500 {
		t.Fatalf("code %d lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
	}
	c.roundTrip(kmsg.NewPtrMetadataRequest(), 3)
	time.Sleep(time.Duration(r.SessionLifetimeMillis)*time.Millisecond + 200*time.Millisecond)
	c.send(kmsg.NewPtrMetadataRequest(), 4)
	c.expectClosed()

	// A token expiring before MaxReauth bounds the lifetime.
	tok := e.token(time.Second)
	c = e.dialListener(t, "SASL_SSL")
	c.roundTrip(handshake(1, "OAUTHBEARER"), 1)
	r = c.roundTrip(authenticate(1, []byte("n,,\x01auth=Bearer "+tok+"\x01\x01")), 2).(*kmsg.SASLAuthenticateResponse)
	if r.ErrorCode != 0 || r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > 1000 {
		t.Fatalf("token lifetime: code %d lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
	}

	before := counterValue(t, e.b.metrics.authentications.WithLabelValues("SCRAM-SHA-512", "success"))
	cl := e.client(t, "SASL_SSL", scram.Auth{User: "bob", Pass: bobPass}.AsSha512Mechanism())
	ctx := testCtx(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "reauth"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := counterValue(t, e.b.metrics.authentications.WithLabelValues("SCRAM-SHA-512", "success")) - before; got < 3 {
		t.Fatalf("%v SCRAM authentications over 4s with a 1.5s lifetime, want re-authentications", got)
	}
}

// mTLS: the SSL listener's principal is the client certificate's subject;
// a client without a certificate is ANONYMOUS ("requested"); with
// "required" it cannot connect at all.
func TestMTLSPrincipal(t *testing.T) {
	e := newSecEnv(t)
	pair := e.ca.Client("alice", pkix.Name{CommonName: "alice", Organization: []string{"Acme"}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.b.ListenerAddr("MTLS")), kgo.DialTLSConfig(e.ca.ClientTLS(&pair)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := e.principalsOn("MTLS"); !got["User:CN=alice,O=Acme"] {
		t.Fatalf("principals %v", got)
	}
	anon := e.client(t, "MTLS", nil)
	if err := anon.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := e.principalsOn("MTLS"); !got["User:ANONYMOUS"] {
		t.Fatalf("principals %v", got)
	}

	req := newSecEnv(t, func(c *Config) { c.TLS.ClientAuth = "required" })
	nocert := req.client(t, "MTLS", nil, kgo.RetryTimeout(time.Second))
	if err := nocert.Ping(testCtx(t)); err == nil {
		t.Fatal("client without certificate served with ClientAuth required")
	}
}

// TLS below 1.2 is refused; a new certificate written over the files is
// served to new connections without a restart.
func TestTLSVersionAndReload(t *testing.T) {
	e := newSecEnv(t)
	addr := e.b.ListenerAddr("SASL_SSL")
	old := e.ca.ClientTLS(nil)
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if c, err := tls.Dial("tcp", addr, old); err == nil {
		c.Close()
		t.Fatal("TLS 1.1 accepted")
	}
	serial := func() string {
		c, err := tls.Dial("tcp", addr, e.ca.ClientTLS(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	next := e.ca.Server("next")
	for _, f := range [][2]string{{next.CertFile, e.server.CertFile}, {next.KeyFile, e.server.KeyFile}} {
		data, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1]+".new", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f[1]+".new", f[1]); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for serial() == first {
		if time.Now().After(deadline) {
			t.Fatal("certificate not reloaded")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := serial(); got != next.Cert.SerialNumber.String() {
		t.Fatalf("serving serial %s, want %s", got, next.Cert.SerialNumber)
	}
}

// Metadata and FindCoordinator answer each listener's advertised address.
func TestListenersAdvertiseTheirOwnAddress(t *testing.T) {
	e := newSecEnv(t)
	for _, l := range e.b.Listeners() {
		if l.Protocol == SSL {
			continue
		}
		var mech sasl.Mechanism
		if l.Protocol.SASL() {
			mech = scram.Auth{User: "alice", Pass: alicePass}.AsSha256Mechanism()
		}
		cl := e.client(t, l.Name, mech)
		ctx := testCtx(t)
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(l.Addr)
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, itoa(md.Brokers[0].Port)) != net.JoinHostPort("127.0.0.1", port) {
			t.Fatalf("%s: metadata brokers %+v, want port %s", l.Name, md.Brokers, port)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		fr, err := fc.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if itoa(fr.Port) != port && (len(fr.Coordinators) == 0 || itoa(fr.Coordinators[0].Port) != port) {
			t.Fatalf("%s: FindCoordinator %+v, want port %s", l.Name, fr, port)
		}
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// SCRAM credentials survive a restart, are described without secrets, and
// a deleted user can no longer log in.
func TestScramCredentialsDurableAndManaged(t *testing.T) {
	e := newSecEnv(t)
	e.b.Close()
	b2, _ := testBroker(t, func(c *Config) { *c = e.cfg; c.Registerer = prometheus.NewRegistry() })
	e.b = b2
	cl := e.client(t, "SASL_PLAINTEXT", scram.Auth{User: "bob", Pass: bobPass}.AsSha512Mechanism())
	if err := cl.Ping(testCtx(t)); err != nil {
		t.Fatalf("login after restart: %v", err)
	}
	adm := kadm.NewClient(e.client(t, "PLAINTEXT", nil))
	ctx := testCtx(t)
	d, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 2 || d["bob"].CredInfos[0].Iterations != 8192 || d["alice"].CredInfos[0].Mechanism != kadm.ScramSha256 {
		t.Fatalf("described %+v", d)
	}
	res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}, {User: "carol", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: []byte("too short")}})
	if err != nil {
		t.Fatal(err)
	}
	if res["bob"].Err != nil || !errors.Is(res["carol"].Err, kerr.ResourceNotFound) || !errors.Is(res["dave"].Err, kerr.UnacceptableCredential) {
		t.Fatalf("alter results %+v", res)
	}
	cl2 := e.client(t, "SASL_PLAINTEXT", scram.Auth{User: "bob", Pass: bobPass}.AsSha512Mechanism())
	if err := cl2.Ping(testCtx(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted user: %v", err)
	}
	data, err := os.ReadFile(e.cfg.DataDir + "/scram.json")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(alicePass)) {
		t.Fatal("password stored in the clear")
	}
}

// writeToken and readToken speak the SaslHandshake v0 flow: size-prefixed
// raw tokens.
func (c *rawConn) writeToken(tok []byte) {
	c.t.Helper()
	c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
}

func (c *rawConn) readToken() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return nil, err
	}
	tok := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.nc, tok)
	return tok, err
}

// The SaslHandshake v0 flow (raw tokens, as kafka-python 2.0 speaks it):
// PLAIN and SCRAM (driven by franz-go's SCRAM client) authenticate, the
// connection then serves requests; a wrong password closes it unanswered.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	e := newSecEnv(t)
	c := e.dialListener(t, "SASL_SSL")
	if r := c.roundTrip(handshake(0, "PLAIN"), 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake: %d", r.ErrorCode)
	}
	c.writeToken([]byte("alice\x00alice\x00" + alicePass))
	if tok, err := c.readToken(); err != nil || len(tok) != 0 {
		t.Fatalf("PLAIN reply %q %v", tok, err)
	}
	if md := c.roundTrip(kmsg.NewPtrMetadataRequest(), 2).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
		t.Fatal("no metadata after v0 authentication")
	}

	for _, pass := range []string{bobPass, "wrong-pass"} {
		c := e.dialListener(t, "SASL_PLAINTEXT")
		c.roundTrip(handshake(0, "SCRAM-SHA-512"), 1)
		sess, first, err := scram.Auth{User: "bob", Pass: pass}.AsSha512Mechanism().Authenticate(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		c.writeToken(first)
		srvFirst, err := c.readToken()
		if err != nil {
			t.Fatal(err)
		}
		_, final, err := sess.Challenge(srvFirst)
		if err != nil {
			t.Fatal(err)
		}
		c.writeToken(final)
		srvFinal, err := c.readToken()
		if pass != bobPass {
			if err == nil {
				t.Fatalf("wrong password answered %q", srvFinal)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if done, _, err := sess.Challenge(srvFinal); !done || err != nil {
			t.Fatalf("server-final rejected by the client: %v", err)
		}
		if md := c.roundTrip(kmsg.NewPtrMetadataRequest(), 2).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
			t.Fatal("no metadata after v0 SCRAM")
		}
	}
}

// A password-guessing loop pays connection.failed.authentication.delay.ms
// per guess (each failure is answered only after it, then the connection
// closes), while another, authenticated client on the same listener keeps
// being served during the loop: the delay holds only the guessing
// connection.
func TestFailedAuthenticationDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	e := newSecEnv(t, func(c *Config) { c.SASL.FailedAuthDelay = delay })
	good := e.dialListener(t, "SASL_PLAINTEXT")
	good.roundTrip(handshake(1, "PLAIN"), 1)
	if r := good.roundTrip(authenticate(1, []byte("\x00alice\x00"+alicePass)), 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	done := make(chan error, 1)
	go func() {
		start := time.Now()
		for i := range 4 {
			c := e.dialListener(t, "SASL_PLAINTEXT")
			c.send(handshake(1, "PLAIN"), 1)
			if _, _, err := c.read(); err != nil {
				done <- err
				return
			}
			sent := time.Now()
			c.send(authenticate(1, []byte("\x00alice\x00guess-"+strconv.Itoa(i))), 2)
			_, body, err := c.read()
			if err != nil {
				done <- err
				return
			}
			if waited := time.Since(sent); waited < delay {
				done <- fmt.Errorf("guess %d answered after %v, before the %v delay", i, waited, delay)
				return
			}
			r := kmsg.NewPtrSASLAuthenticateResponse()
			r.Version = 1
			if err := r.ReadFrom(body); err != nil || r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
				done <- fmt.Errorf("guess %d: %v code %d", i, err, r.ErrorCode)
				return
			}
		}
		if el := time.Since(start); el < 4*delay {
			done <- fmt.Errorf("4 guesses in %v", el)
			return
		}
		done <- nil
	}()
	// Meanwhile the authenticated connection is answered: at least one
	// Metadata round trip completes before the loop has paid its
	// delays (which take 4*delay at the least).
	served := 0
	for corr := int32(3); ; corr++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if served < 3 {
				t.Fatal("the authenticated client was not served during the guessing loop")
			}
			return
		default:
		}
		good.roundTrip(kmsg.NewPtrMetadataRequest(), corr)
		served++
		time.Sleep(20 * time.Millisecond)
	}
}

// A fetch large enough for the vectored write (record sets past
// spliceMin) comes back intact over TLS, where the buffers are gathered
// into full records instead of written one by one.
func TestLargeFetchOverTLS(t *testing.T) {
	e := newSecEnv(t)
	cl := e.client(t, "SASL_SSL", scram.Auth{User: "alice", Pass: alicePass}.AsSha256Mechanism(),
		kgo.ProducerBatchMaxBytes(2<<20))
	ctx := testCtx(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("2000000")}, "big-tls"); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16)
	for i := range 3 {
		want[i] = byte('x' + i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big-tls", Value: bytes.Clone(want)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.AddConsumeTopics("big-tls")
	got := 0
	for got < 3 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			if len(r.Value) != len(want) || !bytes.Equal(r.Value[3:], want[3:]) || r.Value[got] != byte('x'+got) {
				t.Fatalf("record %d corrupted over TLS (%d bytes)", got, len(r.Value))
			}
			got++
		}
	}
	if got != 3 {
		t.Fatalf("read %d of 3", got)
	}
}

// Authenticate (for HTTP basic auth and other front doors) accepts the
// SCRAM users' passwords and nothing else.
func TestBrokerAuthenticate(t *testing.T) {
	e := newSecEnv(t)
	if p, ok := e.b.Authenticate("alice", alicePass); !ok || p != "User:alice" {
		t.Fatalf("alice: %q %v", p, ok)
	}
	if p, ok := e.b.Authenticate("bob", bobPass); !ok || p != "User:bob" {
		t.Fatalf("bob: %q %v", p, ok)
	}
	for _, c := range [][2]string{{"alice", bobPass}, {"mallory", "x"}, {"", ""}, {"alice", ""}, {"alice\x00bob", bobPass}} {
		if _, ok := e.b.Authenticate(c[0], c[1]); ok {
			t.Fatalf("%q accepted", c[0])
		}
	}
}

// OAUTHBEARER against a JWKS served over HTTP (--oauth-jwks-url).
func TestOAuthJWKSURL(t *testing.T) {
	issuer := testcerts.NewIssuer(t, "", "url-key")
	jwks, err := os.ReadFile(issuer.JWKSFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(jwks) }))
	defer srv.Close()
	e := newSecEnv(t, func(c *Config) { c.SASL.OAuth = OAuthConfig{JWKSURL: srv.URL} })
	tok := issuer.Sign(map[string]any{"sub": "from-url", "exp": time.Now().Add(time.Hour).Unix()})
	cl := e.client(t, "SASL_SSL", oauth.Auth{Token: tok}.AsMechanism())
	if err := cl.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if !e.principalsOn("SASL_SSL")["User:from-url"] {
		t.Fatalf("principals %v", e.principalsOn("SASL_SSL"))
	}
	// A token of the file issuer (not in the URL's set) is refused.
	cl2 := e.client(t, "SASL_SSL", oauth.Auth{Token: e.token(time.Hour)}.AsMechanism())
	if err := cl2.Ping(testCtx(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("foreign token: %v", err)
	}
}

// Before authentication a SASL listener reads no frame larger than
// 512 KiB (sasl.server.max.receive.size); after it, the usual limit.
func TestSASLPreAuthFrameLimit(t *testing.T) {
	e := newSecEnv(t)
	c := e.dialListener(t, "SASL_PLAINTEXT")
	c.write(binary.BigEndian.AppendUint32(nil, 600<<10))
	c.expectClosed()

	c = e.dialListener(t, "SASL_PLAINTEXT")
	c.roundTrip(handshake(0, "PLAIN"), 1)
	c.write(binary.BigEndian.AppendUint32(nil, 600<<10)) // a raw token
	c.expectClosed()

	// Authenticated: a 600 KiB produce is read.
	cl := e.client(t, "SASL_PLAINTEXT", plain.Auth{User: "alice", Pass: alicePass}.AsMechanism(), kgo.ProducerBatchMaxBytes(2<<20))
	ctx := testCtx(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("2000000")}, "big-sasl"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big-sasl", Value: make([]byte, 600<<10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// The principal a SASL exchange establishes is the one authorization
// checks: with the ACL authorizer on, alice (SCRAM over SASL_SSL) is
// refused a topic until an ACL names User:alice, and bob stays refused.
// (The PLAINTEXT listener's anonymous principal is a super user here: it is
// how the test manages users and ACLs.)
func TestSASLPrincipalIsAuthorized(t *testing.T) {
	e := newSecEnv(t, func(c *Config) {
		c.Authorizer = "acl"
		c.SuperUsers = []string{"User:ANONYMOUS"}
	})
	ctx := testCtx(t)
	adm := kadm.NewClient(e.client(t, "PLAINTEXT", nil))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "sec-acl"); err != nil {
		t.Fatal(err)
	}
	produce := func(cl *kgo.Client) error {
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return cl.ProduceSync(short, &kgo.Record{Topic: "sec-acl", Value: []byte("x")}).FirstErr()
	}
	alice := e.client(t, "SASL_SSL", scram.Auth{User: "alice", Pass: alicePass}.AsSha256Mechanism(), kgo.RecordRetries(1))
	if err := produce(alice); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	mustACL(t, adm, kadm.NewACLs().Allow("User:alice").Topics("sec-acl").Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternLiteral))
	alice2 := e.client(t, "SASL_SSL", scram.Auth{User: "alice", Pass: alicePass}.AsSha256Mechanism())
	if err := produce(alice2); err != nil {
		t.Fatalf("alice with WRITE on sec-acl: %v", err)
	}
	bob := e.client(t, "SASL_SSL", scram.Auth{User: "bob", Pass: bobPass}.AsSha512Mechanism(), kgo.RecordRetries(1))
	if err := produce(bob); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
