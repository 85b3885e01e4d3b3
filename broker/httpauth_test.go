package broker

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/broker/auth"
	"github.com/weirhq/weir/broker/authz"
	"github.com/weirhq/weir/internal/testcerts"
)

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// httpEnv is an ACL broker with SCRAM users alice and bob, a CA for
// client certificates, and an HTTPS front on the admin API.
type httpEnv struct {
	b    *Broker
	ca   *testcerts.CA
	logs *syncBuffer
	url  string
	seen chan http.Header // headers the handler saw
}

const (
	httpAlicePass = "alice-Http-5522"
	httpBobPass   = "bob-Http-9911"
	httpDelay     = 80 * time.Millisecond
)

func newHTTPEnv(t *testing.T, mode HTTPAuthMode, acl bool, mods ...func(*Config)) *httpEnv {
	t.Helper()
	e := &httpEnv{ca: testcerts.NewCA(t, ""), logs: &syncBuffer{}, seen: make(chan http.Header, 64)}
	srvPair := e.ca.Server("server")
	mod := func(c *Config) {
		c.TLS = TLSConfig{CertFile: srvPair.CertFile, KeyFile: srvPair.KeyFile, ClientCAFile: e.ca.File}
		c.SASL.FailedAuthDelay = httpDelay
		c.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if acl {
		e.b, _ = aclBroker(t, append([]func(*Config){mod}, mods...)...)
	} else {
		e.b, _ = testBroker(t, append([]func(*Config){mod}, mods...)...)
	}
	for user, pw := range map[string]string{"alice": httpAlicePass, "bob": httpBobPass} {
		c, err := auth.NewScramCredentialFromPassword(auth.ScramSHA256, pw, auth.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.b.scram.apply([]scramChange{{User: user, Mechanism: auth.ScramSHA256, Cred: &c}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kadm.NewClient(clientAs(t, e.b, "admin")).CreateTopic(testCtx(t), 1, 1, nil, "h"); err != nil {
		t.Fatal(err)
	}
	if acl {
		if _, err := e.b.authz.Create([]authz.Binding{
			{ResourceType: authz.ResourceTopic, ResourceName: "h", PatternType: authz.PatternLiteral,
				Principal: "User:alice", Host: "*", Operation: authz.OpRead, Permission: authz.PermAllow},
			{ResourceType: authz.ResourceTopic, ResourceName: "h", PatternType: authz.PatternLiteral,
				Principal: "User:CN=svc,O=weir", Host: "*", Operation: authz.OpDescribe, Permission: authz.PermAllow},
		}); err != nil {
			t.Fatal(err)
		}
	}
	tcfg, err := e.b.HTTPTLSConfig("")
	if err != nil {
		t.Fatal(err)
	}
	probe := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.seen <- r.Header.Clone()
		e.b.AdminHandler().ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.b.HTTPAuthenticator(mode, probe), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(tls.NewListener(ln, tcfg))
	t.Cleanup(func() { srv.Close() })
	e.url = "https://" + ln.Addr().String()
	return e
}

// get requests path with the header set (if not empty) and the client
// certificate pair (if not nil).
func (e *httpEnv) get(t *testing.T, path, authorization string, cert *testcerts.Pair) (*http.Response, string) {
	t.Helper()
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: e.ca.ClientTLS(cert)}}
	defer cl.CloseIdleConnections()
	req, err := http.NewRequest("GET", e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// The admin API behind the HTTP front, over HTTPS: basic auth against
// the SCRAM users and mTLS principals, then the ACLs.
func TestHTTPAuthAdminMatrix(t *testing.T) {
	e := newHTTPEnv(t, HTTPAuthRequired, true)
	svc := e.ca.Client("svc", pkix.Name{CommonName: "svc", Organization: []string{"weir"}})
	other := e.ca.Client("other", pkix.Name{CommonName: "other"})
	for _, tc := range []struct {
		name   string
		auth   string
		cert   *testcerts.Pair
		want   int
		failed bool // a failed login: answered after the delay
	}{
		{"no credentials", "", nil, http.StatusUnauthorized, false},
		{"wrong password", basic("alice", "not-"+httpAlicePass), nil, http.StatusUnauthorized, true},
		{"unknown user", basic("mallory", httpAlicePass), nil, http.StatusUnauthorized, true},
		{"other scheme", "Bearer abc.def.ghi", nil, http.StatusUnauthorized, true},
		{"malformed", "Basic %%%", nil, http.StatusUnauthorized, true},
		{"user without ACL", basic("bob", httpBobPass), nil, http.StatusForbidden, false},
		{"user with ACL", basic("alice", httpAlicePass), nil, http.StatusOK, false},
		{"cert with ACL", "", &svc, http.StatusOK, false},
		{"cert without ACL", "", &other, http.StatusForbidden, false},
		{"cert and wrong password", basic("alice", "nope"), &svc, http.StatusUnauthorized, true},
		{"cert and another user", basic("bob", httpBobPass), &svc, http.StatusForbidden, false}, // the header decides
	} {
		start := time.Now()
		resp, body := e.get(t, "/v1/partitions/h", tc.auth, tc.cert)
		took := time.Since(start)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
		if tc.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, resp.Header.Get("WWW-Authenticate"))
		}
		if tc.failed && took < httpDelay {
			t.Errorf("%s: failed login answered after %v, before the %v delay", tc.name, took, httpDelay)
		}
	}
	// Handlers never see the credentials.
	for len(e.seen) > 0 {
		if h := <-e.seen; h.Get("Authorization") != "" {
			t.Fatalf("the handler saw the Authorization header")
		}
	}
	// Nothing of a password reaches the log, in clear or base64.
	logs := e.logs.String()
	for _, secret := range []string{httpAlicePass, httpBobPass, "not-" + httpAlicePass,
		strings.TrimPrefix(basic("alice", httpAlicePass), "Basic "), strings.TrimPrefix(basic("alice", "not-"+httpAlicePass), "Basic ")} {
		if strings.Contains(logs, secret) {
			t.Fatalf("log holds a credential %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, "http authentication failed") {
		t.Fatalf("failed logins not logged:\n%s", logs)
	}
	// 5 failed logins and 3 successful ones (bob, alice, bob beside a
	// certificate); a certificate alone is not a login.
	count := func(result string) float64 {
		var m dto.Metric
		if err := e.b.metrics.authentications.WithLabelValues("HTTP_BASIC", result).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	if f, s := count("failure"), count("success"); f != 5 || s != 3 {
		t.Fatalf("HTTP_BASIC failures %v successes %v, want 5 and 3", f, s)
	}
}

// In optional mode a request without credentials is User:ANONYMOUS (the
// ACLs decide), wrong credentials are still refused; without an
// authorizer anonymous requests are served.
func TestHTTPAuthOptional(t *testing.T) {
	e := newHTTPEnv(t, HTTPAuthOptional, true)
	if resp, _ := e.get(t, "/v1/partitions/h", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous with ACLs: %d", resp.StatusCode)
	}
	if resp, _ := e.get(t, "/v1/partitions/h", basic("alice", "wrong"), nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password in optional mode: %d", resp.StatusCode)
	}
	if resp, _ := e.get(t, "/v1/partitions/h", basic("alice", httpAlicePass), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice: %d", resp.StatusCode)
	}
	open := newHTTPEnv(t, HTTPAuthOptional, false)
	if resp, body := open.get(t, "/v1/partitions/h", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("anonymous without authorizer: %d %s", resp.StatusCode, body)
	}
	req := newHTTPEnv(t, HTTPAuthRequired, false)
	if resp, _ := req.get(t, "/v1/partitions/h", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("required without authorizer, no credentials: %d", resp.StatusCode)
	}
	if resp, _ := req.get(t, "/v1/partitions/h", basic("bob", httpBobPass), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("required without authorizer, bob: %d", resp.StatusCode)
	}
}

// HTTPTLSConfig: TLS 1.2 minimum; "required" refuses clients without a
// certificate; a client CA is needed for client certificates.
func TestHTTPTLSConfig(t *testing.T) {
	e := newHTTPEnv(t, HTTPAuthRequired, false)
	cfg, err := e.b.HTTPTLSConfig("required")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.b.HTTPAuthenticator(HTTPAuthRequired, e.b.AdminHandler()), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(tls.NewListener(ln, cfg))
	defer srv.Close()
	url := "https://" + ln.Addr().String() + "/v1/partitions/h"
	try := func(c *tls.Config) (int, error) {
		cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}
		defer cl.CloseIdleConnections()
		resp, err := cl.Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if _, err := try(e.ca.ClientTLS(nil)); err == nil {
		t.Fatal("served a client without a certificate with client auth required")
	}
	svc := e.ca.Client("svc2", pkix.Name{CommonName: "svc"})
	if code, err := try(e.ca.ClientTLS(&svc)); err != nil || code != http.StatusOK {
		t.Fatalf("client with a certificate: %d %v", code, err)
	}
	old := e.ca.ClientTLS(nil)
	old.MaxVersion = tls.VersionTLS11
	if _, err := try(old); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
	noCA, _ := testBroker(t, func(c *Config) { c.TLS = e.b.cfg.TLS; c.TLS.ClientCAFile = "" })
	if _, err := noCA.HTTPTLSConfig("required"); err == nil {
		t.Fatal("client auth required without a client CA accepted")
	}
	if _, err := e.b.HTTPTLSConfig("sometimes"); err == nil {
		t.Fatal("bad client auth accepted")
	}
	bare, _ := testBroker(t)
	if _, err := bare.HTTPTLSConfig(""); err == nil {
		t.Fatal("TLS without a certificate accepted")
	}
}

// With OAUTHBEARER configured, a bearer token validated as OAUTHBEARER
// validates it authenticates as its subject; invalid or expired ones are
// 401 after the delay, and the 401 offers both schemes.
func TestHTTPAuthBearer(t *testing.T) {
	issuer := testcerts.NewIssuer(t, "", "k1")
	e := newHTTPEnv(t, HTTPAuthRequired, true, func(c *Config) {
		c.SASL.OAuth = OAuthConfig{JWKSFile: issuer.JWKSFile, Issuer: "https://idp.test", Audience: "weir"}
	})
	if _, err := e.b.authz.Create([]authz.Binding{{ResourceType: authz.ResourceTopic, ResourceName: "h", PatternType: authz.PatternLiteral,
		Principal: "User:svc-orders", Host: "*", Operation: authz.OpDescribe, Permission: authz.PermAllow}}); err != nil {
		t.Fatal(err)
	}
	token := func(sub, aud string, exp time.Duration) string {
		return issuer.Sign(map[string]any{"sub": sub, "iss": "https://idp.test", "aud": aud,
			"exp": time.Now().Add(exp).Unix(), "iat": time.Now().Unix()})
	}
	good := token("svc-orders", "weir", time.Hour)
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"valid token", "Bearer " + good, http.StatusOK},
		{"scheme in lower case", "bearer " + good, http.StatusOK},
		{"subject without ACL", "Bearer " + token("nobody", "weir", time.Hour), http.StatusForbidden},
		{"expired", "Bearer " + token("svc-orders", "weir", -time.Hour), http.StatusUnauthorized},
		{"other audience", "Bearer " + token("svc-orders", "kafka", time.Hour), http.StatusUnauthorized},
		{"not a JWT", "Bearer abc", http.StatusUnauthorized},
		{"empty", "Bearer ", http.StatusUnauthorized},
		{"basic still works", basic("alice", httpAlicePass), http.StatusOK},
	} {
		start := time.Now()
		resp, body := e.get(t, "/v1/partitions/h", tc.auth, nil)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
		if tc.want == http.StatusUnauthorized {
			if time.Since(start) < httpDelay {
				t.Errorf("%s: answered before the failed-login delay", tc.name)
			}
			if ch := resp.Header.Values("WWW-Authenticate"); len(ch) != 2 || !strings.HasPrefix(ch[1], "Bearer ") {
				t.Errorf("%s: challenges %q", tc.name, ch)
			}
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, good) || strings.Contains(logs, strings.Split(good, ".")[2]) {
		t.Fatalf("the token is in the log:\n%s", logs)
	}
}

// The HTTPS front serves a certificate written over the files to new
// connections, without a restart (the listeners' reloader).
func TestHTTPTLSReload(t *testing.T) {
	e := newHTTPEnv(t, HTTPAuthOptional, false)
	serial := func() string {
		t.Helper()
		cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: e.ca.ClientTLS(nil), DisableKeepAlives: true}}
		resp, err := cl.Get(e.url + "/v1/partitions/h")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	fresh := e.ca.Server("server") // the same files, a new certificate
	want := fresh.Cert.SerialNumber.String()
	if want == before {
		t.Fatal("the new certificate has the old serial")
	}
	deadline := time.Now().Add(10 * time.Second)
	for serial() != want {
		if time.Now().After(deadline) {
			t.Fatalf("still serving serial %s, want %s", before, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkHTTPAuthenticator: the cost a front adds per request, basic
// auth (a PBKDF2 derivation with the user's iteration count) against an
// anonymous request, on the same handler in the same run.
func BenchmarkHTTPAuthenticator(b *testing.B) {
	br, _ := testBroker(b)
	c, err := auth.NewScramCredentialFromPassword(auth.ScramSHA512, "pw-Bench-1", auth.MinIterations)
	if err != nil {
		b.Fatal(err)
	}
	if err := br.scram.apply([]scramChange{{User: "bench", Mechanism: auth.ScramSHA512, Cred: &c}}); err != nil {
		b.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := br.HTTPAuthenticator(HTTPAuthOptional, ok)
	for _, bc := range []struct{ name, auth string }{{"anonymous", ""}, {"basic", basic("bench", "pw-Bench-1")}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				r := httptest.NewRequest("GET", "/metrics", nil)
				if bc.auth != "" {
					r.Header.Set("Authorization", bc.auth)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusNoContent {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}

// A password-guessing loop pays the delay on every guess and holds up no
// one else: an authenticated client is served meanwhile.
func TestHTTPGuessingLoopDelayed(t *testing.T) {
	e := newHTTPEnv(t, HTTPAuthRequired, true)
	svc := e.ca.Client("svc-loop", pkix.Name{CommonName: "svc", Organization: []string{"weir"}})
	const guesses = 5
	done := make(chan time.Duration, 1)
	go func() {
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: e.ca.ClientTLS(nil)}}
		defer cl.CloseIdleConnections()
		start := time.Now()
		for i := range guesses {
			req, _ := http.NewRequest("GET", e.url+"/v1/partitions/h", nil)
			req.SetBasicAuth("alice", "guess-"+string(rune('a'+i)))
			resp, err := cl.Do(req)
			if err != nil {
				done <- -1
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				done <- -1
				return
			}
		}
		done <- time.Since(start)
	}()
	served := 0
	for {
		select {
		case took := <-done:
			if took < 0 {
				t.Fatal("a guess was not answered 401")
			}
			if took < guesses*httpDelay {
				t.Fatalf("%d guesses answered in %v, less than %d delays", guesses, took, guesses)
			}
			if served < 2 {
				t.Fatalf("the authenticated client was served %d times during the guessing loop", served)
			}
			return
		default:
		}
		if resp, _ := e.get(t, "/v1/partitions/h", "", &svc); resp.StatusCode != http.StatusOK {
			t.Fatalf("authenticated client: %d", resp.StatusCode)
		}
		served++
		time.Sleep(10 * time.Millisecond)
	}
}
