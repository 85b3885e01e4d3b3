package stream

import (
	"context"
	"testing"
	"time"
)

// BenchmarkE2EExactlyOnceTxnSpan compares, in the same run, the keyed count
// under ExactlyOnce with one transaction per processing round (the runtime
// before transactions spanned the commit interval: the baseline) and with
// one transaction per commit interval (100ms default). It reports events/s
// and committed transactions/s of both, and the ratio of the two rates.
func BenchmarkE2EExactlyOnceTxnSpan(b *testing.B) {
	for range b.N {
		perRound, perRoundTxns := benchEOSRun(b, true)
		perInterval, perIntervalTxns := benchEOSRun(b, false)
		b.ReportMetric(perRound, "round-events/s")
		b.ReportMetric(perRoundTxns, "round-txn/s")
		b.ReportMetric(perInterval, "interval-events/s")
		b.ReportMetric(perIntervalTxns, "interval-txn/s")
		b.ReportMetric(perInterval/perRound, "speedup")
	}
}

// benchEOSRun runs the keyed count over e2eRecords records under ExactlyOnce
// and returns events/s and transactions committed per second.
func benchEOSRun(b *testing.B, txnPerRound bool) (eventsPerSec, txnPerSec float64) {
	b.StopTimer()
	defer b.StartTimer()
	tb := e2eSetup(b)
	bl := NewBuilder()
	in := From(bl, "in", String(), JSON[benchEvent]())
	Count(GroupByKey(in, Codecs(String(), JSON[benchEvent]())), StoreConfig{Name: "c", TTL: time.Hour}).
		ToStream().To("out", String(), Int64())
	a, err := NewApp("bench", bl, Brokers(tb.seeds...), StateDir(b.TempDir()), Delivery(ExactlyOnce),
		optFunc(func(c *config) { c.txnPerRound = txnPerRound }))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.StartTimer()
	start := time.Now()
	go func() { done <- a.Run(ctx) }()
	waitOut(b, tb, e2eRecords)
	el := time.Since(start)
	b.StopTimer()
	txns := counterValue(a.metrics.commits)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return float64(e2eRecords) / el.Seconds(), txns / el.Seconds()
}
