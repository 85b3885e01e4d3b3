package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/weirtest"
)

func TestServeSecurityFlags(t *testing.T) {
	o := &serveOptions{}
	cmd := newServeCmdFor(o)
	if err := cmd.ParseFlags([]string{"--data-dir", "/d", "--authorizer", "acl", "--super-users", "User:admin,User:ops",
		"--allow-everyone-if-no-acl-found"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.brokerConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Authorizer != "acl" || !slices.Equal(cfg.SuperUsers, []string{"User:admin", "User:ops"}) || !cfg.AllowEveryoneIfNoACLFound {
		t.Fatalf("security config: %q %q %v", cfg.Authorizer, cfg.SuperUsers, cfg.AllowEveryoneIfNoACLFound)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--authorizer", "ranger"}},
		{[]string{"--authorizer", "acl", "--super-users", "admin"}},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--http-addr", ""}, tc.args...)
		_, errOut, code := runCLI(t, "", args...)
		if code == 0 || (!strings.Contains(errOut, "authorizer") && !strings.Contains(errOut, "super user")) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errOut)
		}
	}
}

func TestMetricsACL(t *testing.T) {
	// allow.everyone.if.no.acl.found lets the (ANONYMOUS) client create
	// the first cluster ACL; from then on the cluster needs one.
	b := weirtest.Start(t, weirtest.BrokerConfig(func(c *broker.Config) {
		c.Authorizer = "acl"
		c.SuperUsers = []string{"User:admin"}
		c.AllowEveryoneIfNoACLFound = true
	}))
	var healthy atomic.Bool
	healthy.Store(true)
	h := metricsACL(b.Broker(), newHTTPHandler(prometheus.NewRegistry(), &healthy))
	get := func(path, principal string) int {
		r := httptest.NewRequest("GET", path, nil)
		if principal != "" {
			r = r.WithContext(broker.WithPrincipal(r.Context(), principal))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if got := get("/metrics", "User:prom"); got != http.StatusOK {
		t.Fatalf("no cluster ACL yet, allow.everyone: %d", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := b.Admin().CreateACLs(ctx, kadm.NewACLs().Allow("User:prom").Clusters().Operations(kadm.OpDescribe).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("create ACL: %v %+v", err, res)
	}
	for _, tc := range []struct {
		path, principal string
		want            int
	}{
		{"/metrics", "", http.StatusForbidden},
		{"/metrics", "User:eve", http.StatusForbidden},
		{"/metrics", "User:prom", http.StatusOK},
		{"/metrics", "User:admin", http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		if got := get(tc.path, tc.principal); got != tc.want {
			t.Errorf("GET %s as %q: %d, want %d", tc.path, tc.principal, got, tc.want)
		}
	}
}
