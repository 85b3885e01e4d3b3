package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/bench/nexmark"
	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/stream"
)

type nexmarkBenchOptions struct {
	query          string
	events         int
	partitions     int32
	seed           uint64
	eventRate      int64
	disorder       time.Duration
	outOfOrderness time.Duration
	guarantee      string
	rounds         int
	check          bool
	dataDir        string
	cpuProfile     string
}

// newBenchNexmarkCmd is `weir bench nexmark`: with --query, it runs one
// query bounded on an embedded broker beside a hand-written franz-go loop.
func newBenchNexmarkCmd() *cobra.Command {
	o := &nexmarkBenchOptions{}
	cmd := &cobra.Command{
		Use:   "nexmark",
		Short: "The Nexmark streaming benchmark: run a query on an embedded broker, or generate events",
		Long: `With --query, run one Nexmark query (the stream programs of bench/nexmark) on an
embedded broker started for the run, and compare it with a hand-written franz-go loop:

  1. generate --events events into a topic of --partitions partitions (not timed);
  2. the hand loop: one franz-go client in a consumer group consumes the input and produces
     every record unchanged to an output topic, until all are read and acknowledged;
  3. the query: a stream App runs it bounded (RunBounded: the input to its end, every
     window closed and timer fired at the end of input, committed);
  4. --check: the query's output is compared with the batch reference over the same events.

Each of 2 and 3 is timed from the start of its client or App to its end: events per second
of wall time, and events per CPU-second of the whole process (user + system time, the
embedded broker included: the same broker serves both). --rounds alternates 2 and 3 on
fresh topics and reports the median ratios. The machine's load shows in the figures: compare
the ratio, measured in the same run, rather than absolute figures across runs.`,
		Example: `  weir bench nexmark --query q0 --events 1000000
  weir bench nexmark --query q4 --events 500000 --disorder 2s --rounds 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.query == "" {
				return cmd.Help()
			}
			if !cmd.Flags().Changed("out-of-orderness") {
				o.outOfOrderness = o.disorder
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.query, "query", "", "the query to run: "+strings.Join(nexmark.Queries(), ", "))
	f.IntVar(&o.events, "events", 1_000_000, "number of events")
	f.Int32Var(&o.partitions, "partitions", 4, "partitions of the input topic (and of the outputs)")
	f.Uint64Var(&o.seed, "seed", 1, "random seed of the generator")
	f.Int64Var(&o.eventRate, "event-rate", 10_000, "events per second of event time")
	f.DurationVar(&o.disorder, "disorder", 0, "bounded disorder of the generated events")
	f.DurationVar(&o.outOfOrderness, "out-of-orderness", 0, "the query's watermark bound (default: --disorder)")
	f.StringVar(&o.guarantee, "guarantee", "at-least-once", "the query's delivery guarantee: at-least-once or exactly-once")
	f.IntVar(&o.rounds, "rounds", 1, "hand loop and query runs, alternating; the medians are reported")
	f.BoolVar(&o.check, "check", true, "compare the query's output (first round) with the batch reference")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the query's runs (all rounds) to this file")
	f.StringVar(&o.dataDir, "data-dir", "", "directory for the broker's data and the App's state (default: a temporary directory, removed)")
	return cmd
}

// benchRun is one timed run: events handled, wall time and the process's
// CPU time.
type benchRun struct {
	events    int
	wall, cpu time.Duration
}

func (r benchRun) rate() float64   { return float64(r.events) / r.wall.Seconds() }
func (r benchRun) perCPU() float64 { return float64(r.events) / r.cpu.Seconds() }

// processCPU is the user and system time the process has used.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// timed runs fn and measures it.
func timed(events int, fn func() error) (benchRun, error) {
	runtime.GC() // the previous phase's garbage is not this one's
	cpu0, err := processCPU()
	if err != nil {
		return benchRun{}, err
	}
	start := time.Now()
	if err := fn(); err != nil {
		return benchRun{}, err
	}
	wall := time.Since(start)
	cpu1, err := processCPU()
	if err != nil {
		return benchRun{}, err
	}
	return benchRun{events: events, wall: wall, cpu: cpu1 - cpu0}, nil
}

func (o *nexmarkBenchOptions) validate() (stream.Guarantee, error) {
	var g stream.Guarantee
	switch o.guarantee {
	case "at-least-once":
		g = stream.AtLeastOnce
	case "exactly-once":
		g = stream.ExactlyOnce
	default:
		return g, fmt.Errorf("--guarantee %q: want at-least-once or exactly-once", o.guarantee)
	}
	switch {
	case o.events < 1:
		return g, fmt.Errorf("--events %d: need at least 1", o.events)
	case o.partitions < 1:
		return g, fmt.Errorf("--partitions %d: need at least 1", o.partitions)
	case o.rounds < 1:
		return g, fmt.Errorf("--rounds %d: need at least 1", o.rounds)
	case o.outOfOrderness < 0:
		return g, fmt.Errorf("--out-of-orderness %v is negative", o.outOfOrderness)
	}
	if !slices.Contains(nexmark.Queries(), o.query) {
		return g, fmt.Errorf("--query %q: want one of %s", o.query, strings.Join(nexmark.Queries(), ", "))
	}
	return g, nil
}

func (o *nexmarkBenchOptions) run(ctx context.Context, stdout io.Writer) (err error) {
	g, err := o.validate()
	if err != nil {
		return err
	}
	gen, err := nexmark.NewGenerator(nexmark.GeneratorConfig{Seed: o.seed, BaseTime: 1_700_000_000_000,
		EventsPerSecond: o.eventRate, Disorder: o.disorder})
	if err != nil {
		return err
	}
	dir := o.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "weir-nexmark-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	b, err := broker.Start(ctx, broker.Config{
		DataDir:                    filepath.Join(dir, "broker"),
		KafkaAddr:                  "127.0.0.1:0",
		GroupInitialRebalanceDelay: -1,
		Logger:                     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fmt.Errorf("start embedded broker: %w", err)
	}
	defer func() {
		if cerr := b.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("broker close: %w", cerr)
		}
	}()
	seeds := []string{b.Addr()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	const input = "nexmark-events"
	if _, err := adm.CreateTopic(ctx, o.partitions, -1, nil, input); err != nil {
		return fmt.Errorf("create %s: %w", input, err)
	}
	events := make([]nexmark.Event, o.events)
	for i := range events {
		events[i] = gen.Next()
	}
	start := time.Now()
	if err := nexmark.WriteEvents(ctx, cl, input, events, o.partitions); err != nil {
		return err
	}
	var counts [3]int
	for _, e := range events {
		counts[e.Type]++
	}
	fmt.Fprintf(stdout, "nexmark %s: %d events (%d persons, %d auctions, %d bids), %d partitions, seed %d, event-rate %d/s, disorder %v, out-of-orderness %v, %s\n",
		o.query, o.events, counts[0], counts[1], counts[2], o.partitions, o.seed, o.eventRate, o.disorder,
		o.outOfOrderness, g)
	fmt.Fprintf(stdout, "machine: %s/%s, %d CPUs, GOMAXPROCS %d, %s; embedded broker in this process\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(stdout, "generate:  %d events written in %v (not timed below)\n", o.events, time.Since(start).Round(time.Millisecond))

	var prof *os.File
	if o.cpuProfile != "" {
		if prof, err = os.Create(o.cpuProfile); err != nil {
			return err
		}
		defer prof.Close()
	}
	var hands, queries []benchRun
	var rateRatios, cpuRatios []float64
	results := 0
	for round := 1; round <= o.rounds; round++ {
		handOut, queryOut := fmt.Sprintf("hand-out-%d", round), fmt.Sprintf("%s-out-%d", o.query, round)
		for _, t := range []string{handOut, queryOut} {
			if err := nexmark.EnsureOutput(ctx, adm, input, t); err != nil {
				return err
			}
		}
		h, err := timed(o.events, func() error { return handLoop(ctx, seeds, input, handOut, o.events, round) })
		if err != nil {
			return fmt.Errorf("hand loop: %w", err)
		}
		appID := fmt.Sprintf("nexmark-%s-%d", o.query, round)
		q, err := timed(o.events, func() error {
			if prof != nil {
				if err := pprof.StartCPUProfile(prof); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			return o.runQuery(ctx, seeds, g, appID, input, queryOut, filepath.Join(dir, "state"))
		})
		if err != nil {
			return fmt.Errorf("query %s: %w", o.query, err)
		}
		dlq, err := nexmark.ReadTopic(ctx, appID+".dlq", kgo.SeedBrokers(seeds...))
		if err == nil && len(dlq) > 0 {
			return fmt.Errorf("query %s: %d records went to the dead-letter topic %s.dlq", o.query, len(dlq), appID)
		}
		hands, queries = append(hands, h), append(queries, q)
		rateRatios, cpuRatios = append(rateRatios, q.rate()/h.rate()), append(cpuRatios, q.perCPU()/h.perCPU())
		fmt.Fprintf(stdout, "round %d: hand loop %s | %s %s | ratio %.2f events/s, %.2f events/CPU-s\n",
			round, h, o.query, q, q.rate()/h.rate(), q.perCPU()/h.perCPU())
		if round == 1 && o.check {
			out, err := nexmark.ReadTopic(ctx, queryOut, kgo.SeedBrokers(seeds...))
			if err != nil {
				return err
			}
			if err := nexmark.Check(o.query, events, out); err != nil {
				return err
			}
			results = len(out)
		}
	}
	med := func(rs []benchRun, f func(benchRun) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	fmt.Fprintf(stdout, "hand loop: %.0f events/s, %.0f events/CPU-s (median of %d)\n",
		med(hands, benchRun.rate), med(hands, benchRun.perCPU), o.rounds)
	fmt.Fprintf(stdout, "%s: %.0f events/s, %.0f events/CPU-s (median of %d)\n",
		o.query, med(queries, benchRun.rate), med(queries, benchRun.perCPU), o.rounds)
	fmt.Fprintf(stdout, "ratio %s/hand loop: %.2f events/s, %.2f events/CPU-s (median of %d)\n",
		o.query, median(rateRatios), median(cpuRatios), o.rounds)
	if o.check {
		fmt.Fprintf(stdout, "check: %d output records equal the batch reference\n", results)
	}
	return nil
}

func (r benchRun) String() string {
	return fmt.Sprintf("%v wall, %v CPU: %.0f events/s, %.0f events/CPU-s",
		r.wall.Round(time.Millisecond), r.cpu.Round(time.Millisecond), r.rate(), r.perCPU())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runQuery runs the query bounded as a stream App: declared with
// nexmark.Build, read to the end of its input, committed.
func (o *nexmarkBenchOptions) runQuery(ctx context.Context, seeds []string, g stream.Guarantee,
	appID, input, output, stateDir string,
) error {
	opts := nexmark.Options{OutOfOrderness: o.outOfOrderness}
	bl := stream.NewBuilder()
	if err := nexmark.Build(bl, o.query, input, output, opts); err != nil {
		return err
	}
	app, err := stream.NewApp(appID, bl, append(nexmark.AppOptions(opts),
		stream.Brokers(seeds...), stream.Delivery(g), stream.StateDir(stateDir))...)
	if err != nil {
		return err
	}
	return app.RunBounded(ctx)
}

// handLoop is the baseline: franz-go alone, as one would write a
// pass-through by hand — a consumer-group member reading the input from the
// start and producing each record unchanged (key, value, timestamp) to the
// same partition of output, until n records were read and every produce was
// acknowledged (acks=all, idempotent: franz-go's defaults). No decoding, no
// state.
func handLoop(ctx context.Context, seeds []string, input, output string, n, round int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(fmt.Sprintf("nexmark-hand-%d", round)),
		kgo.ConsumeTopics(input), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var produceErr error
	failed := make(chan error, 1)
	seen := 0
	for seen < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			cl.Produce(ctx, &kgo.Record{Topic: output, Partition: r.Partition, Key: r.Key, Value: r.Value,
				Timestamp: r.Timestamp}, func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case failed <- err:
					default:
					}
				}
			})
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case produceErr = <-failed:
		return produceErr
	default:
	}
	if seen != n {
		return errors.New("read past the input's end")
	}
	return nil
}
