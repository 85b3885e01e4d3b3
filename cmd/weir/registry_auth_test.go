package main

import (
	"bufio"
	"context"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/auth"
	"github.com/weirhq/weir/internal/testcerts"

	"github.com/weirhq/weir/weirtest"
)

// aclCluster is a weir broker whose only listener is SASL_PLAINTEXT with
// SCRAM users and the ACL authorizer: admin (super user), the registry's
// own user, alice (WRITE on the topics "orders*"), bob (no ACL).
type aclCluster struct {
	b       *broker.Broker
	addr    string
	metrics *prometheus.Registry
}

var aclClusterUsers = map[string]string{
	"admin":    "admin-Pw-4471",
	"registry": "registry-Pw-1180",
	"alice":    "alice-Pw-9023",
	"bob":      "bob-Pw-3310",
}

func startACLCluster(t *testing.T, mod ...func(*broker.Config)) *aclCluster {
	t.Helper()
	dir := t.TempDir()
	for user, pw := range aclClusterUsers {
		for _, mech := range []string{auth.ScramSHA256, auth.ScramSHA512} {
			if err := broker.SetScramPassword(nil, dir, user, mech, pw, auth.MinIterations); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	metrics := prometheus.NewRegistry()
	cfg := broker.Config{
		DataDir: dir, Registerer: metrics, GroupInitialRebalanceDelay: -1,
		Listeners:  []broker.Listener{{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: broker.SASLPlaintext}},
		Authorizer: "acl", SuperUsers: []string{"User:admin", "User:registry"},
	}
	for _, m := range mod {
		m(&cfg)
	}
	b, err := broker.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c := &aclCluster{b: b, addr: b.ListenerAddr("SASL_PLAINTEXT"), metrics: metrics}
	c.allowOrders(t, "User:alice")
	return c
}

// allowOrders gives principal WRITE on the topics "orders*".
func (c *aclCluster) allowOrders(t *testing.T, principal string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client(t, "admin"))
	acls := kadm.NewACLs().Allow(principal).Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed)
	res, err := adm.CreateACLs(ctx, acls)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create acl: %v", r.Err)
		}
	}
}

func (c *aclCluster) client(t *testing.T, user string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addr),
		kgo.SASL(scram.Auth{User: user, Pass: aclClusterUsers[user]}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// startStandaloneRegistry runs weir registry (runRegistry, as the command
// does) on the cluster with the registry's own SCRAM login and extra
// flags, and returns its URL and its log.
func startStandaloneRegistry(t *testing.T, c *aclCluster, args ...string) (string, *weirtest.SyncBuffer) {
	t.Helper()
	cmd := newRegistryCmd()
	if err := cmd.ParseFlags(append([]string{"-b", c.addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "registry",
		"--sasl-password", aclClusterUsers["registry"], "--timeout", "10s"}, args...)); err != nil {
		t.Fatal(err)
	}
	// The flags bound by newRegistryCmd are read back through cobra.
	f := cmd.Flags()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &weirtest.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		cmd.SetContext(ctx)
		cmd.SetOut(pw)
		cmd.SetErr(logs)
		if err := f.Set("listen", "127.0.0.1:0"); err != nil {
			done <- err
			pw.Close()
			return
		}
		done <- cmd.RunE(cmd, nil)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("weir registry stopped with %v", err)
		}
	})
	br := bufio.NewReader(pr)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("weir registry did not start: %v\n%s", err, logs.String())
		}
		if rest, ok := strings.CutPrefix(line, "weir registry: serving "); ok {
			go io.Copy(io.Discard, br)
			return strings.Fields(rest)[0], logs
		}
	}
}

type regResponse struct {
	status int
	header http.Header
	body   map[string]any
}

func regDo(t *testing.T, method, url, user, password, body string) regResponse {
	t.Helper()
	authz := ""
	if user != "" {
		authz = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	return regDoWith(t, http.DefaultClient, method, url, authz, body)
}

// regDoWith sends a request with the Authorization header authz ("":
// none) through cl.
func regDoWith(t *testing.T, cl *http.Client, method, url, authz, body string) regResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := regResponse{status: resp.StatusCode, header: resp.Header}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// weir registry on a SASL/ACL cluster: a user with the ACL registers
// (200), a wrong password and no credentials get 401 with a challenge, a
// user without the ACL gets 403 with Confluent's 40301; the password is
// never logged.
func TestStandaloneRegistryClusterAuth(t *testing.T) {
	c := startACLCluster(t)
	url, logs := startStandaloneRegistry(t, c, "--http-auth-cache-ttl", "1m")
	schema := `{"schema":"{\"type\":\"record\",\"name\":\"O\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}"}`

	r := regDo(t, "POST", url+"/subjects/orders-value/versions", "alice", aclClusterUsers["alice"], schema)
	if r.status != 200 || r.body["id"] != float64(1) {
		t.Fatalf("alice registers: %d %v", r.status, r.body)
	}
	// WRITE implies DESCRIBE: alice reads what she registered.
	if r := regDo(t, "GET", url+"/subjects/orders-value/versions/1", "alice", aclClusterUsers["alice"], ""); r.status != 200 {
		t.Fatalf("alice reads: %d %v", r.status, r.body)
	}
	for _, tc := range []struct {
		name, user, password string
	}{
		{"wrong password", "alice", "not-" + aclClusterUsers["alice"]},
		{"unknown user", "mallory", aclClusterUsers["alice"]},
		{"anonymous", "", ""},
	} {
		r := regDo(t, "GET", url+"/subjects/orders-value/versions/1", tc.user, tc.password, "")
		if r.status != 401 || r.body["error_code"] != float64(401) || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s: %d %v %v, want 401 with a Basic challenge", tc.name, r.status, r.header, r.body)
		}
	}
	r = regDo(t, "POST", url+"/subjects/orders-value/versions", "bob", aclClusterUsers["bob"], schema)
	if r.status != 403 || r.body["error_code"] != float64(40301) {
		t.Fatalf("bob registers: %d %v, want 403 with 40301", r.status, r.body)
	}
	// alice's ACL covers "orders*" only, and not the global level.
	if r := regDo(t, "POST", url+"/subjects/payments-value/versions", "alice", aclClusterUsers["alice"], schema); r.status != 403 {
		t.Fatalf("alice registers payments-value: %d %v, want 403", r.status, r.body)
	}
	if r := regDo(t, "PUT", url+"/config", "alice", aclClusterUsers["alice"], `{"compatibility":"NONE"}`); r.status != 403 {
		t.Fatalf("alice sets the global level: %d %v, want 403", r.status, r.body)
	}
	// The listing shows only what the user may read.
	req := regDo(t, "GET", url+"/subjects", "bob", aclClusterUsers["bob"], "")
	if req.status != 200 {
		t.Fatalf("bob lists: %d", req.status)
	}
	for _, p := range aclClusterUsers {
		if strings.Contains(logs.String(), p) {
			t.Fatalf("a password is in the log:\n%s", logs.String())
		}
	}
}

// A wrong password is not tried against the cluster on every request:
// the same one is answered from the cache, and another one for the same
// user waits out the backoff (401 with Retry-After) without a login.
func TestStandaloneRegistryFailedLoginThrottle(t *testing.T) {
	c := startACLCluster(t)
	url, _ := startStandaloneRegistry(t, c)
	failures := func() float64 { return scramFailures(t, c) }
	before := failures()
	for i := range 5 {
		r := regDo(t, "GET", url+"/subjects", "alice", "wrong-1", "")
		if r.status != 401 {
			t.Fatalf("attempt %d: %d", i, r.status)
		}
	}
	r := regDo(t, "GET", url+"/subjects", "alice", "wrong-2", "")
	if r.status != 401 || r.header.Get("Retry-After") == "" {
		t.Fatalf("another wrong password right after: %d %v, want 401 with Retry-After", r.status, r.header)
	}
	if got := failures() - before; got < 1 || got > 2 {
		t.Fatalf("%v failed logins reached the cluster for 6 wrong attempts; want the first only (kgo retries it once on a new connection)", got)
	}
	// The right password, after the backoff, logs in.
	time.Sleep(1100 * time.Millisecond)
	if r := regDo(t, "GET", url+"/subjects", "alice", aclClusterUsers["alice"], ""); r.status != 200 {
		t.Fatalf("right password after the backoff: %d %v", r.status, r.body)
	}
}

// scramFailures is the broker's count of failed SASL logins.
func scramFailures(t *testing.T, c *aclCluster) float64 {
	t.Helper()
	var total float64
	mfs, err := c.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasSuffix(mf.GetName(), "authentications_total") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == "failure" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// weir registry over HTTPS with client certificates and bearer tokens: a
// certificate's principal (User:CN=...) is authorized by the ACLs the
// registry lists for it, a bearer token by an OAUTHBEARER login; a
// principal without the ACL gets 403, an invalid token 401.
func TestStandaloneRegistryMTLSAndBearer(t *testing.T) {
	issuer := testcerts.NewIssuer(t, "", "k1")
	c := startACLCluster(t, func(cfg *broker.Config) { cfg.SASL.OAuth.JWKSFile = issuer.JWKSFile })
	c.allowOrders(t, "User:CN=carol")
	c.allowOrders(t, "User:dave")
	ca := testcerts.NewCA(t, "")
	srv := ca.Server("registry")
	url, logs := startStandaloneRegistry(t, c, "--http-tls-cert", srv.CertFile, "--http-tls-key", srv.KeyFile, "--http-tls-client-ca", ca.File)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("serving %s, want https", url)
	}
	schema := `{"schema":"{\"type\":\"record\",\"name\":\"O\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}"}`
	httpsAs := func(subject string) *http.Client {
		var pair *testcerts.Pair
		if subject != "" {
			p := ca.Client(subject, pkix.Name{CommonName: subject})
			pair = &p
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(pair)}}
	}
	token := func(sub string) string {
		return "Bearer " + issuer.Sign(map[string]any{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
	}
	basicAlice := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+aclClusterUsers["alice"]))
	for _, tc := range []struct {
		name   string
		cl     *http.Client
		authz  string
		status int
	}{
		{"certificate with the ACL", httpsAs("carol"), "", 200},
		{"certificate without the ACL", httpsAs("eve"), "", 403},
		{"no certificate, no credentials", httpsAs(""), "", 401},
		{"bearer token with the ACL", httpsAs(""), token("dave"), 200},
		{"bearer token without the ACL", httpsAs(""), token("erin"), 403},
		{"invalid bearer token", httpsAs(""), "Bearer not.a.token", 401},
		{"basic auth over HTTPS", httpsAs(""), basicAlice, 200},
	} {
		r := regDoWith(t, tc.cl, "POST", url+"/subjects/orders-value/versions", tc.authz, schema)
		if r.status != tc.status {
			t.Errorf("%s: %d %v, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
	if t.Failed() {
		t.Logf("registry log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "Bearer ") {
		t.Fatalf("a token is in the log:\n%s", logs.String())
	}
}

// weir registry's HTTP security flags: the combinations refused before
// anything starts.
func TestRegistryHTTPFlagsValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--http-auth", "required"}, true},
		{[]string{"--http-auth", "sometimes"}, false},
		{[]string{"--http-tls-cert", "c.pem"}, false}, // no key
		{[]string{"--http-tls-cert", "c.pem", "--http-tls-key", "k.pem"}, true},
		{[]string{"--http-tls-client-ca", "ca.pem"}, false},                                                        // no HTTPS
		{[]string{"--http-tls-cert", "c.pem", "--http-tls-key", "k.pem", "--http-client-auth", "required"}, false}, // no CA
		{[]string{"--http-tls-cert", "c.pem", "--http-tls-key", "k.pem", "--http-tls-client-ca", "ca.pem", "--http-client-auth", "required"}, true},
		{[]string{"--http-tls-cert", "c.pem", "--http-tls-key", "k.pem", "--http-tls-client-ca", "ca.pem", "--http-client-auth", "maybe"}, false},
		{[]string{"--http-auth-mechanism", "scram-sha-256"}, true},
		{[]string{"--http-auth-mechanism", "OAUTHBEARER"}, false},
	} {
		cmd := newRegistryCmd()
		var hf registryHTTPFlags
		f := cmd.Flags()
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		hf.auth, _ = f.GetString("http-auth")
		hf.tlsCert, _ = f.GetString("http-tls-cert")
		hf.tlsKey, _ = f.GetString("http-tls-key")
		hf.tlsClientCA, _ = f.GetString("http-tls-client-ca")
		hf.clientAuth, _ = f.GetString("http-client-auth")
		hf.mechanism, _ = f.GetString("http-auth-mechanism")
		if err := hf.validate(); (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}
