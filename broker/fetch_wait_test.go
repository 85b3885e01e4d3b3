package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The long poll's wake-ups. Every fetch below has a MaxWait (10 minutes)
// far beyond the raw connection's 15 s deadline, so a response can only
// have come from the data (or the lack of a need to wait), never from the
// timer: a missed wake-up fails the read. What each response holds says
// which event completed it.

const longWait = 600_000 // ms

// fetchValues returns the record values of a fetch response, per
// partition.
func fetchValues(resp *kmsg.FetchResponse) map[int32][]string {
	out := map[int32][]string{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				out[p.Partition] = append(out[p.Partition], "error")
			}
			out[p.Partition] = append(out[p.Partition], batchValues(p.RecordBatches, 0)...)
		}
	}
	return out
}

// addPartition adds partition p at offset to the request's first topic.
func addPartition(req *kmsg.FetchRequest, p int32, offset int64) {
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.LogStartOffset = p, offset, 1<<20, -1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, fp)
}

// A fetch whose partition already returned records, but fewer than
// MinBytes, is completed by more records on that same partition (with or
// without other partitions in the request), not held until MaxWait.
func TestFetchWakesWhenMinBytesReached(t *testing.T) {
	for _, withEmpty := range []bool{false, true} {
		name := "alone"
		if withEmpty {
			name = "beside-an-empty-partition"
		}
		t.Run(name, func(t *testing.T) {
			b, _ := testBroker(t)
			mustCreate(t, testCtx(t), b, "mb", 2)
			tp, _ := b.topics.get("mb")
			fc, pc := dialRaw(t, b), dialRaw(t, b)
			first := makeBatch(1, "first")
			pc.roundTrip(produceReq(9, -1, "mb", 0, first), 1)

			req := fetchReq(12, "mb", tp.id, 0, 0, longWait)
			req.MinBytes = int32(len(first)) + 1 // the first batch is not enough
			if withEmpty {
				addPartition(req, 1, 0)
			}
			fc.send(req, 1)
			waitInFlight(t, b, fc, 1)

			pc.roundTrip(produceReq(9, -1, "mb", 0, makeBatch(2, "second")), 2)
			got := fetchValues(fc.readResp(req, 1).(*kmsg.FetchResponse))
			if !slices.Equal(got[0], []string{"first", "second"}) || len(got[1]) != 0 {
				t.Fatalf("response %v, want partition 0 [first second] (completed by the second batch)", got)
			}
		})
	}
}

// A fetch with records on one partition, fewer than MinBytes, is completed
// by records arriving on another partition of the request.
func TestFetchWakesWhenAnotherPartitionCompletesMinBytes(t *testing.T) {
	b, _ := testBroker(t)
	mustCreate(t, testCtx(t), b, "mb2", 2)
	tp, _ := b.topics.get("mb2")
	fc, pc := dialRaw(t, b), dialRaw(t, b)
	first := makeBatch(1, "first")
	pc.roundTrip(produceReq(9, -1, "mb2", 0, first), 1)
	req := fetchReq(12, "mb2", tp.id, 0, 0, longWait)
	req.MinBytes = int32(len(first)) + 1
	addPartition(req, 1, 0)
	fc.send(req, 1)
	waitInFlight(t, b, fc, 1)
	pc.roundTrip(produceReq(9, -1, "mb2", 1, makeBatch(2, "other")), 2)
	got := fetchValues(fc.readResp(req, 1).(*kmsg.FetchResponse))
	if !slices.Equal(got[0], []string{"first"}) || !slices.Equal(got[1], []string{"other"}) {
		t.Fatalf("response %v, want [first] and [other]", got)
	}
}

// A fetch whose data is there is answered at once: nothing is produced
// after it is sent, so only an answer without waiting can come back.
func TestFetchAvailableDoesNotWait(t *testing.T) {
	b, _ := testBroker(t)
	mustCreate(t, testCtx(t), b, "av", 2)
	tp, _ := b.topics.get("av")
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "av", 1, makeBatch(1, "there")), 1)
	req := fetchReq(12, "av", tp.id, 0, 0, longWait) // partition 0: empty
	addPartition(req, 1, 0)
	got := fetchValues(c.roundTrip(req, 2).(*kmsg.FetchResponse))
	if !slices.Equal(got[1], []string{"there"}) {
		t.Fatalf("response %v, want partition 1 [there]", got)
	}
}

// After a rebalance a client moves its fetch session to its new
// partitions (KIP-227: forget the old, add the new, same session). The
// next fetch waits on the new partitions only: it is answered at once
// when a new partition has data, and woken by an append to a new one.
func TestFetchSessionAfterReassignment(t *testing.T) {
	b, _ := testBroker(t)
	mustCreate(t, testCtx(t), b, "rb", 3)
	tp, _ := b.topics.get("rb")
	fc, pc := dialRaw(t, b), dialRaw(t, b)
	pc.roundTrip(produceReq(9, -1, "rb", 1, makeBatch(1, "p1")), 1)

	// A session on partition 0 (empty), opened without waiting.
	open := fetchReq(12, "rb", tp.id, 0, 0, 0)
	open.SessionID, open.SessionEpoch = 0, 0
	resp := fc.roundTrip(open, 1).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID == 0 {
		t.Fatalf("session not opened: code %d id %d", resp.ErrorCode, resp.SessionID)
	}
	sid := resp.SessionID

	// Reassigned to partition 1 (data there): answered at once.
	next := fetchReq(12, "rb", tp.id, 1, 0, longWait)
	next.SessionID, next.SessionEpoch = sid, 1
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.TopicID, ft.Partitions = "rb", tp.id, []int32{0}
	next.ForgottenTopics = append(next.ForgottenTopics, ft)
	got := fetchValues(fc.roundTrip(next, 2).(*kmsg.FetchResponse))
	if !slices.Equal(got[1], []string{"p1"}) || len(got[0]) != 0 {
		t.Fatalf("after reassignment to partition 1: %v, want [p1] only", got)
	}

	// Then to partition 2 (empty) with partition 1 caught up: an append
	// to partition 2 answers it; one to the forgotten partition 0 is not
	// what it returns.
	last := fetchReq(12, "rb", tp.id, 2, 0, longWait)
	last.SessionID, last.SessionEpoch = sid, 2
	addPartition(last, 1, 1)
	fc.send(last, 3)
	waitInFlight(t, b, fc, 1)
	pc.roundTrip(produceReq(9, -1, "rb", 0, makeBatch(2, "forgotten")), 2)
	pc.roundTrip(produceReq(9, -1, "rb", 2, makeBatch(3, "p2")), 3)
	got = fetchValues(fc.readResp(last, 3).(*kmsg.FetchResponse))
	if !slices.Equal(got[2], []string{"p2"}) || len(got[0]) != 0 {
		t.Fatalf("after reassignment to partition 2: %v, want [p2] and nothing of partition 0", got)
	}
}
