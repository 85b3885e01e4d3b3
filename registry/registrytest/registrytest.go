// Package registrytest runs weir's schema registry inside a Go test: on the
// cluster a test already started (weirtest), served over HTTP on a random
// 127.0.0.1 port, stopped by t.Cleanup.
package registrytest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

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
