// Command nexmark runs one Nexmark query as a stream application against
// any Kafka-protocol cluster (weir serve, Kafka, Redpanda):
//
//	go run ./examples/nexmark --query qN --brokers HOST:PORT --input TOPIC --output TOPIC \
//	    [--out-of-orderness DURATION] [--guarantee at-least-once|exactly-once] [--bounded]
//
// The input topic holds Nexmark events in the JSON format of package
// bench/nexmark (`weir bench nexmark generate` writes them). The output
// topic is created when missing, with the input's partition count.
//
// Without --bounded the query runs until interrupted (Ctrl-C, SIGTERM),
// then commits and leaves its group. With --bounded it processes the input
// up to its end at start, closes every window and fires every timer (the
// end-of-input watermark), commits and exits 0.
//
// The queries are in bench/nexmark, one file each (q0.go, q1.go, ...): this
// runner only declares the chosen one on a Builder (nexmark.Build) and runs
// the App.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/bench/nexmark"
	"github.com/weirhq/weir/stream"
)

func main() {
	var (
		query     = flag.String("query", "", "the query to run: "+strings.Join(nexmark.Queries(), ", ")+" (required)")
		brokers   = flag.String("brokers", "127.0.0.1:9092", "seed brokers, HOST:PORT, comma-separated")
		input     = flag.String("input", "", "topic of Nexmark events to read (required)")
		output    = flag.String("output", "", "topic to write the results to, created when missing (required)")
		disorder  = flag.Duration("out-of-orderness", 0, "how far an event may be behind the latest event time of its partition (the watermark's bound)")
		guarantee = flag.String("guarantee", "at-least-once", "delivery guarantee: at-least-once or exactly-once")
		bounded   = flag.Bool("bounded", false, "process the input up to its end, close all windows, commit and exit")
		appID     = flag.String("app-id", "", "application id: consumer group and internal topic prefix (default nexmark-<query>)")
		stateDir  = flag.String("state-dir", "", "local state stores, a cache of the changelogs (default: a directory under the system's temp dir)")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		usage(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	if *query == "" || *input == "" || *output == "" {
		usage(errors.New("--query, --input and --output are required"))
	}
	var g stream.Guarantee
	switch *guarantee {
	case "at-least-once":
		g = stream.AtLeastOnce
	case "exactly-once":
		g = stream.ExactlyOnce
	default:
		usage(fmt.Errorf("--guarantee %q: want at-least-once or exactly-once", *guarantee))
	}
	if *appID == "" {
		*appID = "nexmark-" + *query
	}
	if *stateDir == "" {
		*stateDir = filepath.Join(os.TempDir(), "weir-nexmark")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, config{query: *query, brokers: strings.Split(*brokers, ","), input: *input, output: *output,
		opts: nexmark.Options{OutOfOrderness: *disorder}, guarantee: g, bounded: *bounded, appID: *appID, stateDir: *stateDir})
	if err != nil {
		fmt.Fprintf(os.Stderr, "nexmark %s: %v\n", *query, err)
		os.Exit(1)
	}
}

type config struct {
	query, input, output string
	brokers              []string
	opts                 nexmark.Options
	guarantee            stream.Guarantee
	bounded              bool
	appID, stateDir      string
}

func run(ctx context.Context, c config) error {
	// The topology: the query, declared on a Builder.
	b := stream.NewBuilder()
	if err := nexmark.Build(b, c.query, c.input, c.output, c.opts); err != nil {
		return err
	}
	// The output topic, as many partitions as the input.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...))
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = nexmark.EnsureOutput(tctx, kadm.NewClient(cl), c.input, c.output)
	cancel()
	cl.Close()
	if err != nil {
		return err
	}
	// The App: the query's watermark, the guarantee, brokers and state.
	app, err := stream.NewApp(c.appID, b, append(nexmark.AppOptions(c.opts),
		stream.Brokers(c.brokers...), stream.Delivery(c.guarantee), stream.StateDir(c.stateDir))...)
	if err != nil {
		return err
	}
	if !c.bounded {
		return app.Run(ctx) // until interrupted: flush, commit, leave the group
	}
	start := time.Now()
	if err := app.RunBounded(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "nexmark %s: %s read to its end, results in %s (%v)\n",
		c.query, c.input, c.output, time.Since(start).Round(time.Millisecond))
	return nil
}

func usage(err error) {
	fmt.Fprintf(os.Stderr, "nexmark: %v\n\n", err)
	flag.Usage()
	os.Exit(2)
}
