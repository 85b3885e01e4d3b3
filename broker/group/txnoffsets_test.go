package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func txnCommitReq(group string, pid int64, epoch int16, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = 3
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "tx", group, pid, epoch
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		pp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset = p, o
		t.Partitions = append(t.Partitions, pp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

func (h *harness) txnCommit(req *kmsg.TxnOffsetCommitRequest) int16 {
	h.t.Helper()
	r, err := h.c.TxnOffsetCommit(h.ctx(), req)
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// stableFetch is OffsetFetch v8 with RequireStable of one partition.
func (h *harness) stableFetch(group, topic string, p int32) (int64, int16) {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.RequireStable = true
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{p}}}}}
	r := h.handle(req).(*kmsg.OffsetFetchResponse)
	rp := r.Groups[0].Topics[0].Partitions[0]
	return rp.Offset, rp.ErrorCode
}

func TestTxnOffsetCommitAndMarkers(t *testing.T) {
	h := newHarness(t)
	h.commit(commitReq("g", "", -1, "t", map[int32]int64{0: 5}))
	wantCode(t, "txn commit", h.txnCommit(txnCommitReq("g", 7, 1, "t", map[int32]int64{0: 10})), nil)
	// Not visible; RequireStable says unstable.
	if got := h.fetched("g")["g"][tp{"t", 0}]; got != 5 {
		t.Fatalf("staged offset visible: %d", got)
	}
	if _, code := h.stableFetch("g", "t", 0); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require stable: %v", kerr.ErrorForCode(code))
	}
	if _, code := h.stableFetch("g", "t", 1); code != 0 {
		t.Fatalf("other partition: %v", kerr.ErrorForCode(code))
	}
	// Restart before the marker: still staged (replayed from the
	// transactional batch).
	h.restart(h.st.crash())
	if _, code := h.stableFetch("g", "t", 0); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after restart: %v", kerr.ErrorForCode(code))
	}
	if err := h.c.WriteMarker(h.ctx(), 7, 1, true, 0); err != nil {
		t.Fatal(err)
	}
	if off, code := h.stableFetch("g", "t", 0); code != 0 || off != 10 {
		t.Fatalf("after commit marker: %d %v", off, kerr.ErrorForCode(code))
	}
	// Idempotent: a second marker writes nothing.
	hw := h.st.highWatermark()
	if err := h.c.WriteMarker(h.ctx(), 7, 1, true, 0); err != nil || h.st.highWatermark() != hw {
		t.Fatalf("repeated marker: %v, log grew %d", err, h.st.highWatermark()-hw)
	}
	// Abort drops.
	h.txnCommit(txnCommitReq("g", 8, 0, "t", map[int32]int64{0: 20}))
	if err := h.c.WriteMarker(h.ctx(), 8, 0, false, 0); err != nil {
		t.Fatal(err)
	}
	if off, code := h.stableFetch("g", "t", 0); code != 0 || off != 10 {
		t.Fatalf("after abort: %d %v", off, kerr.ErrorForCode(code))
	}
	// A commit written after the staged offset wins when the txn commits.
	h.txnCommit(txnCommitReq("g", 9, 0, "t", map[int32]int64{1: 30}))
	h.commit(commitReq("g", "", -1, "t", map[int32]int64{1: 31}))
	h.c.WriteMarker(h.ctx(), 9, 0, true, 0)
	if off, _ := h.stableFetch("g", "t", 1); off != 31 {
		t.Fatalf("later commit lost to the transaction: %d", off)
	}
	// The same after a replay of everything.
	h.restart(h.st.crash())
	got := h.fetched("g")["g"]
	if got[tp{"t", 0}] != 10 || got[tp{"t", 1}] != 31 {
		t.Fatalf("after replay: %v", got)
	}
}

func TestTxnOffsetCommitValidation(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 1)
	req := txnCommitReq("g", 1, 0, "t", map[int32]int64{0: 1})
	req.Generation, req.MemberID = gen+1, ids[0]
	wantCode(t, "bad generation", h.txnCommit(req), kerr.IllegalGeneration)
	req.Generation, req.MemberID = gen, "ghost"
	wantCode(t, "unknown member", h.txnCommit(req), kerr.UnknownMemberID)
	req.MemberID = ids[0]
	wantCode(t, "member", h.txnCommit(req), nil)
	old := txnCommitReq("g", 2, 0, "t", map[int32]int64{0: 1})
	old.Version = 2 // no member information: not checked
	wantCode(t, "v2", h.txnCommit(old), nil)
	wantCode(t, "unknown topic", h.txnCommit(txnCommitReq("g", 3, 0, "nope", map[int32]int64{0: 1})), kerr.UnknownTopicOrPartition)
	wantCode(t, "empty group", h.txnCommit(txnCommitReq("", 3, 0, "t", map[int32]int64{0: 1})), kerr.InvalidGroupID)
}

// A marker racing with the staging write of the same producer is ordered
// after it (the writer keeps queue order), so the offset commits.
func TestTxnMarkerAfterInflightStage(t *testing.T) {
	h := newHarness(t)
	h.st.block = make(chan struct{})
	done := make(chan int16, 1)
	go func() { done <- h.txnCommit(txnCommitReq("g", 5, 0, "t", map[int32]int64{2: 42})) }()
	var queued bool
	for range 1000 {
		_ = h.c.do(h.ctx(), func() { queued = h.c.txns[5] != nil })
		if queued {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !queued {
		t.Fatal("staging never queued")
	}
	mdone := make(chan error, 1)
	go func() { mdone <- h.c.WriteMarker(h.ctx(), 5, 0, true, 0) }()
	close(h.st.block)
	if code := <-done; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if err := <-mdone; err != nil {
		t.Fatal(err)
	}
	h.st.block = nil
	if off, code := h.stableFetch("g", "t", 2); code != 0 || off != 42 {
		t.Fatalf("offset %d %v", off, kerr.ErrorForCode(code))
	}
}
