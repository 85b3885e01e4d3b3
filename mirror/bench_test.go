package mirror

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	benchPartitions = 4
	benchRecords    = 300_000
	benchValue      = 200
)

// BenchmarkMirrorVsPlainLoop measures, in the same run and rotating the
// order, the copy rate of a mirror (weir -> weir, default and exactly-once)
// and of plain consume+produce loops with the same client settings (read
// committed consumer; idempotent acks=all producer keeping partitions; for
// the exactly-once baseline, one transaction per poll), each copying the
// same records to fresh topics. It reports records/s of each and the ratios
// mirror/plain and mirror-eos/plain-txn. Figures on a shared machine are
// noisy.
func BenchmarkMirrorVsPlainLoop(b *testing.B) {
	src, dst := startWeir(b), startWeir(b)
	src.createTopic(b, "bench", benchPartitions, nil)
	ctx := context.Background()
	val := make([]byte, benchValue)
	for i := 0; i < benchRecords; i += 1000 {
		var recs []*kgo.Record
		for j := i; j < i+1000; j++ {
			recs = append(recs, &kgo.Record{Topic: "bench", Partition: int32(j % benchPartitions), Key: []byte(fmt.Sprint("k", j)), Value: val})
		}
		if err := src.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	var plain, plainTxn, alo, eos time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runs := []func(){
			func() { plain += plainLoop(b, src, dst, fmt.Sprintf("p%d.", i), false) },
			func() { plainTxn += plainLoop(b, src, dst, fmt.Sprintf("t%d.", i), true) },
			func() { alo += mirrorRun(b, src, dst, fmt.Sprintf("a%d", i), false) },
			func() { eos += mirrorRun(b, src, dst, fmt.Sprintf("e%d", i), true) },
		}
		for j := range runs {
			runs[(i+j)%len(runs)]() // rotate the order between iterations
		}
	}
	rate := func(d time.Duration) float64 { return float64(benchRecords*b.N) / d.Seconds() }
	b.ReportMetric(rate(plain), "plain-rec/s")
	b.ReportMetric(rate(alo), "mirror-rec/s")
	b.ReportMetric(rate(eos), "mirror-eos-rec/s")
	b.ReportMetric(rate(alo)/rate(plain), "mirror/plain")
	b.ReportMetric(rate(plainTxn), "plain-txn-rec/s")
	b.ReportMetric(rate(eos)/rate(plainTxn), "mirror-eos/plain-txn")
}

// plainLoop copies "bench" to prefix+"bench" with a consume+produce loop
// and the mirror's client settings, and returns the time until every record
// is acknowledged. With txn, the baseline of the exactly-once mirror: each
// poll's records are produced in one transaction (same transactional
// settings), committed before the next poll.
func plainLoop(b *testing.B, src, dst *cluster, prefix string, txn bool) time.Duration {
	ctx := context.Background()
	dst.createTopic(b, prefix+"bench", benchPartitions, nil)
	start := time.Now()
	cfg := Config{Source: src.seeds, Target: dst.seeds}
	consumer, err := kgo.NewClient(cfg.sourceOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bench": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(),
			2: kgo.NewOffset().AtStart(), 3: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		b.Fatal(err)
	}
	defer consumer.Close()
	popts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if txn {
		popts = append(popts, kgo.TransactionalID("bench-"+prefix))
	}
	producer, err := kgo.NewClient(cfg.targetOpts(popts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer producer.Close()
	var acked atomic.Int64
	var perr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			perr.Store(err)
		}
		acked.Add(1)
	}
	read := 0
	for read < benchRecords {
		fs := consumer.PollRecords(ctx, defaultMaxPollRecords)
		if txn {
			if err := producer.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsControl() {
				return
			}
			read++
			producer.Produce(ctx, &kgo.Record{Topic: prefix + "bench", Partition: r.Partition, Key: r.Key, Value: r.Value,
				Headers: r.Headers, Timestamp: r.Timestamp}, promise)
		})
		if txn {
			if err := producer.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := producer.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err, _ := perr.Load().(error); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// mirrorRun copies "bench" with a mirror and returns the time until its
// copied-records counter reaches every record.
func mirrorRun(b *testing.B, src, dst *cluster, id string, eos bool) time.Duration {
	dst.createTopic(b, id+".bench", benchPartitions, nil)
	reg := prometheus.NewRegistry()
	start := time.Now()
	stop := runMirror(b, Config{Source: src.seeds, Target: dst.seeds, Topics: []string{"bench"}, Prefix: id + ".", ID: id,
		ExactlyOnce: eos, Registerer: reg, RescanInterval: time.Hour})
	m := reg
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if mfs, err := m.Gather(); err == nil {
			var total float64
			for _, mf := range mfs {
				if mf.GetName() == "weir_mirror_copied_records_total" {
					for _, mt := range mf.GetMetric() {
						total += mt.GetCounter().GetValue()
					}
				}
			}
			if total >= benchRecords {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("mirror did not copy every record within 5 minutes")
		}
		time.Sleep(2 * time.Millisecond)
	}
	d := time.Since(start)
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	return d
}
