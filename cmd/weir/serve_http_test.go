package main

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/testcerts"
)

// The HTTP fronts require authentication by default as soon as a Kafka
// listener authenticates its clients; --http-auth overrides it; bad
// settings are refused before anything starts.
func TestServeHTTPAuthSettings(t *testing.T) {
	plain := []broker.Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:9092", Protocol: broker.Plaintext}}
	sasl := append(plain, broker.Listener{Name: "SASL_SSL", Addr: "0.0.0.0:9093", Protocol: broker.SASLSSL})
	ssl := append(plain, broker.Listener{Name: "SSL", Addr: "0.0.0.0:9093", Protocol: broker.SSL})
	for _, tc := range []struct {
		flag string
		ls   []broker.Listener
		tls  broker.TLSConfig
		want broker.HTTPAuthMode
	}{
		{"", plain, broker.TLSConfig{}, broker.HTTPAuthOptional},
		{"", sasl, broker.TLSConfig{}, broker.HTTPAuthRequired},
		{"", ssl, broker.TLSConfig{}, broker.HTTPAuthOptional}, // SSL without client certificates
		{"", ssl, broker.TLSConfig{ClientCAFile: "/ca.pem"}, broker.HTTPAuthRequired},
		{"", ssl, broker.TLSConfig{ClientCAFile: "/ca.pem", ClientAuth: "requested"}, broker.HTTPAuthOptional},
		{"optional", sasl, broker.TLSConfig{}, broker.HTTPAuthOptional},
		{"Required", plain, broker.TLSConfig{}, broker.HTTPAuthRequired},
	} {
		h := httpOptions{auth: tc.flag}
		if err := h.validate(); err != nil {
			t.Fatal(err)
		}
		if got := h.mode(tc.ls, tc.tls, nil); got != tc.want {
			t.Errorf("--http-auth %q, listeners %v, tls %+v: %s, want %s", tc.flag, tc.ls, tc.tls, got, tc.want)
		}
	}
	for _, bad := range [][]string{
		{"--http-auth", "sometimes"},
		{"--http-client-auth", "always", "--http-tls"},
		{"--http-client-auth", "required"}, // without --http-tls
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--registry-addr", "off"}, bad...)
		if _, errOut, code := runCLI(t, "", args...); code == 0 || !strings.Contains(errOut, "http") {
			t.Errorf("%v: exit %d %q", bad, code, errOut)
		}
	}
	// --http-tls without a certificate fails at start with a clear error.
	_, errOut, code := runCLI(t, "", "serve", "--data-dir", t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--registry-addr", "off", "--http-tls")
	if code == 0 || !strings.Contains(errOut, "--http-tls") {
		t.Errorf("--http-tls without a certificate: exit %d %q", code, errOut)
	}
	// A non-loopback front without authentication, or taking passwords
	// over plain HTTP, is warned about; a loopback one is not.
	var term bytes.Buffer
	warnHTTPExposed(&term, slog.New(slog.DiscardHandler), "the HTTP API", "0.0.0.0:9644", &httpFront{mode: broker.HTTPAuthOptional})
	if !strings.Contains(term.String(), "WITHOUT AUTHENTICATION") || !strings.Contains(term.String(), "plain HTTP") {
		t.Fatalf("banner: %q", term.String())
	}
	term.Reset()
	warnHTTPExposed(&term, slog.New(slog.DiscardHandler), "the HTTP API", "127.0.0.1:9644", &httpFront{mode: broker.HTTPAuthOptional})
	if term.Len() != 0 {
		t.Fatalf("warned for loopback: %q", term.String())
	}
}

const (
	httpAdminPW = "pw-Admin-6001"
	httpAlicePW = "pw-Alice-6002"
	httpBobPW   = "pw-Bob-6003"
)

// weir serve as a process with a SASL_SSL listener, the ACL authorizer
// and --http-tls: /metrics, the admin API and the schema registry each
// answer 401 without or with wrong credentials, 403 to a user or client
// certificate the ACLs do not name, 200 to one they do; curl and a Go
// client with a client certificate are real clients; no credential
// reaches the log.
func TestServeHTTPSecurityProcess(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "")
	srv := ca.Server("server")
	svc := ca.Client("svc", pkix.Name{CommonName: "svc", Organization: []string{"weir"}})
	stranger := ca.Client("stranger", pkix.Name{CommonName: "stranger"})
	for user, pw := range map[string]string{"admin": httpAdminPW, "alice": httpAlicePW, "bob": httpBobPW} {
		t.Setenv("WEIR_USER_PASSWORD", pw)
		mustCLI(t, "", "user", "create", user, "--data-dir", dir)
	}
	// Only a SASL_SSL listener, and no ACL at the first start: the
	// in-process registry reaches the broker as its own principal all the
	// same.
	p := startServe(t, nil, "--data-dir", dir, "--registry-addr", "127.0.0.1:0",
		"--listeners", "SASL_SSL://127.0.0.1:0",
		"--tls-cert", srv.CertFile, "--tls-key", srv.KeyFile, "--tls-client-ca", ca.File,
		"--authorizer", "acl", "--super-users", "User:admin", "--http-tls")
	var secure, regAddr string
	p.mu.Lock()
	for _, l := range p.lines {
		switch l["msg"] {
		case "weir serving":
			ls, _ := l["listeners"].(string)
			for _, part := range strings.Split(ls, ",") {
				if rest, ok := strings.CutPrefix(part, "SASL_SSL://"); ok {
					secure = rest
				}
			}
		case "schema registry listening":
			regAddr, _ = l["addr"].(string)
		}
	}
	p.mu.Unlock()
	if secure == "" || regAddr == "" {
		t.Fatalf("no SASL_SSL listener or registry logged:\n%s", p.log())
	}

	// The ACLs, set by the super user over SASL_SSL.
	mech := scram.Auth{User: "admin", Pass: httpAdminPW}.AsSha512Mechanism()
	cl, err := kgo.NewClient(kgo.SeedBrokers(secure), kgo.DialTLSConfig(ca.ClientTLS(nil)), kgo.SASL(mech))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	lit := kadm.ACLPatternLiteral
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribe).ResourcePatternType(lit),
		kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(lit),
		kadm.NewACLs().Allow("User:CN=svc,O=weir").Clusters().Operations(kadm.OpDescribe).ResourcePatternType(lit),
	} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create ACL: %v", r.Err)
			}
		}
	}

	// A certificate's principal holds commas: weir acl takes it whole.
	t.Setenv("WEIR_SASL_PASSWORD", httpAdminPW)
	mustCLI(t, "", "acl", "add", "-b", secure, "--tls-ca", ca.File, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin",
		"--allow", "User:CN=svc,O=weir", "--operation", "read", "--topic", "orders")

	api, reg := "https://"+p.httpAddr, "https://"+regAddr
	schema := `{"schema":"{\"type\":\"record\",\"name\":\"Order\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}"}`
	do := func(method, url, body, user, pw string, cert *testcerts.Pair) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(cert)}}
		defer c.CloseIdleConnections()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s %s: 401 without a Basic challenge", method, url)
		}
		return resp.StatusCode, string(b)
	}
	// The first version is registered by alice (WRITE on orders).
	if code, body := do("POST", reg+"/subjects/orders-value/versions", schema, "alice", httpAlicePW, nil); code != 200 {
		t.Fatalf("alice registers: %d %s", code, body)
	}
	for _, fam := range []struct {
		name, method, url, body string
		alice, svc              int // with their ACLs
	}{
		{"metrics", "GET", api + "/metrics", "", 200, 200},
		{"admin API", "GET", api + "/v1/partitions/orders", "", 200, 200},
		{"registry read", "GET", reg + "/subjects/orders-value/versions", "", 200, 200},
		{"registry write", "POST", reg + "/subjects/orders-value/versions", schema, 200, 403},
		{"registry global config", "GET", reg + "/config", "", 200, 200}, // cluster DESCRIBE suffices
		{"registry global config change", "PUT", reg + "/config", `{"compatibility":"FULL"}`, 403, 403},
		{"registry subject config", "GET", reg + "/config/orders-value?defaultToGlobal=true", "", 200, 200}, // WRITE/READ imply DESCRIBE
	} {
		for _, tc := range []struct {
			who      string
			user, pw string
			cert     *testcerts.Pair
			want     int
		}{
			{"no credentials", "", "", nil, 401},
			{"wrong password", "alice", "not-" + httpAlicePW, nil, 401},
			{"unknown user", "mallory", httpAlicePW, nil, 401},
			{"user without ACL", "bob", httpBobPW, nil, 403},
			{"user with ACL", "alice", httpAlicePW, nil, fam.alice},
			{"certificate with ACL", "", "", &svc, fam.svc},
			{"certificate without ACL", "", "", &stranger, 403},
			{"super user", "admin", httpAdminPW, nil, 200},
		} {
			if code, body := do(fam.method, fam.url, fam.body, tc.user, tc.pw, tc.cert); code != tc.want {
				t.Errorf("%s, %s: %d %.200s, want %d", fam.name, tc.who, code, body, tc.want)
			}
		}
	}
	if code, _ := do("GET", api+"/healthz", "", "", "", nil); code != 200 {
		t.Errorf("/healthz without credentials: %d", code)
	}

	// A Confluent client library (franz-go's sr) with basic auth.
	src, err := sr.NewClient(sr.URLs(reg), sr.DialTLSConfig(ca.ClientTLS(nil)), sr.BasicAuth("alice", httpAlicePW))
	if err != nil {
		t.Fatal(err)
	}
	if subs, err := src.Subjects(ctx); err != nil || len(subs) != 1 || subs[0] != "orders-value" {
		t.Fatalf("sr client as alice: %v %v", subs, err)
	}
	bobc, _ := sr.NewClient(sr.URLs(reg), sr.DialTLSConfig(ca.ClientTLS(nil)), sr.BasicAuth("bob", httpBobPW))
	if subs, err := bobc.Subjects(ctx); err != nil || len(subs) != 0 {
		t.Fatalf("sr client as bob sees %v %v, want none", subs, err)
	}

	// curl, a real client: basic auth, a client certificate, nothing.
	curl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("curl", append([]string{"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", ca.File, "--max-time", "10"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v %s", args, err, out)
		}
		return string(out)
	}
	if got := curl("-u", "alice:"+httpAlicePW, api+"/metrics"); got != "200" {
		t.Errorf("curl -u alice /metrics: %s", got)
	}
	if got := curl("-u", "alice:wrong", api+"/metrics"); got != "401" {
		t.Errorf("curl wrong password: %s", got)
	}
	if got := curl(api + "/v1/partitions/orders"); got != "401" {
		t.Errorf("curl without credentials: %s", got)
	}
	if got := curl("--cert", svc.CertFile, "--key", svc.KeyFile, reg+"/subjects/orders-value/versions/latest"); got != "200" {
		t.Errorf("curl with svc's certificate: %s", got)
	}
	if got := curl("-u", "bob:"+httpBobPW, reg+"/subjects/orders-value/versions/latest"); got != "403" {
		t.Errorf("curl as bob: %s", got)
	}

	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.log())
	}
	log := p.log()
	for _, secret := range []string{httpAdminPW, httpAlicePW, httpBobPW, "not-" + httpAlicePW,
		base64.StdEncoding.EncodeToString([]byte("alice:" + httpAlicePW)), base64.StdEncoding.EncodeToString([]byte("bob:" + httpBobPW))} {
		if strings.Contains(log, secret) {
			t.Fatalf("a credential (%q) is in the log:\n%s", secret, log)
		}
	}
	if !strings.Contains(log, "http authentication failed") {
		t.Fatalf("failed HTTP logins not logged:\n%s", log)
	}
}
