package broker

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/auth"
	"github.com/weirhq/weir/internal/testcerts"
)

// Per-listener overrides (listener.name.<name>.*): each listener gets its
// own mechanisms, re-authentication limit, certificate and client
// certificate setting; the others keep the broker-wide ones.
func TestListenerSecurityOverrides(t *testing.T) {
	ca := testcerts.NewCA(t, "")
	cert1, cert2 := ca.Server("server1"), ca.Server("server2")
	hour := time.Hour
	b, _ := testBroker(t, func(c *Config) {
		c.Listeners = []Listener{
			{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "DEFAULTS", Addr: "127.0.0.1:0", Protocol: SASLPlaintext},
			{Name: "SCRAMONLY", Addr: "127.0.0.1:0", Protocol: SASLPlaintext},
			{Name: "REAUTH", Addr: "127.0.0.1:0", Protocol: SASLPlaintext},
			{Name: "MTLS", Addr: "127.0.0.1:0", Protocol: SSL},
			{Name: "TLS", Addr: "127.0.0.1:0", Protocol: SSL},
		}
		c.TLS = TLSConfig{CertFile: cert1.CertFile, KeyFile: cert1.KeyFile}
		c.ListenerSecurity = map[string]ListenerSecurity{
			"SCRAMONLY": {SASLMechanisms: []string{auth.ScramSHA512}},
			"REAUTH":    {SASLMechanisms: []string{auth.Plain}, MaxReauth: &hour},
			"MTLS":      {TLS: &TLSConfig{CertFile: cert2.CertFile, KeyFile: cert2.KeyFile, ClientCAFile: ca.File, ClientAuth: "required"}},
		}
	})
	cred, err := auth.NewScramCredentialFromPassword(auth.ScramSHA512, "pw-Carol-1", auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.scram.apply([]scramChange{{User: "carol", Mechanism: auth.ScramSHA512, Cred: &cred}}); err != nil {
		t.Fatal(err)
	}
	dial := func(name string) *rawConn {
		nc, err := net.DialTimeout("tcp", b.ListenerAddr(name), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
		t.Cleanup(func() { nc.Close() })
		return &rawConn{t: t, nc: nc}
	}
	plainLogin := func(name string) (*kmsg.SASLHandshakeResponse, *kmsg.SASLAuthenticateResponse) {
		c := dial(name)
		hs := c.roundTrip(handshake(1, auth.Plain), 1).(*kmsg.SASLHandshakeResponse)
		if hs.ErrorCode != 0 {
			return hs, nil
		}
		return hs, c.roundTrip(authenticate(1, []byte("\x00carol\x00pw-Carol-1")), 2).(*kmsg.SASLAuthenticateResponse)
	}

	// The broker-wide mechanisms and no session limit.
	if hs, a := plainLogin("DEFAULTS"); hs.ErrorCode != 0 || a.ErrorCode != 0 || a.SessionLifetimeMillis != 0 ||
		!slices.Contains(hs.SupportedMechanisms, auth.Plain) {
		t.Fatalf("DEFAULTS: %+v %+v", hs, a)
	}
	// Only SCRAM-SHA-512 here: PLAIN is refused with the listener's list.
	if hs, _ := plainLogin("SCRAMONLY"); hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code ||
		!slices.Equal(hs.SupportedMechanisms, []string{auth.ScramSHA512}) {
		t.Fatalf("SCRAMONLY: PLAIN answered %d %v", hs.ErrorCode, hs.SupportedMechanisms)
	}
	// connections.max.reauth.ms of this listener.
	if _, a := plainLogin("REAUTH"); a == nil || a.ErrorCode != 0 || a.SessionLifetimeMillis != hour.Milliseconds() {
		t.Fatalf("REAUTH: %+v", a)
	}

	// MTLS serves its own certificate and requires a client certificate;
	// TLS serves the broker-wide one and asks for none.
	serial := func(name string, cfg *tls.Config) (string, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", b.ListenerAddr(name), cfg)
		if err != nil {
			return "", err
		}
		defer c.Close()
		// A refused client certificate shows on the first read (TLS 1.3).
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		rc := &rawConn{t: t, nc: c}
		rc.send(kmsg.NewPtrApiVersionsRequest(), 1)
		if _, _, err := rc.read(); err != nil {
			return "", err
		}
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	client := ca.Client("client", pkix.Name{CommonName: "client"})
	if got, err := serial("MTLS", ca.ClientTLS(&client)); err != nil || got != cert2.Cert.SerialNumber.String() {
		t.Fatalf("MTLS with a certificate: serial %s %v, want %s", got, err, cert2.Cert.SerialNumber)
	}
	if _, err := serial("MTLS", ca.ClientTLS(nil)); err == nil {
		t.Fatal("MTLS served a client without a certificate")
	}
	if got, err := serial("TLS", ca.ClientTLS(nil)); err != nil || got != cert1.Cert.SerialNumber.String() {
		t.Fatalf("TLS: serial %s %v, want %s", got, err, cert1.Cert.SerialNumber)
	}
}

// Overrides that cannot apply fail Start with a message naming the
// listener.
func TestListenerSecurityInvalid(t *testing.T) {
	ca := testcerts.NewCA(t, "")
	pair := ca.Server("server")
	hour := time.Hour
	for _, tc := range []struct {
		name string
		sec  map[string]ListenerSecurity
		want string
	}{
		{"unknown listener", map[string]ListenerSecurity{"NOPE": {SASLMechanisms: []string{auth.Plain}}}, "NOPE"},
		{"TLS on a plaintext listener", map[string]ListenerSecurity{"PLAINTEXT": {TLS: &TLSConfig{CertFile: pair.CertFile, KeyFile: pair.KeyFile}}}, "without TLS"},
		{"SASL on a plaintext listener", map[string]ListenerSecurity{"PLAINTEXT": {MaxReauth: &hour}}, "without SASL"},
		{"unknown mechanism", map[string]ListenerSecurity{"SASL_PLAINTEXT": {SASLMechanisms: []string{"GSSAPI"}}}, "GSSAPI"},
		{"OAUTHBEARER without keys", map[string]ListenerSecurity{"SASL_PLAINTEXT": {SASLMechanisms: []string{auth.OAuthBearer}}}, "OAUTHBEARER"},
		{"no mechanism", map[string]ListenerSecurity{"SASL_PLAINTEXT": {SASLMechanisms: []string{}}}, "no SASL mechanism"},
		{"bad client auth", map[string]ListenerSecurity{"SSL": {TLS: &TLSConfig{CertFile: pair.CertFile, KeyFile: pair.KeyFile, ClientAuth: "always"}}}, "always"},
	} {
		cfg := Config{DataDir: t.TempDir(), Listeners: []Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: SASLPlaintext}, {Name: "SSL", Addr: "127.0.0.1:0", Protocol: SSL}},
			TLS: TLSConfig{CertFile: pair.CertFile, KeyFile: pair.KeyFile}, ListenerSecurity: tc.sec}
		b, err := Start(testCtx(t), cfg)
		if err == nil {
			b.Close()
			t.Errorf("%s: started", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to name %q", tc.name, err, tc.want)
		}
	}
}
