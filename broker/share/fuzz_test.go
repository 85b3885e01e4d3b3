package share

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzStateRecord: the state decoders never panic on any input, never
// claim a window beyond their bound, and what encodePartition writes
// decodes to the same state.
func FuzzStateRecord(f *testing.F) {
	p := &sharePartition{key: partKey{"g", [16]byte{1}, 3}, start: 7, recs: []inflight{
		{state: stAvailable, count: 1}, {state: stAcquired, count: 2, member: "m"}, {state: stArchived, count: 5}, {state: stAcknowledged, count: 1},
	}}
	f.Add(partitionKey(p.key), encodePartition(p))
	f.Add(groupConfKey("g"), encodeGroupConf(map[string]string{ConfAutoOffsetReset: "earliest"}))
	f.Add([]byte{0, 0}, []byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		k, err := decodeKey(key)
		if err == nil && k.kind == keyPartition && string(partitionKey(k.part)) != string(key) {
			t.Fatalf("key %x decodes to %+v, which encodes to %x", key, k.part, partitionKey(k.part))
		}
		var q sharePartition
		if err := decodePartition(value, &q, 1000); err == nil {
			if len(q.recs) > 1000 {
				t.Fatalf("decoded a window of %d", len(q.recs))
			}
			for _, r := range q.recs {
				if r.state == stAcquired {
					t.Fatal("decoded an acquired record")
				}
			}
			var r sharePartition
			if err := decodePartition(encodePartition(&q), &r, 1000); err != nil || r.start != q.start || len(r.recs) != len(q.recs) {
				t.Fatalf("re-encoded state does not decode alike: %v", err)
			}
			for i := range r.recs {
				if r.recs[i] != q.recs[i] {
					t.Fatalf("record %d: %+v, then %+v", i, q.recs[i], r.recs[i])
				}
			}
		}
		_, _ = decodeGroupConf(value)
	})
}

// The snapshot of a partition holding every state decodes to it, acquired
// records as available with their counts.
func TestStateRoundTrip(t *testing.T) {
	p := &sharePartition{key: partKey{"g", [16]byte{1}, 3}, start: 7, recs: []inflight{
		{state: stAvailable, count: 1}, {state: stAcquired, count: 2, member: "m"}, {state: stArchived, count: 5}, {state: stAcknowledged, count: 1},
	}}
	k, err := decodeKey(partitionKey(p.key))
	if err != nil || k.part != p.key {
		t.Fatalf("key: %+v %v", k, err)
	}
	var q sharePartition
	if err := decodePartition(encodePartition(p), &q, 100); err != nil {
		t.Fatal(err)
	}
	want := []inflight{{state: stAvailable, count: 1}, {state: stAvailable, count: 2}, {state: stArchived, count: 5}, {state: stAcknowledged, count: 1}}
	if q.start != 7 || len(q.recs) != len(want) {
		t.Fatalf("decoded start %d, %d records", q.start, len(q.recs))
	}
	for i := range want {
		if q.recs[i] != want[i] {
			t.Fatalf("record %d: %+v, want %+v", i, q.recs[i], want[i])
		}
	}
	if err := decodePartition(encodePartition(p), &q, 3); err == nil {
		t.Fatal("a window over the bound decoded")
	}
}

// FuzzShareRequests: any ShareFetch, ShareAcknowledge or
// ShareGroupHeartbeat body kmsg decodes is answered (with error codes)
// without a panic, and the share-partition invariants hold after it.
func FuzzShareRequests(f *testing.F) {
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.Version = 2
	g, m := "g", "A"
	fetch.GroupID, fetch.MemberID, fetch.ShareSessionEpoch = &g, &m, 1
	fetch.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: [16]byte{1}, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 3, AcknowledgeTypes: []int8{1}}}}}}}
	f.Add(int8(0), int16(2), fetch.AppendTo(nil))
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.Version = 2
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &g, &m, 1
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: [16]byte{1}, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 2, LastOffset: 1, AcknowledgeTypes: []int8{1, 2, 9}}}}}}}
	f.Add(int8(1), int16(2), ack.AppendTo(nil))
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "g", "A", []string{"t", "__int"}
	f.Add(int8(2), int16(1), hb.AppendTo(nil))
	f.Fuzz(func(t *testing.T, which int8, version int16, body []byte) {
		s := newScript(t)
		defer s.c.Close()
		s.run(t, []string{"config", "share.auto.offset.reset=earliest"})
		s.run(t, []string{"produce", "t/0", "n=5"})
		s.run(t, []string{"join", "A", "topics=t"})
		s.run(t, []string{"fetch", "A", "t/0"})
		var req kmsg.Request
		switch which % 3 {
		case 0:
			req = kmsg.NewPtrShareFetchRequest()
		case 1:
			req = kmsg.NewPtrShareAcknowledgeRequest()
		default:
			req = kmsg.NewPtrShareGroupHeartbeatRequest()
		}
		req.SetVersion(version)
		if version < 1 || version > req.MaxVersion() || req.ReadFrom(body) != nil {
			return
		}
		if fr, ok := req.(*kmsg.ShareFetchRequest); ok {
			fr.MaxWaitMillis = min(fr.MaxWaitMillis, 10)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := s.c.Handle(ctx, req); err != nil {
			t.Fatalf("handle: %v", err)
		}
		s.checkInvariants(t)
	})
}
