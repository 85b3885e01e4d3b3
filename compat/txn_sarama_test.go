package compat

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weirhq/weir/weirtest"
)

// sarama's transactional producer against weir: three transactions over
// every partition (commit, abort, commit); a read_committed reader sees
// exactly the committed records, a read_uncommitted reader all of them, and
// the coordinator reports the transactional id as CompleteCommit.
func TestSaramaTransactions(t *testing.T) {
	const (
		topic      = "compat-sarama-txn"
		txnID      = "weir-compat-sarama-txn"
		partitions = 3
		per        = 4
	)
	b := weirtest.Start(t, weirtest.WithTestLog(), weirtest.WithTopic(topic, partitions))
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "weir-compat-sarama-txn"
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	prod, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatalf("new transactional producer: %v", err)
	}
	defer prod.Close()
	if !prod.IsTransactional() {
		t.Fatal("producer is not transactional")
	}
	for txn := range 3 {
		if err := prod.BeginTxn(); err != nil {
			t.Fatalf("begin transaction %d: %v", txn, err)
		}
		var msgs []*sarama.ProducerMessage
		for p := range partitions {
			for i := range per {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(p),
					Value: sarama.StringEncoder(fmt.Sprintf("t%d-p%d-%d", txn, p, i))})
			}
		}
		if err := prod.SendMessages(msgs); err != nil {
			t.Fatalf("send in transaction %d: %v", txn, err)
		}
		if txn == 1 {
			if err := prod.AbortTxn(); err != nil {
				t.Fatalf("abort transaction %d: %v", txn, err)
			}
			continue
		}
		if err := prod.CommitTxn(); err != nil {
			t.Fatalf("commit transaction %d: %v", txn, err)
		}
	}
	if s := prod.TxnStatus(); s&sarama.ProducerTxnFlagReady == 0 {
		t.Fatalf("producer transaction status %v, want ready", s)
	}

	committed, all := txnValues(partitions, per)
	if got := readAllValues(t, b.Addr(), topic, kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed saw %v, want %v", got, committed)
	}
	if got := readAllValues(t, b.Addr(), topic, kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted saw %v, want %v", got, all)
	}
	d, err := adminFor(t, b.Addr()).DescribeTransactions(testContext(t, 10*time.Second), txnID)
	if err != nil {
		t.Fatalf("describe transactions: %v", err)
	}
	if s := d[txnID].State; s != "CompleteCommit" {
		t.Fatalf("transaction %s is %q, want CompleteCommit", txnID, s)
	}
}
