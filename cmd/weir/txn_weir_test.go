package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weirhq/weir/weirtest"
)

// weir txn list/describe against weir's own transaction coordinator (the
// kfake test in txn_test.go checks the commands against a reference
// broker): an ongoing transaction is listed and described with its state,
// epoch, timeout and partitions, and leaves the Ongoing list once committed.
func TestTxnListDescribeAgainstWeir(t *testing.T) {
	b := weirtest.Start(t, weirtest.WithTopic("out", 2))
	addr := b.Addr()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("orders-1"),
		kgo.TransactionTimeout(time.Minute), kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Partition: 1}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	out, err := runTxnCmd(t, "list", "--brokers", addr)
	if err != nil {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if !regexpLine(out, `^orders-1\s+Ongoing\s+\d+\s+0\s+1m0s\s+\S+\s+1$`) {
		t.Fatalf("list output:\n%s", out)
	}
	out, err = runTxnCmd(t, "describe", "orders-1", "--brokers", addr)
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	for _, want := range []string{`^State:\s+Ongoing$`, `^Producer epoch:\s+0$`, `^Timeout:\s+1m0s$`, `^Started:\s+\S+ \(running \S+\)$`, `^  out: 1$`} {
		if !regexpLine(out, want) {
			t.Fatalf("describe output lacks %s:\n%s", want, out)
		}
	}
	if out, err = runTxnCmd(t, "describe", "nope", "--brokers", addr); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("describe unknown id: %v\n%s", err, out)
	}

	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	out, err = runTxnCmd(t, "list", "--state", "Ongoing", "--brokers", addr)
	if err != nil || strings.Contains(out, "orders-1") {
		t.Fatalf("list --state Ongoing after commit: %v\n%s", err, out)
	}
	out, err = runTxnCmd(t, "describe", "orders-1", "--brokers", addr)
	if err != nil || !regexpLine(out, `^State:\s+CompleteCommit$`) {
		t.Fatalf("describe after commit: %v\n%s", err, out)
	}
}
