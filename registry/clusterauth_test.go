package registry

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/weirtest"
)

// A ClusterAuth on a weir broker with a SASL listener and no authorizer:
// a login is cached (the same *login serves the next request), the cache
// holds at most MaxLogins (the least recently used is dropped and its
// connection closed: goleak in TestMain checks none is left), and the
// handler sees the principal but not the Authorization header.
func TestClusterAuthLoginCache(t *testing.T) {
	b := weirtest.Start(t, weirtest.BrokerConfig(func(c *broker.Config) {
		c.Listeners = []broker.Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: broker.SASLPlaintext}}
	}))
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var ups []kadm.UpsertSCRAM
	for i := range 3 {
		ups = append(ups, kadm.UpsertSCRAM{User: fmt.Sprintf("u%d", i), Mechanism: kadm.ScramSha512, Iterations: 4096, Password: fmt.Sprintf("pw-%d", i)})
	}
	if _, err := kadm.NewClient(cl).AlterUserSCRAMs(ctxT(t), nil, ups); err != nil {
		t.Fatal(err)
	}
	a, err := NewClusterAuth(ClusterAuthConfig{Brokers: []string{b.Broker().ListenerAddr("SASL_PLAINTEXT")}, MaxLogins: 2, Required: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s", Principal(r), r.Header.Get("Authorization"))
	})))
	defer srv.Close()
	as := func(i int, password string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.SetBasicAuth(fmt.Sprintf("u%d", i), password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	loginOf := func(i int) *login {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.logins[a.digest("basic", a.cfg.Mechanism, fmt.Sprintf("u%d", i), fmt.Sprintf("pw-%d", i))]
	}
	if st, body := as(0, "pw-0"); st != 200 || body != "User:u0|" {
		t.Fatalf("u0: %d %q", st, body)
	}
	first := loginOf(0)
	if st, _ := as(0, "pw-0"); st != 200 || loginOf(0) != first || first == nil {
		t.Fatalf("u0 again: %d, login %p then %p: want the cached one", st, first, loginOf(0))
	}
	if st, _ := as(1, "pw-1"); st != 200 {
		t.Fatalf("u1: %d", st)
	}
	as(0, "pw-0") // u0 is now the most recently used
	if st, _ := as(2, "pw-2"); st != 200 {
		t.Fatalf("u2: %d", st)
	}
	a.mu.Lock()
	n, lru := len(a.logins), a.lru.Len()
	a.mu.Unlock()
	if n != 2 || lru != 2 || loginOf(1) != nil || loginOf(0) != first || loginOf(2) == nil {
		t.Fatalf("after 3 logins with MaxLogins 2: %d cached (lru %d), u0 %p (was %p), u1 %p, u2 %p; want u0 and u2",
			n, lru, loginOf(0), first, loginOf(1), loginOf(2))
	}
	if st, _ := as(1, "wrong"); st != http.StatusUnauthorized {
		t.Fatalf("u1 with a wrong password: %d", st)
	}
	a.mu.Lock()
	n = len(a.logins)
	a.mu.Unlock()
	if n != 2 {
		t.Fatalf("a failed login left %d logins cached, want 2 (it is cached too, evicting one)", n)
	}
}
