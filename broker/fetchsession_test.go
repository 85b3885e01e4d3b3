package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFetchSessionsIncremental(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "s", 2)
	tp, _ := b.topics.get("s")
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "s", 0, makeBatch(1, "p0-a")), 1)

	// Full fetch opening a session (epoch 0), both partitions.
	req := fetchReq(13, "", tp.id, 0, 0, 0)
	req.SessionEpoch = 0
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, fp)
	resp := c.roundTrip(req, 2).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID == 0 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("open session: %+v", resp)
	}
	sid := resp.SessionID

	incr := func(epoch int32, topics []kmsg.FetchRequestTopic, forget []kmsg.FetchRequestForgottenTopic, corr int32) *kmsg.FetchResponse {
		r := kmsg.NewPtrFetchRequest()
		r.Version = 13
		r.MaxBytes = 1 << 20
		r.SessionID, r.SessionEpoch = sid, epoch
		r.Topics, r.ForgottenTopics = topics, forget
		return c.roundTrip(r, corr).(*kmsg.FetchResponse)
	}
	parts := func(r *kmsg.FetchResponse) (ps []int32) {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, p.Partition)
			}
		}
		return ps
	}
	// Nothing changed: an empty incremental response. The client moves
	// partition 0 to offset 1 (it read p0-a).
	moved := kmsg.NewFetchRequestTopic()
	moved.TopicID = tp.id
	mp := kmsg.NewFetchRequestTopicPartition()
	mp.Partition, mp.FetchOffset, mp.PartitionMaxBytes = 0, 1, 1<<20
	moved.Partitions = []kmsg.FetchRequestTopicPartition{mp}
	r := incr(1, []kmsg.FetchRequestTopic{moved}, nil, 3)
	if r.ErrorCode != 0 || len(parts(r)) != 0 {
		t.Fatalf("unchanged: %+v", r)
	}
	// Data on partition 1 only: only partition 1 is answered.
	c.roundTrip(produceReq(9, -1, "s", 1, makeBatch(1, "p1-a")), 4)
	r = incr(2, nil, nil, 5)
	if got := parts(r); !slices.Equal(got, []int32{1}) {
		t.Fatalf("after produce to 1: partitions %v", got)
	}
	if v := batchValues(r.Topics[0].Partitions[0].RecordBatches, 0); !slices.Equal(v, []string{"p1-a"}) {
		t.Fatalf("values %v", v)
	}
	// The session still fetches partition 1 at offset 0 (the client did
	// not move it), so it answers again with the same data.
	r = incr(3, nil, nil, 6)
	if got := parts(r); !slices.Equal(got, []int32{1}) {
		t.Fatalf("repeat: %v", got)
	}
	// Forget partition 1; produce there: nothing answered.
	r = incr(4, nil, []kmsg.FetchRequestForgottenTopic{{TopicID: tp.id, Partitions: []int32{1}}}, 7)
	if got := parts(r); len(got) != 0 {
		t.Fatalf("after forget: %v", got)
	}
	// Wrong epoch, unknown session.
	if r = incr(9, nil, nil, 8); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("bad epoch: %d", r.ErrorCode)
	}
	sid = 12345
	if r = incr(1, nil, nil, 9); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %d", r.ErrorCode)
	}
}

func TestFetchSessionEviction(t *testing.T) {
	fs := newFetchSessions(2)
	now := testNow()
	a := fs.open(now)
	b := fs.open(now.Add(1))
	if _, err := fs.next(a.id, 1, now.Add(2)); err != nil { // a is now the most recent
		t.Fatal(err)
	}
	c := fs.open(now.Add(3))
	if _, err := fs.next(b.id, 1, now.Add(4)); err != kerr.FetchSessionIDNotFound {
		t.Fatalf("b not evicted: %v", err)
	}
	if _, err := fs.next(a.id, 2, now.Add(4)); err != nil {
		t.Fatalf("a evicted: %v", err)
	}
	if fs.count() != 2 || c.id == a.id {
		t.Fatalf("count %d", fs.count())
	}
}
