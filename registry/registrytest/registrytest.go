// Package registrytest runs weir's schema registry inside a Go test: on the
// cluster a test already started (weirtest), served over HTTP on a random
// 127.0.0.1 port, stopped by t.Cleanup.
package registrytest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/registry"
)

// Serve starts a registry on the cluster at brokers and returns its URL.
// It fails the test if the registry cannot start.
func Serve(t testing.TB, brokers ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := registry.Start(ctx, registry.Config{Brokers: brokers})
	if err != nil {
		t.Fatalf("registrytest: start registry: %v", err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(func() {
		srv.Close()
		reg.Close()
	})
	return srv.URL
}

// ServeClusterAuth starts a registry as weir registry runs one: on the
// cluster at brokers with its own client options own (its SASL login),
// behind a ClusterAuth (cfg, whose Brokers are set to brokers) that
// authenticates and authorizes each request with the cluster. It returns
// the registry's URL.
func ServeClusterAuth(t testing.TB, brokers []string, own []kgo.Opt, cfg registry.ClusterAuthConfig) string {
	t.Helper()
	cfg.Brokers = brokers
	ca, err := registry.NewClusterAuth(cfg)
	if err != nil {
		t.Fatalf("registrytest: cluster auth: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := registry.Start(ctx, registry.Config{Brokers: brokers, ClientOpts: own, Authorizer: ca.Authorizer()})
	if err != nil {
		ca.Close()
		t.Fatalf("registrytest: start registry: %v", err)
	}
	srv := httptest.NewServer(ca.Middleware(reg.Handler()))
	t.Cleanup(func() {
		srv.Close()
		ca.Close()
		reg.Close()
	})
	return srv.URL
}
