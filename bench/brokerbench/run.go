package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Target names. Each is started by "brokerbench serve <name>".
const (
	targetWeir = "weir"
	// targetWeirTLS is weir with an SSL listener (a certificate made at
	// start): the same workload over TLS, for TLS's CPU cost.
	targetWeirTLS = "weir-tls"
	targetKfake   = "kfake"
	targetNATS    = "nats"
)

var allTargets = []string{targetWeir, targetKfake, targetNATS}

// Producer compression codecs (--compression).
const (
	codecNone   = "none"
	codecGzip   = "gzip"
	codecSnappy = "snappy"
	codecLZ4    = "lz4"
	codecZstd   = "zstd"
)

var allCodecs = []string{codecNone, codecGzip, codecSnappy, codecLZ4, codecZstd}

// isKafka reports whether a target speaks the Kafka protocol.
func isKafka(target string) bool {
	return target == targetWeir || target == targetKfake || target == targetWeirTLS
}

// optionalTargets run only when asked for by name.
var optionalTargets = []string{targetWeirTLS}

// Config is one benchmark invocation.
type Config struct {
	Targets        []string
	Records        int           // throughput phase: records produced and read back
	ConsumePasses  int           // times the records are read back in the consume phase (0: once)
	TLSCompare     int           // weir-tls: pairs of legs (a full read, then a produce of Records) over PLAINTEXT and SSL on the same broker (0: none)
	RecordSize     int           // bytes per record value
	Partitions     int           // partitions of the topic / subjects of the stream
	Rate           int           // records/s of the fixed-rate phase
	RateDuration   time.Duration // length of the fixed-rate phase
	WidePartitions int           // partitions for the RSS phase (Kafka targets); 0 skips it
	Repeat         int           // rounds
	Order          string        // alternate | random | fixed
	Seed           int64         // for Order == "random"; 0 = time-based
	InFlight       int           // NATS max pending async publishes
	KafkaInFlight  int           // kgo produce requests in flight per broker (non-idempotent producer)
	Idempotent     bool          // Kafka targets: kgo's default idempotent producer
	Compression    []string      // Kafka targets: producer codecs, each run in turn (none|gzip|snappy|lz4|zstd)
	PhaseTimeout   time.Duration // bound on each phase
	Settle         time.Duration // wait before reading idle RSS
	Dir            string        // parent of the data directories; "" = temp dir
	Keep           bool          // keep data directories
	Out            string        // report file (main only)
	Verbose        bool          // brokers' stderr to Log
	ProfileDir     string        // if set, brokers write CPU profiles of the produce and consume phases here

	// Exe is the binary re-executed as "Exe serve <target> --dir D".
	Exe string
	// Log receives progress lines (and the brokers' logs when Verbose).
	Log io.Writer
}

// DefaultConfig is the workload of issue 3.
func DefaultConfig() Config {
	return Config{
		Targets:        slices.Clone(allTargets),
		Records:        500_000,
		RecordSize:     1024,
		Partitions:     12,
		Rate:           20_000,
		RateDuration:   3 * time.Second,
		WidePartitions: 1000,
		Repeat:         1,
		Order:          "alternate",
		InFlight:       4096,
		KafkaInFlight:  5,
		Compression:    []string{codecNone},
		PhaseTimeout:   10 * time.Minute,
		Settle:         time.Second,
	}
}

// Validate reports a configuration the harness cannot run.
func (c *Config) Validate() error {
	if len(c.Targets) == 0 {
		return errors.New("no targets")
	}
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if !slices.Contains(allTargets, t) && !slices.Contains(optionalTargets, t) {
			return fmt.Errorf("unknown target %q (want %v or %v)", t, allTargets, optionalTargets)
		}
		if seen[t] {
			return fmt.Errorf("target %q listed twice", t)
		}
		seen[t] = true
	}
	switch {
	case c.Records < 1:
		return errors.New("--records must be >= 1")
	case c.ConsumePasses < 0:
		return errors.New("--consume-passes must be >= 0")
	case c.TLSCompare < 0:
		return errors.New("--tls-compare must be >= 0")
	case c.RecordSize < 8:
		return errors.New("--record-size must be >= 8 (the record index is stored in the first 8 bytes)")
	case c.Partitions < 1:
		return errors.New("--partitions must be >= 1")
	case c.Rate < 1:
		return errors.New("--rate must be >= 1")
	case c.RateDuration <= 0:
		return errors.New("--rate-duration must be > 0")
	case c.WidePartitions < 0:
		return errors.New("--wide-partitions must be >= 0")
	case c.Repeat < 1:
		return errors.New("--repeat must be >= 1")
	case c.InFlight < 1 || c.KafkaInFlight < 1:
		return errors.New("in-flight limits must be >= 1")
	case c.PhaseTimeout <= 0:
		return errors.New("--phase-timeout must be > 0")
	}

	if len(c.Compression) == 0 {
		return errors.New("--compression: no codec")
	}
	for i, z := range c.Compression {
		if !slices.Contains(allCodecs, z) {
			return fmt.Errorf("--compression %q: want some of %v", z, allCodecs)
		}
		if slices.Contains(c.Compression[:i], z) {
			return fmt.Errorf("--compression %q listed twice", z)
		}
	}
	switch c.Order {
	case "alternate", "random", "fixed":
	default:
		return fmt.Errorf("--order %q: want alternate, random or fixed", c.Order)
	}
	return nil
}

// passes is the number of full reads in the consume phase.
func (c *Config) passes() int { return max(c.ConsumePasses, 1) }

// rateRecords is the number of records sent in the fixed-rate phase.
func (c *Config) rateRecords() int {
	n := int(float64(c.Rate) * c.RateDuration.Seconds())
	return max(n, 1)
}

// Run executes every round and returns the report. A target that fails is
// recorded in its Result (Err) and the run goes on with the others; Run
// itself fails only on setup errors (nil report) or cancellation (the
// report of the runs finished so far, and ctx's error).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Exe == "" {
		return nil, errors.New("Config.Exe is required")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Settle <= 0 {
		cfg.Settle = time.Second
	}
	if cfg.ProfileDir != "" {
		// The child writes the files; it runs in another directory.
		abs, err := filepath.Abs(cfg.ProfileDir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("profile dir: %w", err)
		}
		cfg.ProfileDir = abs
	}
	base := cfg.Dir
	if base == "" {
		d, err := os.MkdirTemp("", "brokerbench-")
		if err != nil {
			return nil, err
		}
		base = d
		if !cfg.Keep {
			defer os.RemoveAll(d)
		}
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	rep := &Report{Config: cfg, Started: time.Now().UTC()}
	for round := 0; round < cfg.Repeat; round++ {
		order := roundOrder(cfg.Targets, cfg.Order, round, rng)
		rep.Orders = append(rep.Orders, order)
		for pos, target := range order {
			// Every codec of a Kafka target runs in the same round, one
			// after the other; NATS has no batch compression.
			codecs := cfg.Compression
			if !isKafka(target) {
				codecs = codecs[:1]
			}
			for _, codec := range codecs {
				if err := ctx.Err(); err != nil {
					rep.Finished = time.Now().UTC()
					return rep, err
				}
				fmt.Fprintf(cfg.Log, "round %d/%d: %s (compression %s)\n", round+1, cfg.Repeat, target, codec)
				// <target>-r<round> (the profiles' prefix), with the
				// codec before the round when there is one.
				name := fmt.Sprintf("%s-r%d", target, round+1)
				if codec != codecNone {
					name = fmt.Sprintf("%s-%s-r%d", target, codec, round+1)
				}
				dir := filepath.Join(base, name)
				res := runTarget(ctx, cfg, target, codec, dir)
				res.Round, res.Position = round+1, pos+1
				if res.Err != "" {
					fmt.Fprintf(cfg.Log, "  %s FAILED: %s\n", target, res.Err)
				} else {
					fmt.Fprintf(cfg.Log, "  %s: %s\n", target, res.summary(cfg.passes()))
				}
				rep.Results = append(rep.Results, res)
				if !cfg.Keep {
					os.RemoveAll(dir)
				}
			}
		}
	}
	rep.Finished = time.Now().UTC()
	return rep, nil
}

// roundOrder returns the target order of one round: "alternate" rotates the
// list by one each round so each target runs first, second, ... equally
// often; "random" shuffles; "fixed" keeps the given order.
func roundOrder(targets []string, mode string, round int, rng *rand.Rand) []string {
	out := slices.Clone(targets)
	switch mode {
	case "alternate":
		k := round % len(out)
		out = append(out[k:], out[:k]...)
	case "random":
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// driver runs the workload's client side against one target.
type driver interface {
	// setup creates the benchmark topic (stream).
	setup(ctx context.Context) error
	// produce writes records [0, n) and returns once every one is acked.
	produce(ctx context.Context, n int) error
	// consume reads from the start until n records have arrived.
	consume(ctx context.Context, n int) (readStats, error)
	// fixedRate sends count records (indices from first) at rate/s with
	// linger 0 and returns each record's latency from its scheduled send
	// time to its ack, in index order.
	fixedRate(ctx context.Context, first, count, rate int) ([]time.Duration, error)
	close()
}

// wideDriver is implemented by Kafka targets.
type wideDriver interface {
	// createWide creates a topic with n partitions.
	createWide(ctx context.Context, n int) error
	// writeWide writes one record (acks=all) to each of its partitions.
	writeWide(ctx context.Context, n int) error
}

type readStats struct {
	Records    int // records received
	Distinct   int // distinct indices in [0, n)
	Duplicates int
	Foreign    int // indices outside [0, n): must be 0
}

func newDriver(target, codec, addr, dir string, cfg Config) (driver, error) {
	if target == targetWeirTLS {
		tc, err := weirTLSClientConfig(dir)
		if err != nil {
			return nil, err
		}
		return newKafkaDriver(addr, codec, cfg, kgo.DialTLSConfig(tc))
	}
	if isKafka(target) {
		return newKafkaDriver(addr, codec, cfg)
	}
	return newNATSDriver(addr, cfg)
}

// runTarget runs the whole workload against one fresh child process (and a
// second one for the wide-partitions phase).
func runTarget(ctx context.Context, cfg Config, target, codec, dir string) Result {
	res := Result{Target: target, Codec: codec}
	if err := runThroughput(ctx, cfg, target, codec, filepath.Join(dir, "data"), &res); err != nil {
		res.Err = err.Error()
		return res
	}
	if cfg.WidePartitions > 0 && isKafka(target) && codec == cfg.Compression[0] {
		if err := runWide(ctx, cfg, target, codec, filepath.Join(dir, "wide"), &res); err != nil {
			res.Err = fmt.Sprintf("wide partitions: %v", err)
		}
	}
	return res
}

func runThroughput(ctx context.Context, cfg Config, target, codec, dir string, res *Result) (err error) {
	ch, err := startChild(ctx, cfg, target, dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := ch.stop(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := sleepCtx(ctx, cfg.Settle); err != nil {
		return err
	}
	if res.IdleRSS, _, err = ch.rss(); err != nil {
		return err
	}

	d, err := newDriver(target, codec, ch.addr, ch.dir, cfg)
	if err != nil {
		return err
	}
	defer d.close()
	if err := phase(ctx, cfg, "setup", d.setup); err != nil {
		return err
	}

	// Produce.
	if res.Produce, err = measured(ctx, cfg, ch, "produce", func(ctx context.Context) error {
		return d.produce(ctx, cfg.Records)
	}); err != nil {
		return err
	}

	// Full reads: every pass must read every record (Read shows the
	// last pass).
	if res.Consume, err = measured(ctx, cfg, ch, "consume", func(ctx context.Context) error {
		for range cfg.passes() {
			rs, err := d.consume(ctx, cfg.Records)
			res.Read = rs
			if err != nil {
				return err
			}
			if rs.Distinct != cfg.Records || rs.Foreign != 0 {
				return fmt.Errorf("read back %d distinct of %d records (%d duplicates, %d foreign)",
					rs.Distinct, cfg.Records, rs.Duplicates, rs.Foreign)
			}
		}
		return nil
	}); err != nil {
		return err
	}

	if target == targetWeirTLS && cfg.TLSCompare > 0 {
		if res.TLSCompare, err = compareTLS(ctx, cfg, ch, codec, d); err != nil {
			return err
		}
	}

	// Fixed rate.
	var lat []time.Duration
	if res.Fixed, err = measured(ctx, cfg, ch, "fixed-rate", func(ctx context.Context) error {
		var err error
		lat, err = d.fixedRate(ctx, cfg.Records, cfg.rateRecords(), cfg.Rate)
		return err
	}); err != nil {
		return err
	}
	res.Latency = summarize(lat)
	if _, res.PeakRSS, err = ch.rss(); err != nil {
		return err
	}
	return nil
}

func runWide(ctx context.Context, cfg Config, target, codec, dir string, res *Result) (err error) {
	ch, err := startChild(ctx, cfg, target, dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := ch.stop(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	d, err := newDriver(target, codec, ch.addr, ch.dir, cfg)
	if err != nil {
		return err
	}
	defer d.close()
	wd, ok := d.(wideDriver)
	if !ok {
		return fmt.Errorf("target %s has no partitions phase", target)
	}
	if err := phase(ctx, cfg, "create wide topic", func(ctx context.Context) error {
		return wd.createWide(ctx, cfg.WidePartitions)
	}); err != nil {
		return err
	}
	if err := sleepCtx(ctx, cfg.Settle); err != nil {
		return err
	}
	if res.WideCreatedRSS, _, err = ch.rss(); err != nil {
		return err
	}
	if err := phase(ctx, cfg, "write wide topic", func(ctx context.Context) error {
		return wd.writeWide(ctx, cfg.WidePartitions)
	}); err != nil {
		return err
	}
	if err := sleepCtx(ctx, cfg.Settle); err != nil {
		return err
	}
	res.WideRSS, _, err = ch.rss()
	return err
}

// phase runs fn under the phase timeout and names the phase in its error.
func phase(ctx context.Context, cfg Config, name string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// measured runs one phase and measures it. With Config.ProfileDir set, the
// broker writes a CPU profile of the phase to <ProfileDir>/<run>-<phase>.pprof,
// where <run> names the child's data directory (target and round).
func measured(ctx context.Context, cfg Config, ch *child, name string, fn func(context.Context) error) (Phase, error) {
	if cfg.ProfileDir != "" {
		run := filepath.Base(filepath.Dir(ch.dir))
		if err := ch.startProfile(filepath.Join(cfg.ProfileDir, run+"-"+name+".pprof")); err != nil {
			return Phase{}, err
		}
	}
	var m measure
	if err := m.start(ch); err != nil {
		return Phase{}, err
	}
	if err := phase(ctx, cfg, name, fn); err != nil {
		return Phase{}, err
	}
	p, err := m.stop(ch)
	if err != nil {
		return Phase{}, err
	}
	if cfg.ProfileDir != "" {
		if err := ch.stopProfile(); err != nil {
			return Phase{}, err
		}
	}
	return p, nil
}

// measure samples wall time, the broker's CPU and the harness's own CPU
// around one phase.
type measure struct {
	t0      time.Time
	broker0 cpuTimes
	self0   float64
}

// Phase is what one phase cost.
type Phase struct {
	Wall      time.Duration
	BrokerCPU float64 // seconds (user+system of the broker process, from its getrusage)
	BrokerSys float64 // of which system (kernel) time
	ClientCPU float64 // seconds (utime+stime of the harness process)
}

func (m *measure) start(ch *child) error {
	b, err := ch.cpu()
	if err != nil {
		return err
	}
	m.broker0, m.self0, m.t0 = b, selfCPU(), time.Now()
	return nil
}

func (m *measure) stop(ch *child) (Phase, error) {
	wall := time.Since(m.t0)
	b, err := ch.cpu()
	if err != nil {
		return Phase{}, err
	}
	return Phase{
		Wall:      wall,
		BrokerCPU: b.total() - m.broker0.total(),
		BrokerSys: b.Sys - m.broker0.Sys,
		ClientCPU: selfCPU() - m.self0,
	}, nil
}

// TLSPair is one pair of legs on the weir-tls target, one over its
// PLAINTEXT listener and one over its SSL listener: a full read of the
// throughput phase's records (Plain, TLS) and a produce of as many records
// again (ProducePlain, ProduceTLS).
type TLSPair struct {
	Plain, TLS               Phase
	ProducePlain, ProduceTLS Phase
}

// compareTLS measures cfg.TLSCompare pairs on the weir-tls broker's two
// listeners, alternating which goes first: each pair reads every record
// back over each listener, then produces cfg.Records more records over
// each (appended to the benchmark topic; nothing reads them back after
// the compare), every leg a phase of its own. The same process, data and
// page cache, so the ratio of the two is as little disturbed by the rest
// of the machine as this harness can make it.
func compareTLS(ctx context.Context, cfg Config, ch *child, codec string, tlsDriver driver) ([]TLSPair, error) {
	addr, err := os.ReadFile(filepath.Join(ch.dir, plaintextAddrFile))
	if err != nil {
		return nil, fmt.Errorf("tls compare: %w", err)
	}
	plain, err := newKafkaDriver(string(addr), codec, cfg)
	if err != nil {
		return nil, err
	}
	defer plain.close()
	var out []TLSPair
	for i := range cfg.TLSCompare {
		var pair TLSPair
		legs := []struct {
			name             string
			d                driver
			consume, produce *Phase
		}{{"plain", plain, &pair.Plain, &pair.ProducePlain}, {"tls", tlsDriver, &pair.TLS, &pair.ProduceTLS}}
		if i%2 == 1 {
			legs[0], legs[1] = legs[1], legs[0]
		}
		for _, leg := range legs {
			*leg.consume, err = measured(ctx, cfg, ch, fmt.Sprintf("compare%d-%s", i+1, leg.name), func(ctx context.Context) error {
				rs, err := leg.d.consume(ctx, cfg.Records)
				if err == nil && (rs.Distinct != cfg.Records || rs.Foreign != 0) {
					err = fmt.Errorf("read back %d distinct of %d records", rs.Distinct, cfg.Records)
				}
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("tls compare over %s: %w", leg.name, err)
			}
		}
		for _, leg := range legs {
			*leg.produce, err = measured(ctx, cfg, ch, fmt.Sprintf("compare%d-produce-%s", i+1, leg.name), func(ctx context.Context) error {
				return leg.d.produce(ctx, cfg.Records)
			})
			if err != nil {
				return nil, fmt.Errorf("tls compare, produce over %s: %w", leg.name, err)
			}
		}
		out = append(out, pair)
	}
	return out, nil
}
