package txn

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecodeRecord: any key/value decodes to a record or a typed error,
// never a panic; a decoded transaction record re-encodes to a value that
// decodes to the same state.
func FuzzDecodeRecord(f *testing.F) {
	d := txnData{producerID: 7, prevProducerID: -1, nextProducerID: -1, epoch: 3, timeoutMs: 60000,
		state: stateOngoing, parts: map[TopicPartition]struct{}{{"a", 0}: {}, {"a", 2}: {}, {"b", 1}: {}},
		startMs: 1000, updateMs: 2000, tv: 2}
	f.Add(txnKey("t"), txnValue(&d))
	f.Add(txnKey("t"), []byte(nil))
	f.Add(pidBlockKey(), pidBlockValue(1000))
	f.Add([]byte{0x7f, 0xfe}, []byte{1, 2, 3})
	f.Add([]byte{0}, []byte{})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		rec, ok, err := decodeRecord(key, value)
		if err != nil || !ok || rec.pidBlockEnd > 0 || rec.tombstone {
			return
		}
		again, ok, err := decodeRecord(key, txnValue(&rec.data))
		if err != nil || !ok {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		if again.data.producerID != rec.data.producerID || again.data.epoch != rec.data.epoch ||
			again.data.state != rec.data.state || len(again.data.parts) != len(rec.data.parts) {
			t.Fatalf("round trip changed the state: %+v vs %+v", again.data, rec.data)
		}
	})
}

// FuzzForEachRecord: arbitrary bytes as state log data never panic, and
// the records of a valid batch come back in order.
func FuzzForEachRecord(f *testing.F) {
	d := txnData{producerID: 1, epoch: 0, state: stateEmpty, parts: map[TopicPartition]struct{}{}, startMs: -1}
	valid := buildBatch([]kv{{Key: txnKey("x"), Value: txnValue(&d)}, {Key: pidBlockKey(), Value: pidBlockValue(10)}}, 5)
	f.Add(valid)
	f.Add(append(append([]byte(nil), valid...), valid[:20]...))
	f.Add(valid[:30])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var keys [][]byte
		_, consumed, err := forEachRecord(data, func(_ int64, k, _ []byte) error {
			keys = append(keys, k)
			return nil
		})
		if consumed > len(data) {
			t.Fatalf("consumed %d of %d", consumed, len(data))
		}
		if err == nil && bytes.Equal(data, valid) && len(keys) != 2 {
			t.Fatalf("valid batch gave %d records", len(keys))
		}
	})
}

func TestBuildBatchRoundTrip(t *testing.T) {
	d := txnData{producerID: 9, prevProducerID: 4, nextProducerID: -1, epoch: 2, timeoutMs: 5000,
		state: statePrepareCommit, parts: map[TopicPartition]struct{}{{"z", 3}: {}, {"a", 1}: {}},
		startMs: 11, updateMs: 12, tv: 2}
	b := buildBatch([]kv{{Key: txnKey("id"), Value: txnValue(&d)}, {Key: txnKey("gone"), Value: nil}, {Key: pidBlockKey(), Value: pidBlockValue(77)}}, 99)
	var recs []stateRecord
	next, consumed, err := forEachRecord(b, func(off int64, k, v []byte) error {
		rec, ok, err := decodeRecord(k, v)
		if err != nil || !ok {
			t.Fatalf("record at %d: ok=%v err=%v", off, ok, err)
		}
		recs = append(recs, rec)
		return nil
	})
	if err != nil || consumed != len(b) || next != 3 {
		t.Fatalf("next %d consumed %d/%d err %v", next, consumed, len(b), err)
	}
	if len(recs) != 3 || recs[0].txnID != "id" || !recs[1].tombstone || recs[2].pidBlockEnd != 77 {
		t.Fatalf("records %+v", recs)
	}
	got := recs[0].data
	if got.producerID != 9 || got.prevProducerID != 4 || got.epoch != 2 || got.timeoutMs != 5000 ||
		got.state != statePrepareCommit || len(got.parts) != 2 || got.startMs != 11 || got.updateMs != 12 || got.tv != 2 ||
		got.lastEpoch != -1 {
		t.Fatalf("decoded %+v", got)
	}
	// A flipped byte is caught by the CRC.
	bad := append([]byte(nil), b...)
	bad[len(bad)-1] ^= 0xff
	if _, _, err := forEachRecord(bad, func(int64, []byte, []byte) error { return nil }); err == nil {
		t.Fatal("corrupt batch accepted")
	}
}

func TestReplayRejectsCorruptState(t *testing.T) {
	s := &memState{}
	// A transaction record with an invalid state value.
	d := txnData{producerID: 1, state: txnState(42), parts: map[TopicPartition]struct{}{}}
	if _, err := s.Append(buildBatch([]kv{{Key: txnKey("x"), Value: txnValue(&d)}}, 0), true); err != nil {
		t.Fatal(err)
	}
	_, err := NewCoordinator(Options{State: s, Partitions: newFakeParts()})
	if err == nil {
		t.Fatal("corrupt state accepted")
	}
	// An unknown key version (a later weir's record) is skipped.
	s2 := &memState{}
	if _, err := s2.Append(buildBatch([]kv{{Key: []byte{0x10, 0}, Value: []byte("future")}}, 0), true); err != nil {
		t.Fatal(err)
	}
	c, err := NewCoordinator(Options{State: s2, Partitions: newFakeParts()})
	if err != nil {
		t.Fatalf("unknown key version: %v", err)
	}
	c.Close()
}

// FuzzHandle: any decodable request of a key the coordinator serves is
// answered (or refused with an error), never a panic, and the coordinator
// keeps serving afterwards.
func FuzzHandle(f *testing.F) {
	seed := func(r kmsg.Request) {
		f.Add(byte(r.Key()), r.GetVersion(), r.AppendTo(nil))
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 4
	ip.TransactionalID = kmsg.StringPtr("f")
	ip.TransactionTimeoutMillis = 1000
	seed(ip)
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version = 3
	ap.TransactionalID = "f"
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0, -1}}}
	seed(ap)
	ap4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap4.Version = 4
	ap4.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "f", VerifyOnly: true}}
	seed(ap4)
	et := kmsg.NewPtrEndTxnRequest()
	et.Version = 5
	et.TransactionalID = "f"
	seed(et)
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version = 2
	lt.TransactionalIDPattern = kmsg.StringPtr("[")
	seed(lt)
	seed(kmsg.NewPtrDescribeTransactionsRequest())
	seed(kmsg.NewPtrTxnOffsetCommitRequest())
	seed(kmsg.NewPtrAddOffsetsToTxnRequest())
	seed(kmsg.NewPtrWriteTxnMarkersRequest())
	seed(kmsg.NewPtrFindCoordinatorRequest())

	e := newEnv(&testing.T{})
	f.Cleanup(func() { e.c.Close() })
	f.Fuzz(func(t *testing.T, key byte, version int16, body []byte) {
		req := kmsg.RequestForKey(int16(key))
		if req == nil {
			return
		}
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := e.c.Handle(ctx, req)
		if err == nil && resp == nil {
			t.Fatalf("nil response without error for key %d", key)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("request key %d v%d hung", key, version)
		}
		// Still serving.
		ping := kmsg.NewPtrListTransactionsRequest()
		if _, err := e.c.Handle(ctx, ping); err != nil {
			t.Fatalf("coordinator stopped serving: %v", err)
		}
	})
}

// FuzzReplayState: whatever (decodable) state a transactional id has in
// the log, the coordinator starts, serves requests for it without
// panicking, never hands out a negative producer id, and completes a
// prepared transaction.
func FuzzReplayState(f *testing.F) {
	f.Add(int64(5), int64(-1), int64(-1), int16(3), int8(1), int32(60000), int64(0), int16(0))
	f.Add(int64(math.MaxInt64), int64(-1), int64(math.MaxInt64), int16(32767), int8(2), int32(1), int64(-5), int16(2))
	f.Add(int64(-1), int64(7), int64(9), int16(-1), int8(4), int32(-1), int64(1), int16(9))
	f.Fuzz(func(t *testing.T, pid, prev, next int64, epoch int16, state int8, timeout int32, start int64, tv int16) {
		st := txnState(state)
		if !st.valid() {
			return
		}
		s := &memState{}
		d := txnData{producerID: pid, prevProducerID: prev, nextProducerID: next, epoch: epoch, timeoutMs: timeout,
			state: st, parts: map[TopicPartition]struct{}{tpA: {}}, startMs: start, tv: tv}
		if _, err := s.Append(buildBatch([]kv{{Key: txnKey("z"), Value: txnValue(&d)}}, 0), true); err != nil {
			t.Fatal(err)
		}
		clk := newClock()
		c, err := NewCoordinator(Options{State: s, Partitions: newFakeParts(tpA), Offsets: &fakeOffsets{}, Now: clk.Now, EndTxnCompletionWait: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ip := kmsg.NewPtrInitProducerIDRequest()
		if resp, err := c.Handle(ctx, ip); err != nil {
			t.Fatal(err)
		} else if r := resp.(*kmsg.InitProducerIDResponse); r.ErrorCode == 0 && r.ProducerID < 0 {
			t.Fatalf("negative producer id %d", r.ProducerID)
		}
		for _, req := range []kmsg.Request{
			&kmsg.InitProducerIDRequest{Version: 4, TransactionalID: kmsg.StringPtr("z"), TransactionTimeoutMillis: 1000, ProducerID: pid, ProducerEpoch: epoch},
			&kmsg.EndTxnRequest{Version: 5, TransactionalID: "z", ProducerID: pid, ProducerEpoch: epoch, Commit: true},
			&kmsg.EndTxnRequest{Version: 3, TransactionalID: "z", ProducerID: pid, ProducerEpoch: epoch},
			&kmsg.AddPartitionsToTxnRequest{Version: 3, TransactionalID: "z", ProducerID: pid, ProducerEpoch: epoch,
				Topics: []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0}}}},
		} {
			if _, err := c.Handle(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Hour)
		c.Tick()
		_, release, err := c.Verify(ctx, "z", pid, epoch, []TopicPartition{tpA}, true)
		if err != nil {
			t.Fatal(err)
		}
		release()
	})
}
