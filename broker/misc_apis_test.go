package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDeleteRecords(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "dr", 2)
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "dr", 0, makeBatch(1, "a", "b", "c", "d")), 1)
	adm := kadm.NewClient(newClient(t, b))

	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 2})
	off.Add(kadm.Offset{Topic: "dr", Partition: 1, At: 5}) // above the high watermark (0)
	rs, err := adm.DeleteRecords(ctx, off)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 2 {
		t.Fatalf("p0: %+v", r)
	}
	if r, _ := rs.Lookup("dr", 1); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("p1: %+v", r)
	}
	// -1 means the high watermark.
	off = kadm.Offsets{}
	off.Add(kadm.Offset{Topic: "dr", Partition: 0, At: -1})
	rs, _ = adm.DeleteRecords(ctx, off)
	if r, _ := rs.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("-1: %+v", r)
	}
	// The new start is what ListOffsets earliest answers.
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 4 {
		t.Fatalf("start offset %d", o.Offset)
	}
	// Unknown topic and partition (raw: kadm routes by metadata first).
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 1
	for _, tp := range []struct {
		topic string
		part  int32
	}{{"nope", 0}, {"dr", 7}} {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = tp.part, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := c.roundTrip(req, 9).(*kmsg.DeleteRecordsResponse)
	for _, rt := range resp.Topics {
		if p := rt.Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.LowWatermark != -1 {
			t.Fatalf("%s: %+v", rt.Topic, p)
		}
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ep", 1)
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "ep", 0, makeBatch(1, "a", "b", "c")), 1)
	type q struct {
		part           int32
		current, epoch int32
		code           int16
		wantEpoch      int32
		wantEnd        int64
	}
	for i, x := range []q{
		{0, 0, 0, 0, 0, 3},
		{0, -1, 0, 0, 0, 3},
		{0, 0, 5, 0, -1, -1},
		{0, 3, 0, kerr.UnknownLeaderEpoch.Code, -1, -1},
		{9, 0, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
	} {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version = 3
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "ep"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = x.part, x.current, x.epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := c.roundTrip(req, int32(10+i)).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if p.ErrorCode != x.code || (x.code == 0 && (p.LeaderEpoch != x.wantEpoch || p.EndOffset != x.wantEnd)) {
			t.Errorf("case %d: %+v", i, p)
		}
	}
}

func TestInitProducerID(t *testing.T) {
	b, _ := testBroker(t)
	c := dialRaw(t, b)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	r1 := c.roundTrip(req, 1).(*kmsg.InitProducerIDResponse)
	r2 := c.roundTrip(req, 2).(*kmsg.InitProducerIDResponse)
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r1.ProducerID < 0 || r2.ProducerID <= r1.ProducerID || r1.ProducerEpoch != 0 {
		t.Fatalf("ids %+v %+v", r1, r2)
	}
	// Served by the transaction coordinator: transactional ids too.
	req.TransactionalID = kmsg.StringPtr("tx")
	req.TransactionTimeoutMillis = 60000
	r3 := c.roundTrip(req, 3).(*kmsg.InitProducerIDResponse)
	if r3.ErrorCode != 0 || r3.ProducerID == r1.ProducerID || r3.ProducerID == r2.ProducerID {
		t.Fatalf("transactional: %+v", r3)
	}
}

// The group.Topics view the coordinator uses, and lag-in-time timestamps.
func TestBrokerTopicsView(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "bt", 2)
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "bt", 1, makeBatch(5000, "a", "b")), 1)
	bt := brokerTopics{b}
	tp, _ := b.topics.get("bt")
	if n, ok := bt.Partitions("bt"); !ok || n != 2 {
		t.Fatal(n, ok)
	}
	if id, ok := bt.TopicID("bt"); !ok || id != tp.id {
		t.Fatal("TopicID")
	}
	if name, ok := bt.TopicName(tp.id); !ok || name != "bt" {
		t.Fatal("TopicName")
	}
	if hw, ok := bt.HighWatermark("bt", 1); !ok || hw != 2 {
		t.Fatal("HighWatermark", hw, ok)
	}
	if s, ok := bt.LogStartOffset("bt", 1); !ok || s != 0 {
		t.Fatal("LogStartOffset", s, ok)
	}
	if ts, ok := bt.TimestampAt("bt", 1, 1); !ok || !ts.Equal(time.UnixMilli(5001)) {
		t.Fatal("TimestampAt", ts, ok)
	}
	for _, miss := range []func() bool{
		func() bool { _, ok := bt.Partitions("nope"); return ok },
		func() bool { _, ok := bt.TopicID("nope"); return ok },
		func() bool { _, ok := bt.TopicName([16]byte{1}); return ok },
		func() bool { _, ok := bt.HighWatermark("bt", 5); return ok },
		func() bool { _, ok := bt.LogStartOffset("nope", 0); return ok },
		func() bool { _, ok := bt.TimestampAt("bt", 1, 2); return ok }, // caught up
		func() bool { _, ok := bt.TimestampAt("bt", 0, 0); return ok }, // empty
	} {
		if miss() {
			t.Fatal("lookup of a missing thing succeeded")
		}
	}
}

// No SASL, no authorizer: answered with Kafka's codes, not a closed
// connection.
func TestSASLAndACLsDisabled(t *testing.T) {
	b, _ := testBroker(t)
	c := dialRaw(t, b)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = "PLAIN"
	if r := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("sasl: %+v", r)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version = 2
	if r := c.roundTrip(da, 2).(*kmsg.DescribeACLsResponse); r.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("describe acls: %+v", r)
	}
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Version = 2
	ca.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	if r := c.roundTrip(ca, 3).(*kmsg.CreateACLsResponse); len(r.Results) != 2 || r.Results[1].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("create acls: %+v", r)
	}
	dl := kmsg.NewPtrDeleteACLsRequest()
	dl.Version = 2
	dl.Filters = make([]kmsg.DeleteACLsRequestFilter, 1)
	if r := c.roundTrip(dl, 4).(*kmsg.DeleteACLsResponse); len(r.Results) != 1 || r.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("delete acls: %+v", r)
	}
}

func TestAdvertisedAddr(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.AdvertisedAddr = "kafka.example:19092" })
	c := dialRaw(t, b)
	r := c.roundTrip(kmsg.NewPtrMetadataRequest(), 1).(*kmsg.MetadataResponse)
	if r.Brokers[0].Host != "kafka.example" || r.Brokers[0].Port != 19092 {
		t.Fatalf("advertised %s:%d", r.Brokers[0].Host, r.Brokers[0].Port)
	}
	name := func() (string, error) { return "box", nil }
	none := func() (string, error) { return "", errors.New("no name") }
	for _, c := range []struct {
		host string
		fn   func() (string, error)
		want string
	}{{"127.0.0.1", name, "127.0.0.1"}, {"0.0.0.0", name, "box"}, {"::", name, "box"}, {"0.0.0.0", none, "127.0.0.1"}, {"kafka", name, "kafka"}} {
		if got := advertisedHost(c.host, c.fn); got != c.want {
			t.Errorf("advertisedHost(%q) = %q, want %q", c.host, got, c.want)
		}
	}
}
