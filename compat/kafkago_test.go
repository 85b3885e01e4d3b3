package compat

import (
	"context"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// segmentio/kafka-go: kafka.Client creates the topic, a Writer with
// RequireAll and the Murmur2Balancer (documented as the Java partitioner)
// produces, one Reader per partition (no group) reads back. kafka-go pins
// old, fixed request versions, which is what this test exercises.
func TestKafkaGo(t *testing.T) {
	addr := startWeir(t).Addr()
	const topic = "compat-kafka-go"
	ctx := testContext(t, 60*time.Second)

	cl := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 30 * time.Second}
	resp, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: numPartitions, ReplicationFactor: 1}},
	})
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := resp.Errors[topic]; err != nil {
		t.Fatalf("create topic: %v", err)
	}
	checkTopic(t, addr, topic, numPartitions)

	var (
		mu    sync.Mutex
		acked []record
	)
	w := &kafka.Writer{
		Addr:         kafka.TCP(addr),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
		BatchBytes:   1 << 20,
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				return // reported by WriteMessages
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				acked = append(acked, record{Key: string(m.Key), Value: string(m.Value), Partition: int32(m.Partition), Offset: m.Offset})
			}
		},
	}
	sent := testRecords()
	msgs := make([]kafka.Message, len(sent))
	for i, r := range sent {
		msgs[i] = kafka.Message{Key: []byte(r.Key), Value: []byte(r.Value)}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close writer: %v", err)
	}
	mu.Lock()
	checkProduced(t, addr, topic, sent, acked, javaMurmur2)
	mu.Unlock()

	perPart := map[int32]int{}
	for _, r := range acked {
		perPart[r.Partition]++
	}
	var got []record
	for p := 0; p < numPartitions; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   []string{addr},
			Topic:     topic,
			Partition: p,
			MinBytes:  1,
			MaxBytes:  4 << 20,
			MaxWait:   100 * time.Millisecond,
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < perPart[int32(p)]; n++ {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			m, err := r.ReadMessage(rctx)
			cancel()
			if err != nil {
				t.Fatalf("partition %d: read %d of %d: %v", p, n, perPart[int32(p)], err)
			}
			got = append(got, record{Key: string(m.Key), Value: string(m.Value), Partition: int32(m.Partition), Offset: m.Offset})
		}
		if err := r.Close(); err != nil {
			t.Fatalf("close reader %d: %v", p, err)
		}
	}
	checkConsumed(t, sent, acked, got, javaMurmur2)

	// Read it all again with kafka-go's consumer-group Reader, committing
	// each message synchronously (CommitInterval 0).
	const group = "weir-compat-kafka-go"
	gr := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{addr},
		GroupID:           group,
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		MinBytes:          1,
		MaxBytes:          4 << 20,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: time.Second,
		SessionTimeout:    30 * time.Second,
	})
	got = got[:0]
	for len(got) < len(sent) {
		m, err := gr.ReadMessage(ctx) // commits the message (group reader)
		if err != nil {
			t.Fatalf("group reader: read %d of %d: %v", len(got), len(sent), err)
		}
		got = append(got, record{Key: string(m.Key), Value: string(m.Value), Partition: int32(m.Partition), Offset: m.Offset})
	}
	if err := gr.Close(); err != nil {
		t.Fatalf("close group reader: %v", err)
	}
	checkConsumed(t, sent, acked, got, javaMurmur2)
	checkGroupCommitted(t, addr, group, topic)
}
