package broker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testBroker starts a broker on 127.0.0.1:0 in a fresh temp dir (or dir, if
// given) and closes it at the end of the test.
func testBroker(t testing.TB, mod ...func(*Config)) (*Broker, Config) {
	t.Helper()
	cfg := Config{
		DataDir:    t.TempDir(),
		KafkaAddr:  "127.0.0.1:0",
		Registerer: prometheus.NewRegistry(),

		GroupInitialRebalanceDelay: -1,
	}
	for _, f := range mod {
		f(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b, cfg
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testNow() time.Time { return time.Unix(1_700_000_000, 0) }
