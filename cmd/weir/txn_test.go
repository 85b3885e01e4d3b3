package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/weirtest"
)

// runTxnCmd runs "weir txn ARGS" through the command itself (it does not
// depend on the root command's registration).
func runTxnCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newTxnCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// The txn commands speak only the Kafka protocol: the same body runs
// against kfake (a reference broker, independent of weir's coordinator)
// and against weir. An ongoing transaction is listed and described with
// its state, epoch, timeout and partitions, and leaves the Ongoing list
// once committed.
func TestTxnListDescribe(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		testTxnListDescribe(t, c.ListenAddrs()[0], "Empty") // kfake moves straight on to the next epoch
	})
	t.Run("weir", func(t *testing.T) {
		testTxnListDescribe(t, weirtest.Start(t, weirtest.Topic("out", 2)).Addr(), "CompleteCommit") // as Kafka
	})
}

// stateAfterCommit is the state the broker reports once the commit
// completed.
func testTxnListDescribe(t *testing.T, addr, stateAfterCommit string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("orders-1"),
		kgo.TransactionTimeout(time.Minute), kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
	out, err = runTxnCmd(t, "list", "--older-than", "1h", "--brokers", addr)
	if err != nil || strings.Contains(out, "orders-1") {
		t.Fatalf("list --older-than: %v\n%s", err, out)
	}
	out, err = runTxnCmd(t, "describe", "orders-1", "--brokers", addr)
	if err != nil || !regexpLine(out, `^State:\s+`+stateAfterCommit+`$`) {
		t.Fatalf("describe after commit: %v\n%s", err, out)
	}
}

func TestTxnProducersAndAbort(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("hang-1"),
		kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Partition: 1}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out, err := runTxnCmd(t, "producers", "out", "--brokers", addr)
	if err != nil {
		t.Fatalf("producers: %v\n%s", err, out)
	}
	if !regexpLine(out, `^out\s+1\s+\d+\s+0\s+0\s+\S+\s+\S+\s+0$`) {
		t.Fatalf("producers output:\n%s", out)
	}
	if out, err = runTxnCmd(t, "producers", "out", "--hanging", "1h", "--brokers", addr); err != nil || strings.Contains(out, "out  ") {
		t.Fatalf("producers --hanging 1h: %v\n%s", err, out)
	}
	if _, err := runTxnCmd(t, "abort", "--topic", "out", "--partition", "1", "--brokers", addr); err == nil {
		t.Fatal("abort without a transaction accepted")
	}
	if _, err := runTxnCmd(t, "abort", "--topic", "out", "--partition", "1", "--start-offset", "7", "--brokers", addr); err == nil ||
		!strings.Contains(err.Error(), "no open transaction") {
		t.Fatalf("abort of an unknown start offset: %v", err)
	}
	if lso, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, "out"); err != nil {
		t.Fatal(err)
	} else if o, _ := lso.Lookup("out", 1); o.Offset != 0 {
		t.Fatalf("last stable offset with the open transaction: %+v", o)
	}
	out, err = runTxnCmd(t, "abort", "--topic", "out", "--partition", "1", "--start-offset", "0", "--brokers", addr)
	if err != nil || !strings.Contains(out, "aborted the transaction of producer") {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	// The last stable offset is no longer held back by the transaction.
	adm := kadm.NewClient(cl)
	lso, err := adm.ListCommittedOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("out", 1); o.Offset != 2 {
		t.Fatalf("last stable offset after abort: %+v", o)
	}
}
