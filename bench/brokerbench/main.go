// Command brokerbench runs one durable-log workload against weir's broker and
// against two peers started in the same invocation — franz-go's kfake in
// durable mode (DataDir + SyncWrites) and NATS JetStream (file storage,
// sync_always) — and prints a Markdown table of the results with the ratios
// weir/kfake and weir/nats next to the targets of issue 3.
//
// Every broker runs as a child process of the harness (the harness binary
// re-executed as "brokerbench serve <target> --dir D"), so the broker's own
// CPU seconds (its getrusage, which is utime+stime of /proc/<pid>/stat at
// microsecond resolution) and RSS (/proc/<pid>/status) are measured
// separately from the client's, which on a small machine often saturates
// first.
//
// Workload per target (fresh data directory, fresh child process):
//
//  1. idle RSS, one second after the broker reports its address;
//  2. produce --records records of --record-size bytes to one topic (stream)
//     with --partitions partitions (subjects), acks=all / publish-with-ack;
//  3. read every record back from the start, checking each one is present
//     exactly once (the record index is in the first 8 bytes of the value);
//  4. produce at a fixed --rate for --rate-duration with linger 0 and record
//     each record's latency from its scheduled send time to its ack (so a
//     stalled broker is not hidden by a stalled sender: no coordinated
//     omission);
//  5. Kafka targets only, in a second fresh child: create a topic with
//     --wide-partitions partitions, write one record to each, and read RSS.
//
// Usage:
//
//	go run ./bench/brokerbench [--records 500000] [--repeat 1] [--out docs/bench/broker.md]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		os.Exit(serveMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain parses the benchmark flags, runs the benchmark and prints the
// report. It returns the process exit code.
func runMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(stderr, "brokerbench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "brokerbench: locate own binary:", err)
		return 1
	}
	cfg.Exe = exe
	cfg.Log = stderr
	command := "go run ./bench/brokerbench"
	if len(args) > 0 {
		command += " " + strings.Join(args, " ")
	}

	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "brokerbench:", err)
		if rep == nil {
			return 1
		}
		fmt.Fprintln(stderr, "brokerbench: partial report follows")
	}
	rep.Command = command
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if cfg.Out != "" {
		if err := os.WriteFile(cfg.Out, []byte(md), 0o644); err != nil {
			fmt.Fprintln(stderr, "brokerbench: write report:", err)
			return 1
		}
	}
	if err != nil || rep.Failed() {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("brokerbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	targets := fs.String("targets", strings.Join(cfg.Targets, ","), "comma-separated targets to run: weir,kfake,nats, and weir-tls (weir over an SSL listener)")
	fs.IntVar(&cfg.Records, "records", cfg.Records, "records produced (and read back) in the throughput phase")
	fs.IntVar(&cfg.TLSCompare, "tls-compare", cfg.TLSCompare, "weir-tls: after the consume phase, this many pairs of legs over the broker's PLAINTEXT and SSL listeners (same process, alternating): a full read, then a produce of --records more records, over each; reported as the TLS/PLAINTEXT ratio of broker CPU per GB produced, consumed and both")
	fs.IntVar(&cfg.ConsumePasses, "consume-passes", cfg.ConsumePasses, "times the consume phase reads every record back (a fresh consumer each); more passes measure consume CPU over more bytes")
	fs.IntVar(&cfg.RecordSize, "record-size", cfg.RecordSize, "record value size in bytes (>= 8)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the benchmark topic (subjects of the NATS stream)")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "records/s of the fixed-rate latency phase")
	fs.DurationVar(&cfg.RateDuration, "rate-duration", cfg.RateDuration, "length of the fixed-rate latency phase")
	fs.IntVar(&cfg.WidePartitions, "wide-partitions", cfg.WidePartitions, "partitions created for the RSS-with-many-partitions phase (0 = skip)")
	fs.IntVar(&cfg.Repeat, "repeat", cfg.Repeat, "rounds; each round runs every target once, the report shows medians")
	fs.StringVar(&cfg.Order, "order", cfg.Order, "target order per round: alternate (rotate each round), random, fixed")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed for --order random (0 = time-based)")
	fs.IntVar(&cfg.InFlight, "nats-inflight", cfg.InFlight, "max outstanding async publishes for NATS")
	fs.IntVar(&cfg.KafkaInFlight, "kafka-inflight", cfg.KafkaInFlight, "max produce requests in flight per broker (Kafka targets, idempotence off)")
	fs.BoolVar(&cfg.Idempotent, "idempotent", cfg.Idempotent, "Kafka targets: use franz-go's idempotent producer (5 requests in flight) instead of the plain one")
	compression := fs.String("compression", strings.Join(cfg.Compression, ","), "Kafka targets: producer compression, one or more of none,gzip,snappy,lz4,zstd; each runs in turn and the report compares broker CPU per GB produced with the first (the main table uses the first)")
	fs.DurationVar(&cfg.PhaseTimeout, "phase-timeout", cfg.PhaseTimeout, "upper bound on each phase")
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "parent directory for the brokers' data directories (default: a temp dir)")
	fs.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep the data directories")
	fs.StringVar(&cfg.Out, "out", cfg.Out, "also write the Markdown report to this file")
	fs.BoolVar(&cfg.Verbose, "v", cfg.Verbose, "pass the brokers' logs through to stderr")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", cfg.ProfileDir, "write each broker's CPU profile of the produce, consume and fixed-rate phases here (adds a few % CPU)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Targets = splitList(*targets)
	cfg.Compression = splitList(*compression)
	return cfg, cfg.Validate()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
