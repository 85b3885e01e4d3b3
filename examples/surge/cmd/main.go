// Command cmd runs the surge example against any Kafka-protocol cluster:
// weir (weir serve), Kafka or Redpanda.
//
//	go run ./examples/surge/cmd --brokers 127.0.0.1:9092            # app + generator, until Ctrl-C
//	go run ./examples/surge/cmd --rate 0                            # the app alone, on your own events
//
// It creates the topics ride-requests, driver-status and zone-surge if they
// do not exist (the App creates its internal topics), prints the App's
// delivery guarantees, then a table of the zones as it changes. `weir dev`
// runs the same thing on an embedded broker.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/demo/surge"
)

func main() {
	var (
		brokers    = flag.String("brokers", envOr("WEIR_BROKERS", "127.0.0.1:9092"), "seed brokers, comma-separated (also WEIR_BROKERS)")
		rate       = flag.Float64("rate", 20, "generated events per second (0: no generator, process what arrives)")
		duration   = flag.Duration("duration", 0, "stop after this long, once everything generated is processed (0: until interrupted)")
		partitions = flag.Int("partitions", 3, "partitions of the topics, when this creates them")
		stateDir   = flag.String("state-dir", filepath.Join(os.TempDir(), "weir-surge"), "local state stores (a cache of the changelogs)")
		appID      = flag.String("app-id", surge.AppID, "application id: consumer group and internal topic prefix")
		seed       = flag.Uint64("seed", uint64(time.Now().UnixNano()), "generator seed")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := surge.RunDemo(ctx, surge.DemoOptions{
		Brokers:    strings.Split(*brokers, ","),
		AppID:      *appID,
		Partitions: int32(*partitions),
		StateDir:   *stateDir,
		Rate:       *rate,
		Seed:       *seed,
		Duration:   *duration,
		Out:        os.Stdout,
		Live:       isTerminal(os.Stdout),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "surge:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
