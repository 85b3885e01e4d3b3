package main

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/testcerts"
	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

// A stream App's query API behind queryFront (stream.QueryMiddleware):
// basic auth against the broker's SCRAM users, then READ on the store's
// changelog for its data and DESCRIBE on the App's group for the store
// list.
func TestQueryHTTPAuth(t *testing.T) {
	ca := testcerts.NewCA(t, "")
	srvPair := ca.Server("server")
	wb := weirtest.Start(t, weirtest.BrokerConfig(func(c *broker.Config) {
		c.TLS = broker.TLSConfig{CertFile: srvPair.CertFile, KeyFile: srvPair.KeyFile, ClientCAFile: ca.File}
		c.Authorizer = "acl"
		c.SuperUsers = []string{"User:admin"}
		// The App's own client is User:ANONYMOUS on PLAINTEXT; the
		// topics no ACL names stay open to it.
		c.AllowEveryoneIfNoACLFound = true
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := wb.Admin()
	ures, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: httpAlicePW},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: httpBobPW},
	})
	if err != nil {
		t.Fatal(err)
	}
	ures.EachError(func(a kadm.AlteredUserSCRAM) { t.Fatalf("user %s: %v", a.User, a.Err) })
	wb.CreateTopic("words", 1)
	const changelog = "qa-counts-changelog"
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:ANONYMOUS").Topics("qa-").Groups("qa").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed),
		kadm.NewACLs().Allow("User:alice").Topics(changelog).Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").Groups("qa").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:CN=dash,O=weir").Topics(changelog).Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
	} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("ACL: %v", r.Err)
			}
		}
	}
	for _, r := range []*kgo.Record{{Topic: "words", Key: []byte("a")}, {Topic: "words", Key: []byte("b")}, {Topic: "words", Key: []byte("a")}} {
		if err := wb.Client().ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	sb := stream.NewBuilder()
	words := stream.From(sb, "words", stream.String(), stream.String())
	stream.Count(stream.GroupByKey(words), stream.StoreConfig{Name: "counts", TTL: time.Hour})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	app, err := stream.NewApp("qa", sb, stream.Brokers(wb.Addr()), stream.StateDir(t.TempDir()),
		stream.CommitInterval(50*time.Millisecond), stream.QueryServer(addr),
		stream.QueryMiddleware(queryFront(wb.Broker(), broker.HTTPAuthRequired, "qa", streamChangelog("qa"))))
	if err != nil {
		t.Fatal(err)
	}
	if st := app.Stores(); len(st) != 1 || st[0].Changelog != changelog || streamChangelog("qa")("counts") != changelog {
		t.Fatalf("stores %+v: the changelog naming differs from streamChangelog", st)
	}
	appCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(appCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("app: %v", err)
		}
	}()

	get := func(path, user, pw string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Until the App has counted: a = 2.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get("/v1/stores/counts/get?key=a", "alice", httpAlicePW)
		var out struct {
			Entry struct {
				Value json.RawMessage `json:"value"`
			} `json:"entry"`
		}
		if code == 200 && json.Unmarshal([]byte(body), &out) == nil && string(out.Entry.Value) == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice never read a=2: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, tc := range []struct {
		path, user, pw string
		want           int
	}{
		{"/v1/stores/counts/get?key=a", "", "", 401},
		{"/v1/stores/counts/get?key=a", "alice", "wrong", 401},
		{"/v1/stores/counts/get?key=a", "bob", httpBobPW, 403},
		{"/v1/stores/counts/range", "bob", httpBobPW, 403},
		{"/v1/stores/counts/range", "alice", httpAlicePW, 200},
		{"/v1/stores/counts/metadata?key=a", "alice", httpAlicePW, 200}, // READ implies DESCRIBE
		{"/v1/stores/counts/metadata?key=a", "bob", httpBobPW, 403},
		{"/v1/stores", "alice", httpAlicePW, 200},
		{"/v1/stores", "bob", httpBobPW, 403},
		{"/v1/stores/nope/get?key=a", "alice", httpAlicePW, 403}, // its changelog is not alice's
		{"/v1/describe", "alice", httpAlicePW, 200},              // DESCRIBE on the group
		{"/v1/describe", "bob", httpBobPW, 403},
		{"/v1/nothing", "alice", httpAlicePW, 404},
	} {
		code, body := get(tc.path, tc.user, tc.pw)
		if code != tc.want {
			t.Errorf("GET %s as %q: %d %s, want %d", tc.path, tc.user, code, body, tc.want)
		}
		if code == 403 && !strings.Contains(body, `"code":"forbidden"`) {
			t.Errorf("GET %s as %q: 403 body %s", tc.path, tc.user, body)
		}
	}

	// weir describe asks the query API with the user's credentials.
	out := mustCLI(t, "", "describe", "--brokers="+wb.Addr(), "qa", "--sasl-user", "alice", "--sasl-password", httpAlicePW)
	if !strings.Contains(out, "# from http://"+addr+"/v1/describe\napp qa (at-least-once)\n") {
		t.Errorf("weir describe as alice:\n%s", out)
	}
	out = mustCLI(t, "", "describe", "--brokers="+wb.Addr(), "qa", "--sasl-user", "bob", "--sasl-password", httpBobPW)
	if !strings.Contains(out, "# the application's statement: http://"+addr+"/v1/describe: 403 Forbidden") {
		t.Errorf("weir describe as bob:\n%s", out)
	}

	// The App's handler mounted on an HTTPS server of the broker's TLS
	// settings: a client certificate is a principal the ACLs name.
	tcfg, err := wb.Broker().HTTPTLSConfig("")
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: queryFront(wb.Broker(), broker.HTTPAuthRequired, "qa", streamChangelog("qa"))(app.QueryHandler()),
		ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(tls.NewListener(tln, tcfg))
	defer hs.Close()
	dash := ca.Client("dash", pkix.Name{CommonName: "dash", Organization: []string{"weir"}})
	other := ca.Client("other", pkix.Name{CommonName: "other"})
	for _, tc := range []struct {
		path string
		cert *testcerts.Pair
		want int
	}{
		{"/v1/stores/counts/get?key=a", &dash, 200},
		{"/v1/stores/counts/get?key=a", &other, 403},
		{"/v1/stores", &dash, 403}, // no DESCRIBE on the group
		{"/v1/stores/counts/get?key=a", nil, 401},
	} {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(tc.cert)}}
		resp, err := c.Get("https://" + tln.Addr().String() + tc.path)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		resp.Body.Close()
		c.CloseIdleConnections()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s over mTLS (%v): %d, want %d", tc.path, tc.cert != nil, resp.StatusCode, tc.want)
		}
	}
}

// weir dev --query-addr serves the demo App's query API through the
// broker's HTTP front: dev's broker has no users nor authorizer, so a
// request without credentials is served and wrong credentials are not.
func TestDevQueryHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := runCLI(t, "", "dev", "--duration", "4s", "--kafka-addr", "127.0.0.1:0", "--http-addr", "off",
			"--registry-addr", "off", "--data-dir", "", "--rate", "50", "--plain", "--query-addr", addr)
		done <- result{out, errOut, code}
	}()
	get := func(path, user, pw string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for get("/v1/stores", "", "") != 200 {
		select {
		case r := <-done:
			t.Fatalf("weir dev ended before its query API answered: exit %d\n%s\n%s", r.code, r.out, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the query API never answered 200")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := get("/v1/stores", "nobody", "pw"); code != http.StatusUnauthorized {
		t.Errorf("wrong credentials: %d, want 401", code)
	}
	r := <-done
	if r.code != 0 || !strings.Contains(r.out, "query the app's state: curl http://"+addr) {
		t.Fatalf("weir dev: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
}
