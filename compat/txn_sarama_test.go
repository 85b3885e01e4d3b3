package compat

import (
	"errors"
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
	b := weirtest.Start(t, weirtest.TestLog(), weirtest.Topic(topic, partitions))
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
	if got := saramaReadCommitted(t, b.Addr(), topic, partitions, per*2); !slices.Equal(got, committed) {
		t.Fatalf("sarama read_committed consumer saw %v, want %v", got, committed)
	}
	d, err := adminFor(t, b.Addr()).DescribeTransactions(testContext(t, 10*time.Second), txnID)
	if err != nil {
		t.Fatalf("describe transactions: %v", err)
	}
	if s := d[txnID].State; s != "CompleteCommit" {
		t.Fatalf("transaction %s is %q, want CompleteCommit", txnID, s)
	}
}

// saramaReadCommitted reads want records from each partition of topic with
// sarama's partition consumer at isolation read_committed (sarama filters
// aborted batches with the fetch response's aborted transactions, so this
// checks weir's aborted-transaction index through a second client) and
// returns their values sorted. The last transaction commits on every
// partition, so a leaked aborted record would be read before the count.
func saramaReadCommitted(t *testing.T, addr, topic string, partitions, want int) []string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cons, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer cons.Close()
	pcs := make([]sarama.PartitionConsumer, partitions)
	for p := range pcs {
		if pcs[p], err = cons.ConsumePartition(topic, int32(p), sarama.OffsetOldest); err != nil {
			t.Fatalf("consume partition %d: %v", p, err)
		}
	}
	var got []string
	deadline := time.After(15 * time.Second)
	for p, pc := range pcs {
		for n := 0; n < want; n++ {
			select {
			case m := <-pc.Messages():
				got = append(got, string(m.Value))
			case err := <-pc.Errors():
				t.Fatalf("partition %d: %v", p, err)
			case <-deadline:
				t.Fatalf("partition %d: read %d of %d records before the deadline", p, n, want)
			}
		}
	}
	for p, pc := range pcs {
		if err := pc.Close(); err != nil {
			t.Fatalf("close partition consumer %d: %v", p, err)
		}
	}
	slices.Sort(got)
	return got
}

// A second sarama producer with the same transactional id bumps the epoch:
// the first producer's next transaction fails as fenced (sarama surfaces
// PRODUCER_FENCED or, for older request versions, INVALID_PRODUCER_EPOCH),
// and only the first producer's earlier record and the second producer's
// records are committed.
func TestSaramaTransactionFencing(t *testing.T) {
	const (
		topic = "compat-sarama-fence"
		txnID = "weir-compat-sarama-fence"
	)
	b := weirtest.Start(t, weirtest.TestLog(), weirtest.Topic(topic, 1))
	newProducer := func() sarama.SyncProducer {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V3_6_0_0
		cfg.Producer.Idempotent = true
		cfg.Producer.Transaction.ID = txnID
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 1
		cfg.Producer.Transaction.Retry.Max = 1
		cfg.Net.MaxOpenRequests = 1
		p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
		if err != nil {
			t.Fatalf("new transactional producer: %v", err)
		}
		return p
	}
	send := func(p sarama.SyncProducer, v string) error {
		if err := p.BeginTxn(); err != nil {
			return err
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)}); err != nil {
			return err
		}
		return p.CommitTxn()
	}
	zombie := newProducer()
	defer zombie.Close()
	if err := send(zombie, "z0"); err != nil {
		t.Fatalf("first producer, first transaction: %v", err)
	}
	fresh := newProducer()
	defer fresh.Close()
	if err := send(fresh, "f0"); err != nil {
		t.Fatalf("second producer: %v", err)
	}
	err := send(zombie, "z1")
	if !errors.Is(err, sarama.ErrProducerFenced) && !errors.Is(err, sarama.ErrInvalidProducerEpoch) {
		t.Fatalf("fenced producer's transaction: got %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	t.Logf("fenced producer: %v", err)
	// A last committed record, so a leaked z1 would sort before it in the
	// partition and be read.
	if err := send(fresh, "f1"); err != nil {
		t.Fatalf("second producer after the fence: %v", err)
	}
	if got, want := readAllValues(t, b.Addr(), topic, kgo.ReadCommitted(), 3), []string{"f0", "f1", "z0"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}
}
