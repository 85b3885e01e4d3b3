package compat

import (
	"errors"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/weirtest"
)

// segmentio/kafka-go (old, pinned request versions) against the ACL
// authorizer: as User:ANONYMOUS with DENY WRITE/READ (and ALLOW DESCRIBE)
// on one topic, its Writer gets TOPIC_AUTHORIZATION_FAILED there and
// writes to the open topic; its Reader reads nothing from the denied one.
func TestKafkaGoACLs(t *testing.T) {
	b := weirtest.Start(t, weirtest.BrokerConfig(func(c *broker.Config) {
		c.Authorizer = "acl"
		c.AllowEveryoneIfNoACLFound = true
	}))
	addr := b.Addr()
	createTopic(t, addr, "open", 1)
	createTopic(t, addr, "locked", 1)
	ctx := testContext(t, 60*time.Second)
	res, err := adminFor(t, addr).CreateACLs(ctx, kadm.NewACLs().Deny("User:ANONYMOUS").Topics("locked").
		Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(res) == 0 || res[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}
	// DESCRIBE lets kafka-go see the topic in Metadata (without it the
	// topic is TOPIC_AUTHORIZATION_FAILED there, which kafka-go reports
	// as an unknown topic); the produce itself is then refused.
	res, err = adminFor(t, addr).CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").Topics("locked").
		Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(res) == 0 || res[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}
	write := func(topic string) error {
		w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, RequiredAcks: kafka.RequireAll, MaxAttempts: 2,
			WriteBackoffMin: 10 * time.Millisecond, WriteBackoffMax: 50 * time.Millisecond}
		defer w.Close()
		return w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("v")})
	}
	if err := write("open"); err != nil {
		t.Fatalf("write to the open topic: %v", err)
	}
	err = write("locked")
	var we kafka.WriteErrors
	if errors.As(err, &we) && len(we) == 1 {
		err = we[0]
	}
	if !errors.Is(err, kafka.TopicAuthorizationFailed) {
		t.Fatalf("write to the denied topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: "locked", Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	rctx := testContext(t, 5*time.Second)
	if _, err := r.ReadMessage(rctx); err == nil {
		t.Fatal("read a message from the denied topic")
	} else if !errors.Is(err, kafka.TopicAuthorizationFailed) && rctx.Err() == nil {
		t.Logf("reader error: %v", err)
	}
}
