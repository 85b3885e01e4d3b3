package broker

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leader discovery (KIP-951): CurrentLeader and NodeEndpoints in Fetch
// (v16+) and Produce (v10+) responses.

// discoveryNodeID is the node ID of the brokers in these tests: not 0, so
// a filled CurrentLeader cannot be mistaken for a zeroed one.
const discoveryNodeID int32 = 7

func discoveryBroker(t *testing.T) *Broker {
	t.Helper()
	b, _ := testBroker(t, func(c *Config) { c.NodeID = discoveryNodeID })
	return b
}

// metadataBroker is the broker entry Metadata answers: the endpoint a
// response's NodeEndpoints must name.
func metadataBroker(t *testing.T, c *rawConn, corr int32) kmsg.MetadataResponseBroker {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	r := c.roundTrip(req, corr).(*kmsg.MetadataResponse)
	if len(r.Brokers) != 1 {
		t.Fatalf("metadata brokers: %+v", r.Brokers)
	}
	return r.Brokers[0]
}

// fetchParts is a Fetch (no session) of partitions [0, n) of one topic at
// offset 0, each with CurrentLeaderEpoch current.
func fetchParts(version int16, topic string, id [16]byte, n, current int32) *kmsg.FetchRequest {
	req := epochFetch(version, topic, id, 0, current)
	for p := int32(1); p < n; p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, 1<<20, current
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	return req
}

// produceParts is an acks=-1 Produce of one batch to each of partitions
// [0, n) of one topic (by ID from v13).
func produceParts(version int16, topic string, id [16]byte, n int32) *kmsg.ProduceRequest {
	req := produceReq(version, -1, topic, 0, makeBatch(1, "x"))
	req.Topics[0].TopicID = id
	for p := int32(1); p < n; p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, makeBatch(1, "x")
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	return req
}

func fetchPartitionsByIndex(t *testing.T, r *kmsg.FetchResponse) map[int32]kmsg.FetchResponseTopicPartition {
	t.Helper()
	if len(r.Topics) != 1 {
		t.Fatalf("fetch response topics: %+v", r.Topics)
	}
	got := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, p := range r.Topics[0].Partitions {
		got[p.Partition] = p
	}
	return got
}

// closePartitionLog closes one partition's log under its live topic: the
// state a request racing the topic's deletion and re-creation under the
// same name meets (the request holds the old topic's log; the name still
// exists), which the handlers answer NOT_LEADER_OR_FOLLOWER
// (logErrorCode). The broker's Close tolerates the log being closed
// already.
func closePartitionLog(t *testing.T, b *Broker, topic string, p int32) {
	t.Helper()
	tp, ok := b.topics.get(topic)
	if !ok {
		t.Fatalf("topic %s not found", topic)
	}
	l, ok := tp.partition(p)
	if !ok {
		t.Fatalf("partition %s-%d not found", topic, p)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close %s-%d: %v", topic, p, err)
	}
}

// Without a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH partition, a
// Fetch response names no leader at any version: CurrentLeader stays
// -1/-1 and NodeEndpoints empty, for served partitions, for
// UNKNOWN_LEADER_EPOCH (a newer epoch, which KIP-951 does not cover), for
// OFFSET_OUT_OF_RANGE and for an unknown topic. An epoch older than 0 is
// negative, which Fetch reads as "no epoch" (Kafka's
// FetchRequest.optionalEpoch): it is served, so FENCED_LEADER_EPOCH, the
// other error that names a leader, cannot occur.
func TestLeaderDiscoveryFetchDefaults(t *testing.T) {
	b := discoveryBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ldf", 2)
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "ldf", 0, makeBatch(1, "a", "b")), 1)
	c.roundTrip(produceReq(9, -1, "ldf", 1, makeBatch(1, "c")), 2)
	tp, _ := b.topics.get("ldf")
	corr := int32(10)
	next := func() int32 { corr++; return corr }

	cases := []struct {
		current int32
		code    int16
	}{
		{-1, 0},
		{0, 0},
		{-2, 0},
		{math.MinInt32, 0},
		{1, kerr.UnknownLeaderEpoch.Code},
		{math.MaxInt32, kerr.UnknownLeaderEpoch.Code},
	}
	for _, x := range cases {
		for _, v := range []int16{12, 15, 16, 17, 18} {
			r := c.roundTrip(fetchParts(v, "ldf", tp.id, 2, x.current), next()).(*kmsg.FetchResponse)
			if len(r.Brokers) != 0 {
				t.Errorf("fetch v%d current %d: NodeEndpoints %+v, want none", v, x.current, r.Brokers)
			}
			got := fetchPartitionsByIndex(t, r)
			for p := range int32(2) {
				rp, ok := got[p]
				if !ok {
					t.Fatalf("fetch v%d current %d: partition %d missing", v, x.current, p)
				}
				if rp.ErrorCode != x.code {
					t.Errorf("fetch v%d current %d partition %d: error %d, want %d", v, x.current, p, rp.ErrorCode, x.code)
				}
				if (x.code == 0) != (len(rp.RecordBatches) > 0) {
					t.Errorf("fetch v%d current %d partition %d: %d record bytes with error %d", v, x.current, p, len(rp.RecordBatches), rp.ErrorCode)
				}
				if rp.CurrentLeader.LeaderID != -1 || rp.CurrentLeader.LeaderEpoch != -1 {
					t.Errorf("fetch v%d current %d partition %d: CurrentLeader %+v, want -1/-1", v, x.current, p, rp.CurrentLeader)
				}
			}
		}
	}

	// Other partition errors name no leader either.
	oor := fetchReq(16, "ldf", tp.id, 0, 100, 0)
	r := c.roundTrip(oor, next()).(*kmsg.FetchResponse)
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || len(r.Brokers) != 0 {
		t.Errorf("fetch out of range: %+v, NodeEndpoints %+v", p, r.Brokers)
	}
	unknown := fetchReq(16, "", [16]byte{1, 2, 3}, 0, 0, 0)
	r = c.roundTrip(unknown, next()).(*kmsg.FetchResponse)
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code || p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || len(r.Brokers) != 0 {
		t.Errorf("fetch of an unknown topic ID: %+v, NodeEndpoints %+v", p, r.Brokers)
	}
}

// A Fetch partition answered NOT_LEADER_OR_FOLLOWER carries, from v16,
// CurrentLeader = (this node, epoch 0), and the response's NodeEndpoints
// list this broker exactly as Metadata does, once; before v16 the fields
// stay at their defaults. The request's healthy partition is served with
// the defaults. A kgo client's raw request (at the newest version both
// sides speak) decodes the same.
func TestLeaderDiscoveryFetchNotLeader(t *testing.T) {
	b := discoveryBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ldn", 3)
	c := dialRaw(t, b)
	for p := range int32(3) {
		c.roundTrip(produceReq(9, -1, "ldn", p, makeBatch(1, "a")), 1+p)
	}
	tp, _ := b.topics.get("ldn")
	closePartitionLog(t, b, "ldn", 0)
	closePartitionLog(t, b, "ldn", 2)
	want := metadataBroker(t, c, 5)
	if want.NodeID != discoveryNodeID {
		t.Fatalf("metadata node ID %d, want %d", want.NodeID, discoveryNodeID)
	}
	corr := int32(10)
	next := func() int32 { corr++; return corr }

	check := func(what string, v int16, r *kmsg.FetchResponse) {
		t.Helper()
		got := fetchPartitionsByIndex(t, r)
		named := v >= 16
		for _, p := range []int32{0, 2} {
			rp := got[p]
			if rp.ErrorCode != kerr.NotLeaderForPartition.Code || len(rp.RecordBatches) != 0 {
				t.Errorf("%s v%d partition %d: error %d with %d record bytes, want NOT_LEADER_OR_FOLLOWER and none", what, v, p, rp.ErrorCode, len(rp.RecordBatches))
			}
			wantID, wantEpoch := int32(-1), int32(-1)
			if named {
				wantID, wantEpoch = discoveryNodeID, leaderEpoch
			}
			if rp.CurrentLeader.LeaderID != wantID || rp.CurrentLeader.LeaderEpoch != wantEpoch {
				t.Errorf("%s v%d partition %d: CurrentLeader %d/%d, want %d/%d", what, v, p, rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch, wantID, wantEpoch)
			}
		}
		if rp := got[1]; rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 || rp.CurrentLeader.LeaderID != -1 || rp.CurrentLeader.LeaderEpoch != -1 {
			t.Errorf("%s v%d healthy partition: %+v", what, v, rp)
		}
		if !named {
			if len(r.Brokers) != 0 {
				t.Errorf("%s v%d: NodeEndpoints %+v, want none", what, v, r.Brokers)
			}
			return
		}
		// One entry for the two partitions that name the same leader.
		if len(r.Brokers) != 1 {
			t.Fatalf("%s v%d: NodeEndpoints %+v, want this broker once", what, v, r.Brokers)
		}
		e := r.Brokers[0]
		if e.NodeID != want.NodeID || e.Host != want.Host || e.Port != want.Port || !reflect.DeepEqual(e.Rack, want.Rack) {
			t.Errorf("%s v%d: NodeEndpoints entry %d %s:%d rack %v, want Metadata's %d %s:%d rack %v", what, v, e.NodeID, e.Host, e.Port, e.Rack, want.NodeID, want.Host, want.Port, want.Rack)
		}
	}

	for _, v := range []int16{12, 13, 15, 16, 17, 18} {
		check("fetch", v, c.roundTrip(fetchParts(v, "ldn", tp.id, 3, -1), next()).(*kmsg.FetchResponse))
	}
	// The partition's own epoch passes the epoch check and meets the
	// closed log the same way.
	check("fetch with epoch 0", 16, c.roundTrip(fetchParts(16, "ldn", tp.id, 3, leaderEpoch), next()).(*kmsg.FetchResponse))

	// Within a session: the error partitions are listed (full response)
	// with the same hint.
	sess := fetchParts(17, "ldn", tp.id, 3, -1)
	sess.SessionEpoch = 0
	r := c.roundTrip(sess, next()).(*kmsg.FetchResponse)
	if r.SessionID == 0 {
		t.Fatalf("session not opened: %+v", r)
	}
	check("fetch opening a session", 17, r)
	// An incremental fetch naming no partition: the session's error
	// partitions are listed again, with the hint.
	inc := kmsg.NewPtrFetchRequest()
	inc.Version, inc.ReplicaID, inc.MaxBytes = 17, -1, 1<<20
	id := r.SessionID
	inc.SessionID, inc.SessionEpoch = id, 1
	r = c.roundTrip(inc, next()).(*kmsg.FetchResponse)
	if r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("incremental fetch: %+v", r)
	}
	check("incremental fetch", 17, r)

	cl := newClient(t, b)
	kr, err := cl.Request(ctx, fetchParts(new(kmsg.FetchRequest).MaxVersion(), "ldn", tp.id, 3, -1))
	if err != nil {
		t.Fatalf("kgo fetch request: %v", err)
	}
	fr := kr.(*kmsg.FetchResponse)
	if fr.Version < 16 {
		t.Fatalf("kgo fetch at v%d, want 16+", fr.Version)
	}
	check("kgo fetch", fr.Version, fr)
}

// A Produce partition answered NOT_LEADER_OR_FOLLOWER carries, from v10,
// CurrentLeader = (this node, epoch 0), and NodeEndpoints list this broker
// as Metadata does, once; before v10 the fields stay at their defaults.
// The request's healthy partition is appended and names no leader, and a
// request without such an error has no NodeEndpoints.
func TestLeaderDiscoveryProduceNotLeader(t *testing.T) {
	b := discoveryBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ldp", 3)
	c := dialRaw(t, b)
	tp, _ := b.topics.get("ldp")
	want := metadataBroker(t, c, 1)
	corr := int32(10)
	next := func() int32 { corr++; return corr }

	// Nothing closed yet: every partition appended, no leader named.
	for _, v := range []int16{9, 10, 13} {
		r := c.roundTrip(produceParts(v, "ldp", tp.id, 3), next()).(*kmsg.ProduceResponse)
		if len(r.Brokers) != 0 {
			t.Errorf("produce v%d: NodeEndpoints %+v, want none", v, r.Brokers)
		}
		for _, p := range r.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 {
				t.Errorf("produce v%d partition %d: %+v", v, p.Partition, p)
			}
		}
	}
	// Other errors name no leader.
	r := c.roundTrip(produceReq(10, -1, "ldp", 9, makeBatch(1, "x")), next()).(*kmsg.ProduceResponse)
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || len(r.Brokers) != 0 {
		t.Errorf("produce to a missing partition: %+v, NodeEndpoints %+v", p, r.Brokers)
	}

	closePartitionLog(t, b, "ldp", 0)
	closePartitionLog(t, b, "ldp", 2)
	check := func(what string, v int16, r *kmsg.ProduceResponse) {
		t.Helper()
		named := v >= 10
		for _, p := range r.Topics[0].Partitions {
			if p.Partition == 1 {
				if p.ErrorCode != 0 || p.BaseOffset < 0 || p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 {
					t.Errorf("%s v%d healthy partition: %+v", what, v, p)
				}
				continue
			}
			if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.BaseOffset != -1 {
				t.Errorf("%s v%d partition %d: error %d base offset %d, want NOT_LEADER_OR_FOLLOWER and -1", what, v, p.Partition, p.ErrorCode, p.BaseOffset)
			}
			wantID, wantEpoch := int32(-1), int32(-1)
			if named {
				wantID, wantEpoch = discoveryNodeID, leaderEpoch
			}
			if p.CurrentLeader.LeaderID != wantID || p.CurrentLeader.LeaderEpoch != wantEpoch {
				t.Errorf("%s v%d partition %d: CurrentLeader %d/%d, want %d/%d", what, v, p.Partition, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch, wantID, wantEpoch)
			}
		}
		if !named {
			if len(r.Brokers) != 0 {
				t.Errorf("%s v%d: NodeEndpoints %+v, want none", what, v, r.Brokers)
			}
			return
		}
		if len(r.Brokers) != 1 {
			t.Fatalf("%s v%d: NodeEndpoints %+v, want this broker once", what, v, r.Brokers)
		}
		e := r.Brokers[0]
		if e.NodeID != want.NodeID || e.Host != want.Host || e.Port != want.Port || !reflect.DeepEqual(e.Rack, want.Rack) {
			t.Errorf("%s v%d: NodeEndpoints entry %d %s:%d rack %v, want Metadata's %d %s:%d rack %v", what, v, e.NodeID, e.Host, e.Port, e.Rack, want.NodeID, want.Host, want.Port, want.Rack)
		}
	}
	for _, v := range []int16{3, 8, 9, 10, 11, 12, 13} {
		check("produce", v, c.roundTrip(produceParts(v, "ldp", tp.id, 3), next()).(*kmsg.ProduceResponse))
	}
	acks1 := produceParts(10, "ldp", tp.id, 3)
	acks1.Acks = 1
	check("produce acks=1", 10, c.roundTrip(acks1, next()).(*kmsg.ProduceResponse))

	cl := newClient(t, b, kgo.DisableIdempotentWrite())
	kr, err := cl.Request(ctx, produceParts(new(kmsg.ProduceRequest).MaxVersion(), "ldp", tp.id, 3))
	if err != nil {
		t.Fatalf("kgo produce request: %v", err)
	}
	pr := kr.(*kmsg.ProduceResponse)
	if pr.Version < 10 {
		t.Fatalf("kgo produce at v%d, want 10+", pr.Version)
	}
	check("kgo produce", pr.Version, pr)
}

// The errors that name the leader are Kafka's: Fetch for
// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH (FENCED cannot occur here
// while every epoch is 0, but the rule is Kafka's), Produce for
// NOT_LEADER_OR_FOLLOWER only (a Produce carries no leader epoch);
// UNKNOWN_LEADER_EPOCH and every other error name none.
func TestLeaderDiscoveryErrorsNamingLeader(t *testing.T) {
	for _, x := range []struct {
		err            *kerr.Error
		fetch, produce bool
	}{
		{kerr.NotLeaderForPartition, true, true},
		{kerr.FencedLeaderEpoch, true, false},
		{kerr.UnknownLeaderEpoch, false, false},
		{kerr.UnknownTopicOrPartition, false, false},
		{kerr.UnknownTopicID, false, false},
		{kerr.OffsetOutOfRange, false, false},
		{kerr.KafkaStorageError, false, false},
		{kerr.RequestTimedOut, false, false},
		{kerr.LeaderNotAvailable, false, false},
	} {
		if got := fetchNamesLeader(x.err.Code); got != x.fetch {
			t.Errorf("fetch %s: names leader %v, want %v", x.err.Message, got, x.fetch)
		}
		if got := produceNamesLeader(x.err.Code); got != x.produce {
			t.Errorf("produce %s: names leader %v, want %v", x.err.Message, got, x.produce)
		}
	}
	if fetchNamesLeader(0) || produceNamesLeader(0) {
		t.Error("no error names a leader")
	}
}

// Compatibility: a franz-go producer (Produce v13) handles the hinted
// NOT_LEADER_OR_FOLLOWER answer. The hint names this node at the epoch the
// client already knows, which franz-go does not take as a move: it retries
// here and surfaces NOT_LEADER_OR_FOLLOWER once its record retries are
// spent, while the same producer's records to a healthy partition are
// acknowledged. (The same holds without a hint; this pins that the hinted
// response does not derail the client.)
func TestLeaderDiscoveryFranzGoProducer(t *testing.T) {
	b := discoveryBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ldk", 2)
	closePartitionLog(t, b, "ldk", 0)
	cl := newClient(t, b, kgo.DefaultProduceTopic("ldk"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(2), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("produce to the healthy partition: %v", err)
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("produce to the closed partition: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}
