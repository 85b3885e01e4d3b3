package registry

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/goleak"

	"github.com/weirhq/weir/weirtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/cockroachdb/pebble/v2.(*cleanupManager).mainLoop"))
}

// testRegistry is a registry on an in-process broker, served over HTTP on
// 127.0.0.1.
type testRegistry struct {
	broker *weirtest.Broker
	reg    *Registry
	srv    *httptest.Server
	client *sr.Client
}

func startRegistry(t testing.TB, opts ...weirtest.Option) *testRegistry {
	t.Helper()
	b := weirtest.Start(t, opts...)
	return startRegistryOn(t, b, Config{})
}

func startRegistryOn(t testing.TB, b *weirtest.Broker, cfg Config) *testRegistry {
	t.Helper()
	cfg.Brokers = []string{b.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start registry: %v", err)
	}
	srv := httptest.NewServer(reg.Handler())
	cl, err := sr.NewClient(sr.URLs(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	tr := &testRegistry{broker: b, reg: reg, srv: srv, client: cl}
	t.Cleanup(tr.close)
	return tr
}

func (tr *testRegistry) close() {
	if tr.srv != nil {
		tr.srv.Close()
		tr.reg.Close()
		tr.srv = nil
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
