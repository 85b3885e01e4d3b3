package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/txn"
)

// The log's idempotence checks surface as Kafka's codes; a duplicate is
// answered with the original offsets.
func TestIdempotentProduce(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "idem", 1)
	c := dialRaw(t, b)
	send := func(corr int32, batch []byte) kmsg.ProduceResponseTopicPartition {
		return c.roundTrip(produceReq(9, -1, "idem", 0, batch), corr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	if p := send(1, makeProducerBatch(42, 0, 0, false, 1, "a", "b")); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first: %+v", p)
	}
	if p := send(2, makeProducerBatch(42, 0, 2, false, 1, "c")); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("second: %+v", p)
	}
	if p := send(3, makeProducerBatch(42, 0, 0, false, 1, "a", "b")); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("duplicate: %+v", p)
	}
	if p := send(4, makeProducerBatch(42, 0, 9, false, 1, "gap")); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %+v", p)
	}
	if p := send(5, makeProducerBatch(42, 1, 0, false, 1, "bumped")); p.ErrorCode != 0 {
		t.Fatalf("epoch bump: %+v", p)
	}
	if p := send(6, makeProducerBatch(42, 0, 3, false, 1, "zombie")); p.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced epoch: %+v", p)
	}
	// Clients cannot write control batches.
	if p := send(7, txn.MarkerBatch(42, 1, true, 0, 1)); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("client marker: %+v", p)
	}
	tp, _ := b.topics.get("idem")
	if hw := tp.parts[0].HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d, want 4 (a b c bumped)", hw)
	}
}

// read_committed fetches stop at the last stable offset and carry the
// aborted transactions; ListOffsets latest follows the isolation level.
func TestReadCommitted(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "rc", 1)
	tp, _ := b.topics.get("rc")
	l := tp.parts[0]
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "rc", 0, makeBatch(1, "plain")), 1)                           // 0
	c.roundTrip(produceReq(9, -1, "rc", 0, makeProducerBatch(7, 0, 0, true, 1, "t1", "t2")), 2) // 1-2, open txn

	fetch := func(corr int32, isolation int8) kmsg.FetchResponseTopicPartition {
		req := fetchReq(12, "rc", tp.id, 0, 0, 0)
		req.IsolationLevel = isolation
		return c.roundTrip(req, corr).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	p := fetch(3, 1)
	if p.LastStableOffset != 1 || p.HighWatermark != 3 || !slices.Equal(batchValues(p.RecordBatches, 0), []string{"plain"}) {
		t.Fatalf("read_committed with an open txn: lso %d hw %d values %v", p.LastStableOffset, p.HighWatermark, batchValues(p.RecordBatches, 0))
	}
	if p := fetch(4, 0); len(batchValues(p.RecordBatches, 0)) != 3 || p.LastStableOffset != 1 {
		t.Fatalf("read_uncommitted: %v lso %d", batchValues(p.RecordBatches, 0), p.LastStableOffset)
	}
	lo := func(corr int32, isolation int8) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.IsolationLevel = 4, isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "rc"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req, corr).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
	}
	if u, cm := lo(5, 0), lo(6, 1); u != 3 || cm != 1 {
		t.Fatalf("latest: uncommitted %d committed %d", u, cm)
	}
	// Abort: the marker (as the transaction coordinator writes it) makes
	// the range stable and lists the aborted transaction.
	if _, err := l.Append(txn.MarkerBatch(7, 0, false, 0, 1), true); err != nil {
		t.Fatal(err)
	}
	p = fetch(7, 1)
	if p.LastStableOffset != 4 || len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 7 || p.AbortedTransactions[0].FirstOffset != 1 {
		t.Fatalf("after abort: lso %d aborted %+v", p.LastStableOffset, p.AbortedTransactions)
	}
}

// A read_committed long poll waiting at the LSO wakes when the transaction
// commits.
func TestReadCommittedWakesOnCommit(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "rcw", 1)
	tp, _ := b.topics.get("rcw")
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "rcw", 0, makeProducerBatch(8, 0, 0, true, 1, "x")), 1)
	req := fetchReq(12, "rcw", tp.id, 0, 0, 60_000)
	req.IsolationLevel = 1
	c.send(req, 2)
	waitInFlight(t, b, c, 1)
	if _, err := tp.parts[0].Append(txn.MarkerBatch(8, 0, true, 0, 1), true); err != nil {
		t.Fatal(err)
	}
	p := c.readResp(req, 2).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	// The LSO is 1 or 2: the commit marker (offset 1) may not be synced yet
	// when the committed record becomes readable.
	if !slices.Equal(batchValues(p.RecordBatches, 0), []string{"x"}) || p.LastStableOffset < 1 {
		t.Fatalf("woke with %v lso %d", batchValues(p.RecordBatches, 0), p.LastStableOffset)
	}
}

func TestDescribeProducers(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "dp", 1)
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "dp", 0, makeProducerBatch(11, 2, 0, true, 1000, "a", "b")), 1)
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "dp", []int32{0, 5}
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req, 2).(*kmsg.DescribeProducersResponse)
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partitions %+v", ps)
	}
	if len(ps[0].ActiveProducers) != 1 {
		t.Fatalf("producers %+v", ps[0].ActiveProducers)
	}
	ap := ps[0].ActiveProducers[0]
	if ap.ProducerID != 11 || ap.ProducerEpoch != 2 || ap.LastSequence != 1 || ap.CurrentTxnStartOffset != 0 {
		t.Fatalf("producer %+v", ap)
	}
}
