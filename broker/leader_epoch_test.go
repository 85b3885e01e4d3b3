package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// epochCase is one CurrentLeaderEpoch a client may send and the error code
// Kafka answers for it against a partition in epoch 0: code for
// ListOffsets and OffsetForLeaderEpoch, fetchCode for Fetch (which reads
// every negative epoch as "no epoch").
type epochCase struct {
	current   int32
	code      int16
	fetchCode int16
}

var epochCases = []epochCase{
	{-1, 0, 0}, // no check
	{0, 0, 0},  // the partition's epoch
	{1, kerr.UnknownLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code},
	{7, kerr.UnknownLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code},
	{-2, kerr.FencedLeaderEpoch.Code, 0}, // older than epoch 0; no epoch for Fetch
}

func epochFetch(version int16, topic string, id [16]byte, part int32, current int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1 // no session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = part, 1<<20, current
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func epochListOffsets(version int16, topic string, part int32, current int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = part, current, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func epochOffsetForLeaderEpoch(version int16, topic string, part int32, current int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = version
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = part, current, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// Fetch (v9+), ListOffsets (v4+) and OffsetForLeaderEpoch (v2+) check the
// client's CurrentLeaderEpoch: -1 and the partition's epoch pass, a newer
// one is UNKNOWN_LEADER_EPOCH, an older one FENCED_LEADER_EPOCH (except in
// Fetch, where any negative epoch means none); a failed check returns no
// data. Versions without the field are not checked, and an
// unknown partition is reported as such whatever the epoch.
func TestCurrentLeaderEpochChecks(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "le", 1)
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "le", 0, makeBatch(1, "a", "b", "c")), 1)
	tp, _ := b.topics.get("le")
	corr := int32(10)
	next := func() int32 { corr++; return corr }

	for _, x := range epochCases {
		for _, v := range []int16{9, 12, 13, 16} {
			r := c.roundTrip(epochFetch(v, "le", tp.id, 0, x.current), next()).(*kmsg.FetchResponse)
			p := r.Topics[0].Partitions[0]
			if p.ErrorCode != x.fetchCode {
				t.Errorf("fetch v%d current %d: error %d, want %d", v, x.current, p.ErrorCode, x.fetchCode)
			}
			if x.fetchCode == 0 && len(p.RecordBatches) == 0 {
				t.Errorf("fetch v%d current %d: no records", v, x.current)
			}
			if x.fetchCode != 0 && len(p.RecordBatches) != 0 {
				t.Errorf("fetch v%d current %d: records with error %d", v, x.current, x.fetchCode)
			}
		}
		for _, v := range []int16{4, 6, 10} {
			r := c.roundTrip(epochListOffsets(v, "le", 0, x.current), next()).(*kmsg.ListOffsetsResponse)
			p := r.Topics[0].Partitions[0]
			wantOff := int64(3)
			if x.code != 0 {
				wantOff = -1
			}
			if p.ErrorCode != x.code || p.Offset != wantOff || p.LeaderEpoch != 0 {
				t.Errorf("list offsets v%d current %d: %+v, want error %d offset %d epoch 0", v, x.current, p, x.code, wantOff)
			}
		}
		for _, v := range []int16{2, 3, 4} {
			r := c.roundTrip(epochOffsetForLeaderEpoch(v, "le", 0, x.current), next()).(*kmsg.OffsetForLeaderEpochResponse)
			p := r.Topics[0].Partitions[0]
			wantEpoch, wantEnd := int32(0), int64(3)
			if x.code != 0 {
				wantEpoch, wantEnd = -1, -1
			}
			if p.ErrorCode != x.code || p.LeaderEpoch != wantEpoch || p.EndOffset != wantEnd {
				t.Errorf("offset for leader epoch v%d current %d: %+v, want error %d epoch %d end %d", v, x.current, p, x.code, wantEpoch, wantEnd)
			}
		}
	}

	// Versions before the field: a stale epoch cannot be sent, nothing is
	// checked.
	if p := c.roundTrip(epochFetch(8, "le", tp.id, 0, 5), next()).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("fetch v8: %+v", p)
	}
	if p := c.roundTrip(epochListOffsets(3, "le", 0, 5), next()).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 3 {
		t.Errorf("list offsets v3: %+v", p)
	}
	// The partition lookup comes first.
	if p := c.roundTrip(epochFetch(12, "le", tp.id, 4, 5), next()).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("fetch of a missing partition with a bad epoch: %+v", p)
	}
	if p := c.roundTrip(epochListOffsets(6, "le", 4, 5), next()).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("list offsets of a missing partition with a bad epoch: %+v", p)
	}
	if p := c.roundTrip(epochOffsetForLeaderEpoch(4, "le", 4, 5), next()).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("offset for leader epoch of a missing partition with a bad epoch: %+v", p)
	}
}

// Within a fetch session a partition with a failed epoch check is answered
// with its error, and the session's other partitions are still served.
func TestCurrentLeaderEpochFetchSession(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "les", 2)
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "les", 0, makeBatch(1, "a")), 1)
	c.roundTrip(produceReq(9, -1, "les", 1, makeBatch(1, "b")), 2)
	req := epochFetch(12, "les", [16]byte{}, 0, 0)
	req.SessionEpoch = 0 // open a session
	bad := kmsg.NewFetchRequestTopicPartition()
	bad.Partition, bad.PartitionMaxBytes, bad.CurrentLeaderEpoch = 1, 1<<20, 3
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, bad)
	r := c.roundTrip(req, 3).(*kmsg.FetchResponse)
	if r.ErrorCode != 0 || r.SessionID == 0 {
		t.Fatalf("session not opened: %+v", r)
	}
	got := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, p := range r.Topics[0].Partitions {
		got[p.Partition] = p
	}
	if p := got[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("partition 0: %+v", p)
	}
	if p := got[1]; p.ErrorCode != kerr.UnknownLeaderEpoch.Code || len(p.RecordBatches) != 0 {
		t.Errorf("partition 1: %+v", p)
	}
}

// Metadata answers the epoch the checks use, before and after a restart,
// and a franz-go client (which sends the epochs it learned from Metadata
// in every Fetch, ListOffsets and OffsetForLeaderEpoch) produces and
// consumes across the restart without a fencing error.
func TestLeaderEpochMetadataAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t)
	b, _ := testBroker(t, func(c *Config) { c.DataDir = dir })
	mustCreate(t, ctx, b, "ler", 2)

	metadataEpochs := func(b *Broker) []int32 {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("ler")
		req.Topics = append(req.Topics, rt)
		r := dialRaw(t, b).roundTrip(req, 1).(*kmsg.MetadataResponse)
		var es []int32
		for _, p := range r.Topics[0].Partitions {
			es = append(es, p.LeaderEpoch)
		}
		return es
	}
	produce := func(b *Broker, n int, prefix string) {
		t.Helper()
		cl := newClient(t, b, kgo.DefaultProduceTopic("ler"))
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(prefix)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		cl.Close()
	}
	consumeAll := func(b *Broker, want int) {
		t.Helper()
		cl := newClient(t, b, kgo.ConsumeTopics("ler"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		got := 0
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for got < want {
			fs := cl.PollFetches(cctx)
			if cctx.Err() != nil {
				t.Fatalf("consumed %d of %d", got, want)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
			got += fs.NumRecords()
		}
	}

	if es := metadataEpochs(b); len(es) != 2 || es[0] != leaderEpoch || es[1] != leaderEpoch {
		t.Fatalf("metadata epochs before restart: %v", es)
	}
	produce(b, 10, "one")
	consumeAll(b, 10)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b2, _ := testBroker(t, func(c *Config) { c.DataDir = dir })
	if es := metadataEpochs(b2); len(es) != 2 || es[0] != leaderEpoch || es[1] != leaderEpoch {
		t.Fatalf("metadata epochs after restart: %v", es)
	}
	// The epoch checked after the restart is the one Metadata answered.
	c := dialRaw(t, b2)
	for p := range int32(2) {
		r := c.roundTrip(epochListOffsets(6, "ler", p, leaderEpoch), 2+p).(*kmsg.ListOffsetsResponse)
		if ec := r.Topics[0].Partitions[0].ErrorCode; ec != 0 {
			t.Fatalf("list offsets after restart with the metadata epoch: error %d", ec)
		}
	}
	produce(b2, 10, "two")
	consumeAll(b2, 20)
}
