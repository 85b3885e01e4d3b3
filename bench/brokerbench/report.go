package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Result is one target's run in one round.
type Result struct {
	Target   string
	Codec    string // producer compression (Kafka targets; "none" for NATS)
	Round    int
	Position int    // 1-based position in the round's order
	Err      string // non-empty: the run failed here; later figures are missing

	IdleRSS        int64 // bytes, one Settle after start, before any topic exists
	PeakRSS        int64 // VmHWM after the fixed-rate phase
	WideCreatedRSS int64 // bytes, fresh broker after creating a topic with Config.WidePartitions partitions (Kafka targets)
	WideRSS        int64 // ... and after writing one record to each of them

	Produce Phase
	Consume Phase
	Fixed   Phase
	Read    readStats
	Latency Latency

	// TLSCompare: weir-tls with --tls-compare, the pairs of reads over
	// the broker's PLAINTEXT and SSL listeners.
	TLSCompare []TLSPair
}

// payloadGB is the record-value volume of the throughput phase in GB (1e9 bytes).
func payloadGB(cfg Config) float64 { return float64(cfg.Records) * float64(cfg.RecordSize) / 1e9 }

// consumedGB is the record-value volume read in the consume phase in GB:
// the throughput phase's records, once per pass.
func consumedGB(cfg Config) float64 { return payloadGB(cfg) * float64(cfg.passes()) }

func (r Result) summary(passes int) string {
	return fmt.Sprintf("produce %.0f rec/s (broker %.2f CPU-s), consume %.0f rec/s (broker %.2f CPU-s), "+
		"p50/p99 at fixed rate %.2f/%.2f ms, idle RSS %.1f MB, wide RSS %.1f MB",
		recPerSec(r.Produce.Wall, r.Read.Distinct), r.Produce.BrokerCPU,
		recPerSec(r.Consume.Wall, r.Read.Distinct*passes), r.Consume.BrokerCPU,
		ms(r.Latency.P50), ms(r.Latency.P99), mb(r.IdleRSS), mb(r.WideRSS))
}

func recPerSec(d time.Duration, n int) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func mb(b int64) float64 { return float64(b) / 1e6 }

// metric is one row of the report.
type metric struct {
	name  string
	unit  string
	lower bool // lower is better
	kafka bool // measured for Kafka targets only
	value func(r Result, cfg Config) float64
	// target, if set, is the goal for weir: ratio to kfake, or an
	// absolute bound (abs) on weir's value.
	target *goal
}

type goal struct {
	text string
	pass func(weir, ratioKfake float64) bool
	abs  bool
}

var metrics = []metric{
	{name: "produce throughput", unit: "records/s", value: func(r Result, c Config) float64 {
		return recPerSec(r.Produce.Wall, c.Records)
	}, target: &goal{text: "weir/kfake >= 1.0", pass: func(_, q float64) bool { return q >= 1.0 }}},
	{name: "produce throughput", unit: "MB/s", value: func(r Result, c Config) float64 {
		return payloadGB(c) * 1e3 / r.Produce.Wall.Seconds()
	}},
	{name: "consume throughput", unit: "records/s", value: func(r Result, c Config) float64 {
		return recPerSec(r.Consume.Wall, c.Records*c.passes())
	}},
	{name: "consume throughput", unit: "MB/s", value: func(r Result, c Config) float64 {
		return consumedGB(c) * 1e3 / r.Consume.Wall.Seconds()
	}},
	{name: "broker CPU per GB produced", unit: "CPU-s/GB", lower: true, value: func(r Result, c Config) float64 {
		return r.Produce.BrokerCPU / payloadGB(c)
	}, target: &goal{text: "weir/kfake <= 0.6", pass: func(_, q float64) bool { return q <= 0.6 }}},
	{name: "broker CPU per GB consumed", unit: "CPU-s/GB", lower: true, value: func(r Result, c Config) float64 {
		return r.Consume.BrokerCPU / consumedGB(c)
	}, target: &goal{text: "weir/kfake <= 0.5", pass: func(_, q float64) bool { return q <= 0.5 }}},
	{name: "… of which kernel (sys), produced", unit: "CPU-s/GB", lower: true, value: func(r Result, c Config) float64 {
		return r.Produce.BrokerSys / payloadGB(c)
	}},
	{name: "… of which kernel (sys), consumed", unit: "CPU-s/GB", lower: true, value: func(r Result, c Config) float64 {
		return r.Consume.BrokerSys / consumedGB(c)
	}},
	{name: "client CPU per GB produced", unit: "CPU-s/GB", lower: true, value: func(r Result, c Config) float64 {
		return r.Produce.ClientCPU / payloadGB(c)
	}},
	{name: "client CPU per GB consumed", unit: "CPU-s/GB", lower: true, value: func(r Result, c Config) float64 {
		return r.Consume.ClientCPU / consumedGB(c)
	}},
	{name: "produce latency p50 at fixed rate", unit: "ms", lower: true, value: func(r Result, _ Config) float64 {
		return ms(r.Latency.P50)
	}},
	{name: "produce latency p99 at fixed rate", unit: "ms", lower: true, value: func(r Result, _ Config) float64 {
		return ms(r.Latency.P99)
	}, target: &goal{text: "weir/kfake <= 0.5", pass: func(_, q float64) bool { return q <= 0.5 }}},
	{name: "produce latency p99.9 at fixed rate", unit: "ms", lower: true, value: func(r Result, _ Config) float64 {
		return ms(r.Latency.P999)
	}},
	{name: "produce latency max at fixed rate", unit: "ms", lower: true, value: func(r Result, _ Config) float64 {
		return ms(r.Latency.Max)
	}},
	{name: "idle RSS", unit: "MB", lower: true, value: func(r Result, _ Config) float64 {
		return mb(r.IdleRSS)
	}, target: &goal{text: "weir < 50 MB", abs: true, pass: func(w, _ float64) bool { return w < 50 }}},
	{name: "peak RSS during workload", unit: "MB", lower: true, value: func(r Result, _ Config) float64 {
		return mb(r.PeakRSS)
	}},
	{name: "RSS with wide topic created", unit: "MB", lower: true, kafka: true, value: func(r Result, _ Config) float64 {
		return mb(r.WideCreatedRSS)
	}},
	{name: "RSS with wide topic written", unit: "MB", lower: true, kafka: true, value: func(r Result, _ Config) float64 {
		return mb(r.WideRSS)
	}, target: &goal{text: "weir < 300 MB", abs: true, pass: func(w, _ float64) bool { return w < 300 }}},
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Report is the outcome of one invocation.
type Report struct {
	Config   Config
	Command  string
	Started  time.Time
	Finished time.Time
	Orders   [][]string // target order of each round
	Results  []Result
}

// Failed reports whether any run failed.
func (rep *Report) Failed() bool {
	return slices.ContainsFunc(rep.Results, func(r Result) bool { return r.Err != "" })
}

// ok returns the successful results of target with the main codec (the
// first of Config.Compression; NATS runs with none only).
func (rep *Report) ok(target string) []Result {
	codec := rep.Config.Compression[0]
	if !isKafka(target) {
		codec = codecNone
	}
	return rep.okCodec(target, codec)
}

// okCodec returns the successful results of target with codec.
func (rep *Report) okCodec(target, codec string) []Result {
	var out []Result
	for _, r := range rep.Results {
		if r.Target == target && r.Codec == codec && r.Err == "" {
			out = append(out, r)
		}
	}
	return out
}

// median returns the median of m over target's successful runs.
func (rep *Report) median(m metric, target string) (float64, bool) {
	return rep.medianOf(m, rep.ok(target), target)
}

// medianOf returns the median of m over rs (results of target).
func (rep *Report) medianOf(m metric, rs []Result, target string) (float64, bool) {
	if len(rs) == 0 || (m.kafka && !isKafka(target)) || (m.kafka && rep.Config.WidePartitions == 0) {
		return 0, false
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = m.value(r, rep.Config)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// Markdown renders the report: the summary table with ratios and targets,
// the runs, and the definitions.
func (rep *Report) Markdown() string {
	cfg := rep.Config
	var b strings.Builder
	fmt.Fprintf(&b, "# Broker benchmark: weir vs kfake (durable) vs NATS JetStream\n\n")
	fmt.Fprintf(&b, "- Date: %s (%.0f s)\n", rep.Started.Format(time.RFC3339), rep.Finished.Sub(rep.Started).Seconds())
	if rep.Command != "" {
		fmt.Fprintf(&b, "- Command: `%s`\n", rep.Command)
	}
	fmt.Fprintf(&b, "- Machine: %s\n", machineFacts())
	fmt.Fprintf(&b, "- Workload: 1 topic, %d partitions (NATS: one stream, %d subjects), %d B records, acks=all, "+
		"%d records produced then read back in full (%d time(s), a fresh consumer each); then %v at a fixed %d records/s with linger 0 (%d records)",
		cfg.Partitions, cfg.Partitions, cfg.RecordSize, cfg.Records, cfg.passes(), cfg.RateDuration, cfg.Rate, cfg.rateRecords())
	if cfg.WidePartitions > 0 {
		fmt.Fprintf(&b, "; RSS with a %d-partition topic, one record written to each (Kafka targets)", cfg.WidePartitions)
	}
	b.WriteString("\n")
	if cfg.Idempotent {
		b.WriteString("- Kafka producers: franz-go's idempotent producer\n")
	}
	fmt.Fprintf(&b, "- Kafka producer compression: %s (the tables below the first compare the others)\n", strings.Join(cfg.Compression, ", "))
	if cfg.ProfileDir != "" {
		fmt.Fprintf(&b, "- Brokers were CPU-profiled during the measured phases (profiles in %s); their CPU figures include the profiler's cost\n", cfg.ProfileDir)
	}
	fmt.Fprintf(&b, "- Rounds: %d, order %s:", cfg.Repeat, cfg.Order)
	for i, o := range rep.Orders {
		fmt.Fprintf(&b, " %d=%s", i+1, strings.Join(o, ","))
	}
	b.WriteString(". Figures are medians over the successful runs of each target.\n\n")

	cols := cfg.Targets
	has := func(t string) bool { return slices.Contains(cols, t) }
	b.WriteString("| metric | unit |")
	for _, t := range cols {
		fmt.Fprintf(&b, " %s |", t)
	}
	showK, showN := has(targetWeir) && has(targetKfake), has(targetWeir) && has(targetNATS)
	if showK {
		b.WriteString(" weir/kfake | target | verdict |")
	}
	if showN {
		b.WriteString(" weir/nats |")
	}
	b.WriteString("\n|---|---|")
	for range cols {
		b.WriteString("---:|")
	}
	if showK {
		b.WriteString("---:|---|---|")
	}
	if showN {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, m := range metrics {
		fmt.Fprintf(&b, "| %s | %s |", m.name, m.unit)
		for _, t := range cols {
			fmt.Fprintf(&b, " %s |", rep.cell(m, t))
		}
		w, wok := rep.median(m, targetWeir)
		if showK {
			k, kok := rep.median(m, targetKfake)
			q, qok := ratio(w, k, wok && kok)
			fmt.Fprintf(&b, " %s |", fmtRatio(q, qok))
			if m.target == nil {
				b.WriteString(" | |")
			} else {
				verdict := "n/a (not measured)"
				switch {
				case m.target.abs && wok:
					verdict = passMiss(m.target.pass(w, 0))
				case !m.target.abs && qok:
					verdict = passMiss(m.target.pass(w, q))
				}
				fmt.Fprintf(&b, " %s | %s |", m.target.text, verdict)
			}
		}
		if showN {
			n, nok := rep.median(m, targetNATS)
			q, qok := ratio(w, n, wok && nok)
			fmt.Fprintf(&b, " %s |", fmtRatio(q, qok))
		}
		b.WriteString("\n")
	}

	rep.compressionTable(&b)
	rep.tlsTable(&b)

	b.WriteString("\n## Runs\n\n")
	b.WriteString("| round | pos | target | codec | produce rec/s | consume rec/s | broker CPU-s prod | broker CPU-s cons | p50 ms | p99 ms | idle RSS MB | wide RSS MB | read back | error |\n")
	b.WriteString("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rep.Results {
		read := fmt.Sprintf("%d/%d", r.Read.Distinct, cfg.Records)
		if r.Read.Duplicates > 0 || r.Read.Foreign > 0 {
			read += fmt.Sprintf(" (+%d dup, %d foreign)", r.Read.Duplicates, r.Read.Foreign)
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.1f | %s | %s | %s |\n",
			r.Round, r.Position, r.Target, r.Codec,
			recPerSec(r.Produce.Wall, cfg.Records), recPerSec(r.Consume.Wall, cfg.Records*cfg.passes()),
			r.Produce.BrokerCPU, r.Consume.BrokerCPU,
			ms(r.Latency.P50), ms(r.Latency.P99), mb(r.IdleRSS), wideCell(r, cfg), read, mdEscape(r.Err))
	}

	b.WriteString(`
## Definitions

- Each broker runs as a child process of the harness (the harness binary re-executed with the hidden
  "serve" subcommand), in a fresh data directory; the client (franz-go kgo, or nats.go) runs in the harness.
  Both share the machine's cores.
- GB = 1e9 bytes of record values (the throughput phase's records x record size); protocol overhead excluded.
- Broker CPU = user+system CPU time of the broker process (all threads), sampled before and after the phase
  (the kernel share is the system part: syscalls such as write, fsync, sendfile, and the page cache work they do);
  the child reports its getrusage figure (microsecond resolution; /proc/<pid>/stat utime+stime is the same
  number in 10 ms ticks, which the test cross-checks). Client CPU = the harness process (getrusage), which
  includes the harness's own bookkeeping.
- Produce: acks=all, idempotence off unless --idempotent, up to 5 produce requests in flight, default linger (10 ms),
  compression as --compression says (the main table: the first codec listed),
  records spread round-robin over the partitions. NATS: async publish with a bounded number of pending acks.
  The phase ends when the last record is acknowledged.
- Consume: a fresh consumer reads from the start until every record index has been seen; the value of each
  record carries its index, so duplicates and missing records are counted (the run fails if any is missing).
- Fixed rate: records are scheduled at exact intervals; latency runs from the scheduled send time to the ack,
  so a stall that delays sending is counted (no coordinated omission). Nearest-rank percentiles.
- Idle RSS: VmRSS one second after the broker reports its address. Peak RSS: VmHWM after the workload.
  Wide RSS: VmRSS of a fresh broker one second after a topic with the wide partition count was created, and
  again one second after one record was written to each partition (the target applies to the latter).
- Durability: weir with its default sync policy (fsync before an acks=all answer); kfake with DataDir +
  SyncWrites (fsync per produced batch); NATS JetStream with file storage and sync_always.
`)
	return b.String()
}

func (rep *Report) cell(m metric, target string) string {
	if m.kafka && !isKafka(target) {
		return "—"
	}
	v, ok := rep.median(m, target)
	if !ok {
		if len(rep.ok(target)) == 0 {
			return "failed"
		}
		return "—"
	}
	return fmtVal(v)
}

func wideCell(r Result, cfg Config) string {
	if !isKafka(r.Target) || cfg.WidePartitions == 0 || r.WideRSS == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", mb(r.WideRSS))
}

func ratio(a, b float64, ok bool) (float64, bool) {
	if !ok || b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0, false
	}
	return a / b, true
}

func fmtRatio(q float64, ok bool) string {
	switch {
	case !ok:
		return "—"
	case q != 0 && math.Abs(q) < 0.01:
		return fmt.Sprintf("%.1ex", q)
	default:
		return fmt.Sprintf("%.2fx", q)
	}
}

func fmtVal(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// machineFacts describes the machine: CPU model and count, kernel, Go.
func machineFacts() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel, load := "?", "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("%d CPUs (%s), GOMAXPROCS %d, Linux %s, %s %s/%s, load average at the end %s",
		runtime.NumCPU(), model, runtime.GOMAXPROCS(0), kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH, load)
}

// compressionGoals are issue 18's targets for weir: broker CPU per GB
// produced with a codec, as a ratio to weir's own figure without
// compression in the same run.
var compressionGoals = map[string]float64{codecSnappy: 1.3, codecLZ4: 1.3, codecZstd: 2}

// compressionTable compares, for each Kafka target, broker CPU per GB
// produced (and produce throughput) with each codec against the same
// target without compression. Only when more than one codec ran.
func (rep *Report) compressionTable(b *strings.Builder) {
	cfg := rep.Config
	if len(cfg.Compression) < 2 {
		return
	}
	cpu, thr := metricNamed("broker CPU per GB produced", "CPU-s/GB"), metricNamed("produce throughput", "records/s")
	b.WriteString("\n## Compression: broker CPU per GB produced, by producer codec\n\n")
	b.WriteString("| target | codec | broker CPU-s/GB produced | vs none | target | verdict | produce records/s | vs none |\n")
	b.WriteString("|---|---|---:|---:|---|---|---:|---:|\n")
	for _, t := range cfg.Targets {
		if !isKafka(t) {
			continue
		}
		base, bok := rep.medianOf(cpu, rep.okCodec(t, codecNone), t)
		baseThr, btok := rep.medianOf(thr, rep.okCodec(t, codecNone), t)
		for _, z := range cfg.Compression {
			rs := rep.okCodec(t, z)
			v, ok := rep.medianOf(cpu, rs, t)
			q, qok := ratio(v, base, ok && bok)
			tv, tok := rep.medianOf(thr, rs, t)
			tq, tqok := ratio(tv, baseThr, tok && btok)
			goalText, verdict := "", ""
			if g, has := compressionGoals[z]; has && t == targetWeir {
				goalText = fmt.Sprintf("<= %.1fx", g)
				verdict = "n/a (not measured)"
				if qok {
					verdict = passMiss(q <= g)
				}
			}
			cell := "failed"
			if ok {
				cell = fmtVal(v)
			}
			tcell := "failed"
			if tok {
				tcell = fmtVal(tv)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", t, z, cell, fmtRatio(q, qok), goalText, verdict, tcell, fmtRatio(tq, tqok))
		}
	}
}

// metricNamed returns the metric of that name and unit (it must exist).
func metricNamed(name, unit string) metric {
	for _, m := range metrics {
		if m.name == name && m.unit == unit {
			return m
		}
	}
	panic("brokerbench: no metric " + name + " in " + unit)
}

// tlsGoal is issue 20's target: TLS costs at most this many times the
// broker CPU per GB of PLAINTEXT.
const tlsGoal = 1.5

// tlsTable shows the weir-tls runs' pairs of legs over PLAINTEXT and SSL
// on one broker (compareTLS): per pair and phase the broker CPU per GB and
// the TLS/PLAINTEXT ratio, for produce, consume and the two together (the
// whole run's bytes in and out), and each ratio's median over all pairs
// of all rounds against tlsGoal.
func (rep *Report) tlsTable(b *strings.Builder) {
	var pairs []TLSPair
	var rounds []int
	for _, r := range rep.Results {
		for _, p := range r.TLSCompare {
			pairs = append(pairs, p)
			rounds = append(rounds, r.Round)
		}
	}
	if len(pairs) == 0 {
		return
	}
	gb := payloadGB(rep.Config)
	b.WriteString("\n## TLS vs PLAINTEXT on one weir broker: broker CPU per GB\n\n")
	b.WriteString("Each pair reads every record once over the weir-tls broker's PLAINTEXT listener and once over its SSL\n" +
		"listener, then produces as many records again over each (a fresh client each, which of the two goes first\n" +
		"alternating), in the same process. Whole: produce and consume CPU over produced plus consumed GB.\n\n")
	b.WriteString("| round | pair | produce PLAINTEXT CPU-s/GB | produce TLS CPU-s/GB | TLS/PLAINTEXT | consume PLAINTEXT CPU-s/GB | of which sys | consume TLS CPU-s/GB | of which sys | TLS/PLAINTEXT | whole TLS/PLAINTEXT |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, p := range pairs {
		pr, prok := ratio(p.ProduceTLS.BrokerCPU, p.ProducePlain.BrokerCPU, p.ProducePlain.BrokerCPU > 0)
		cr, crok := ratio(p.TLS.BrokerCPU, p.Plain.BrokerCPU, p.Plain.BrokerCPU > 0)
		wr, wrok := wholeRatio(p)
		fmt.Fprintf(b, "| %d | %d | %.3f | %.3f | %s | %.3f | %.3f | %.3f | %.3f | %s | %s |\n", rounds[i], i+1,
			p.ProducePlain.BrokerCPU/gb, p.ProduceTLS.BrokerCPU/gb, fmtRatio(pr, prok),
			p.Plain.BrokerCPU/gb, p.Plain.BrokerSys/gb, p.TLS.BrokerCPU/gb, p.TLS.BrokerSys/gb, fmtRatio(cr, crok),
			fmtRatio(wr, wrok))
	}
	b.WriteString("\n")
	for _, ph := range []struct {
		name   string
		ratios []float64
	}{
		{"produce", phaseRatios(pairs, func(p TLSPair) (Phase, Phase) { return p.ProduceTLS, p.ProducePlain })},
		{"consume", pairRatios(pairs)},
		{"whole (produce + consume)", wholeRatios(pairs)},
	} {
		r := ph.ratios
		if len(r) == 0 {
			continue
		}
		slices.Sort(r)
		med := r[len(r)/2]
		if len(r)%2 == 0 {
			med = (r[len(r)/2-1] + r[len(r)/2]) / 2
		}
		fmt.Fprintf(b, "- Median TLS/PLAINTEXT over %d pairs, %s: %.2fx (range %.2f–%.2f); target <= %.1fx: %s\n",
			len(r), ph.name, med, r[0], r[len(r)-1], tlsGoal, passMiss(med <= tlsGoal))
	}
}

// wholeRatio is a pair's TLS/PLAINTEXT ratio of produce plus consume
// broker CPU (both legs move the same bytes, so it is also the ratio of
// CPU per GB).
func wholeRatio(p TLSPair) (float64, bool) {
	plain := p.ProducePlain.BrokerCPU + p.Plain.BrokerCPU
	return ratio(p.ProduceTLS.BrokerCPU+p.TLS.BrokerCPU, plain, p.ProducePlain.BrokerCPU > 0 && p.Plain.BrokerCPU > 0)
}

func wholeRatios(pairs []TLSPair) []float64 {
	var out []float64
	for _, p := range pairs {
		if q, ok := wholeRatio(p); ok {
			out = append(out, q)
		}
	}
	return out
}

// phaseRatios is the TLS/PLAINTEXT ratio of broker CPU of each pair for
// the phase legs picks (TLS leg first).
func phaseRatios(pairs []TLSPair, legs func(TLSPair) (tls, plain Phase)) []float64 {
	var out []float64
	for _, p := range pairs {
		if t, pl := legs(p); pl.BrokerCPU > 0 {
			out = append(out, t.BrokerCPU/pl.BrokerCPU)
		}
	}
	return out
}

// pairRatios is the TLS/PLAINTEXT ratio of broker CPU of each pair's
// reads.
func pairRatios(pairs []TLSPair) []float64 {
	return phaseRatios(pairs, func(p TLSPair) (Phase, Phase) { return p.TLS, p.Plain })
}
