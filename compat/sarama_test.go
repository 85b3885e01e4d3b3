package compat

import (
	"context"
	"hash/fnv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// sarama (IBM/sarama): ClusterAdmin creates the topic, a SyncProducer with
// WaitForAll produces, partition consumers read back. sarama's default
// partitioner hashes keys with FNV-1a, not murmur2, so placement is checked
// against that formula. Run at sarama's default protocol version and at
// its newest, which use different request versions throughout.
func TestSarama(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{sarama.DefaultVersion, sarama.V3_6_0_0, sarama.V0_11_0_0} {
		t.Run(v.String(), func(t *testing.T) { testSarama(t, v) })
	}
}

func testSarama(t *testing.T, version sarama.KafkaVersion) {
	addr := startWeir(t).Addr()
	topic := "compat-sarama-" + version.String()

	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "weir-compat"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 3
	cfg.Producer.MaxMessageBytes = 1 << 20
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest // a new group starts at the beginning
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Net.DialTimeout = 10 * time.Second

	adm, err := sarama.NewClusterAdmin([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("cluster admin: %v", err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: numPartitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	checkTopic(t, addr, topic, numPartitions)

	prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer prod.Close()
	sent := testRecords()
	msgs := make([]*sarama.ProducerMessage, len(sent))
	for i, r := range sent {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.Key), Value: sarama.StringEncoder(r.Value)}
	}
	if err := prod.SendMessages(msgs); err != nil {
		t.Fatalf("produce: %v", err)
	}
	acked := make([]record, len(msgs))
	for i, m := range msgs {
		acked[i] = record{Key: sent[i].Key, Value: sent[i].Value, Partition: m.Partition, Offset: m.Offset}
	}
	checkProduced(t, addr, topic, sent, acked, saramaHash)

	cons, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cons.Close()
	perPart := map[int32]int{}
	for _, r := range acked {
		perPart[r.Partition]++
	}
	// Open every partition consumer first: closing one waits for its
	// in-flight long-poll fetch (MaxWaitTime), so closes happen once, at
	// the end, for all of them.
	pcs := make([]sarama.PartitionConsumer, numPartitions)
	for p := int32(0); p < numPartitions; p++ {
		if pcs[p], err = cons.ConsumePartition(topic, p, sarama.OffsetOldest); err != nil {
			t.Fatalf("consume partition %d: %v", p, err)
		}
	}
	var got []record
	deadline := time.After(60 * time.Second)
	for p, pc := range pcs {
		for n := 0; n < perPart[int32(p)]; n++ {
			select {
			case m := <-pc.Messages():
				got = append(got, record{Key: string(m.Key), Value: string(m.Value), Partition: m.Partition, Offset: m.Offset})
			case err := <-pc.Errors():
				t.Fatalf("partition %d: %v", p, err)
			case <-deadline:
				t.Fatalf("partition %d: read %d of %d records before the deadline", p, n, perPart[int32(p)])
			}
		}
	}
	for p, pc := range pcs {
		if err := pc.Close(); err != nil {
			t.Fatalf("close partition consumer %d: %v", p, err)
		}
	}
	checkConsumed(t, sent, acked, got, saramaHash)

	// Read it all again as a member of a consumer group, committing
	// (sarama's consumer groups need Kafka 0.10.2+ and a classic group).
	const group = "weir-compat-sarama"
	cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	h := &saramaGroupHandler{want: len(sent), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			// Consume returns at every rebalance; loop until canceled.
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	select {
	case <-h.done:
	case err := <-errc:
		t.Fatalf("group consume: %v", err)
	case <-ctx.Done():
		t.Fatalf("group consume: read %d of %d records before the deadline", h.count(), len(sent))
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("group consume: %v", err)
	}
	if err := cg.Close(); err != nil { // commits the marked offsets
		t.Fatalf("close consumer group: %v", err)
	}
	checkConsumed(t, sent, acked, h.records(), saramaHash)
	checkGroupCommitted(t, addr, group, topic)
}

// saramaGroupHandler collects records and marks each one consumed (the
// offsets are committed by the auto-committer and on Close).
type saramaGroupHandler struct {
	want int
	done chan struct{}

	mu   sync.Mutex
	got  []record
	once sync.Once
}

func (h *saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaGroupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		h.got = append(h.got, record{Key: string(m.Key), Value: string(m.Value), Partition: m.Partition, Offset: m.Offset})
		n := len(h.got)
		h.mu.Unlock()
		sess.MarkMessage(m, "")
		if n >= h.want {
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

func (h *saramaGroupHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

func (h *saramaGroupHandler) records() []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]record(nil), h.got...)
}

// saramaHash is sarama's default partitioner (NewHashPartitioner): FNV-1a
// of the key, as int32, modulo the partition count, negated if negative.
func saramaHash(key string) int32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	p := int32(h.Sum32()) % numPartitions
	if p < 0 {
		p = -p
	}
	return p
}
