package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/txn"
)

// beginTxn runs InitProducerId and AddPartitionsToTxn for txnID over c and
// returns the producer id and epoch.
func beginTxn(t *testing.T, c *rawConn, txnID, topic string, partitions ...int32) (int64, int16) {
	t.Helper()
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 3
	ip.TransactionalID = kmsg.StringPtr(txnID)
	ip.TransactionTimeoutMillis = 60000
	ir := c.roundTrip(ip, 900).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("init producer id: %d", ir.ErrorCode)
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version = 3
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = txnID, ir.ProducerID, ir.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, partitions
	ap.Topics = append(ap.Topics, at)
	ar := c.roundTrip(ap, 901).(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range ar.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("add partitions to txn: %d", rp.ErrorCode)
			}
		}
	}
	return ir.ProducerID, ir.ProducerEpoch
}

// endTxn commits or aborts; the response comes once the markers are written.
func endTxn(t *testing.T, c *rawConn, txnID string, pid int64, epoch int16, commit bool) {
	t.Helper()
	et := kmsg.NewPtrEndTxnRequest()
	et.Version = 3
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = txnID, pid, epoch, commit
	if r := c.roundTrip(et, 902).(*kmsg.EndTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("end txn: %d", r.ErrorCode)
	}
}

func txnProduce(txnID string, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := produceReq(9, -1, topic, partition, batch)
	req.TransactionID = kmsg.StringPtr(txnID)
	return req
}

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
	// A transactional batch needs the request's transactional id, and its
	// partition in the producer's transaction.
	if p := send(8, makeProducerBatch(43, 0, 0, true, 1, "t")); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("transactional batch without transactional id: %+v", p)
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
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "rc", 0, makeBatch(1, "plain")), 1) // offset 0
	pid, epoch := beginTxn(t, c, "rc-tx", "rc", 0)
	// Offsets 1-2, in the open transaction.
	if p := c.roundTrip(txnProduce("rc-tx", "rc", 0, makeProducerBatch(pid, epoch, 0, true, 1, "t1", "t2")), 2).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("transactional produce: %d", p.ErrorCode)
	}

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
	// Abort: the coordinator's marker makes the range stable and lists
	// the aborted transaction.
	endTxn(t, c, "rc-tx", pid, epoch, false)
	p = fetch(7, 1)
	if p.LastStableOffset != 4 || len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != pid || p.AbortedTransactions[0].FirstOffset != 1 {
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
	pid, epoch := beginTxn(t, c, "rcw-tx", "rcw", 0)
	c.roundTrip(txnProduce("rcw-tx", "rcw", 0, makeProducerBatch(pid, epoch, 0, true, 1, "x")), 1)
	fc := dialRaw(t, b)
	req := fetchReq(12, "rcw", tp.id, 0, 0, 60_000)
	req.IsolationLevel = 1
	fc.send(req, 2)
	waitInFlight(t, b, fc, 1)
	endTxn(t, c, "rcw-tx", pid, epoch, true)
	p := fc.readResp(req, 2).(*kmsg.FetchResponse).Topics[0].Partitions[0]
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
	pid, epoch := beginTxn(t, c, "dp-tx", "dp", 0)
	c.roundTrip(txnProduce("dp-tx", "dp", 0, makeProducerBatch(pid, epoch, 0, true, 1000, "a", "b")), 1)
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
	if ap.ProducerID != pid || ap.ProducerEpoch != int32(epoch) || ap.LastSequence != 1 || ap.CurrentTxnStartOffset != 0 {
		t.Fatalf("producer %+v", ap)
	}
}

// End to end with franz-go: a committed and an aborted transaction; a
// read_committed consumer sees exactly the committed records.
func TestTransactionsFranzGo(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "tx", 2)
	p := newClient(t, b, kgo.TransactionalID("weir-tx"), kgo.DefaultProduceTopic("tx"))
	for round, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			v := fmt.Sprintf("r%d-%d", round, i)
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", round, err)
		}
	}
	c := newClient(t, b, kgo.ConsumeTopics("tx"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 10 {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out with %v", got)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("%s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	want := []string{"r0-0", "r0-1", "r0-2", "r0-3", "r0-4", "r2-0", "r2-1", "r2-2", "r2-3", "r2-4"}
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v", got)
	}
	// Nothing more arrives (the aborted records stay invisible).
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if fs := c.PollFetches(short); fs.NumRecords() != 0 {
		t.Fatalf("extra records: %d", fs.NumRecords())
	}
}
