package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/vfs"
)

func startErr(t *testing.T, cfg Config) (*Broker, error) {
	t.Helper()
	cfg.Registerer = prometheus.NewRegistry()
	cfg.KafkaAddr = "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Start(ctx, cfg)
}

// TestDataDirLock: a second broker on a data directory in use refuses to
// start, naming the holder's pid and Kafka address, and leaves the first
// one's data alone; once the first closes, the directory is free again.
// Run on the OS (flock) and on the in-memory file system.
func TestDataDirLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   func() vfs.FS
	}{
		{"os", func() vfs.FS { return vfs.Default }},
		{"mem", func() vfs.FS { return vfs.NewCrashableMem() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := tc.fs()
			first, cfg := testBroker(t, func(c *Config) { c.FS = fs })
			ctx := testCtx(t)
			mustCreate(t, ctx, first, "t", 1)
			cl := newClient(t, first, kgo.DefaultProduceTopic("t"))
			if err := cl.ProduceSync(ctx, kgo.StringRecord("acked")).FirstErr(); err != nil {
				t.Fatal(err)
			}

			second, err := startErr(t, cfg)
			if err == nil {
				second.Close()
				t.Fatal("a second broker started on a data directory in use")
			}
			if !errors.Is(err, ErrDataDirLocked) {
				t.Fatalf("second Start: %v, want ErrDataDirLocked", err)
			}
			for _, want := range []string{fmt.Sprintf("pid=%d", os.Getpid()), "kafka=" + first.Addr(), cfg.DataDir} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}

			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := startErr(t, cfg)
			if err != nil {
				t.Fatalf("Start after the holder closed: %v", err)
			}
			defer again.Close()
			ends, err := kadm.NewClient(newClient(t, again)).ListEndOffsets(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := ends.Lookup("t", 0); o.Offset != 1 {
				t.Fatalf("after the refused start and a restart: end offset %+v, want 1", o)
			}
		})
	}
}

// TestDataDirLockReleasedOnFailedStart: a Start that fails after taking
// the lock (here: the listen address is taken) releases it.
func TestDataDirLockReleasedOnFailedStart(t *testing.T) {
	first, _ := testBroker(t)
	dir := t.TempDir()
	ctx := testCtx(t)
	_, err := Start(ctx, Config{DataDir: dir, KafkaAddr: first.Addr(), Registerer: prometheus.NewRegistry()})
	if err == nil || errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("Start on a taken port: %v, want a listen error", err)
	}
	b, err := startErr(t, Config{DataDir: dir})
	if err != nil {
		t.Fatalf("Start after a failed start: %v", err)
	}
	b.Close()
}
