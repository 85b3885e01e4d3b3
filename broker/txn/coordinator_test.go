package txn

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestIdempotentProducerIDsNeverRepeat(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ProducerIDBlockSize = 3 })
	seen := map[int64]bool{}
	for i := 0; i < 5; i++ {
		r := e.initPID(nil, 0, -1, -1, 4)
		wantCode(t, "init", r.ErrorCode, nil)
		if r.ProducerEpoch != 0 || seen[r.ProducerID] {
			t.Fatalf("pid %d epoch %d (seen %v)", r.ProducerID, r.ProducerEpoch, seen)
		}
		seen[r.ProducerID] = true
	}
	// KIP-360 re-init of an idempotent producer gets a fresh id too.
	r := e.initPID(nil, 0, 1, 0, 4)
	if seen[r.ProducerID] {
		t.Fatalf("re-init reused pid %d", r.ProducerID)
	}
	seen[r.ProducerID] = true
	e.restart()
	for i := 0; i < 4; i++ {
		r := e.initPID(nil, 0, -1, -1, 4)
		if seen[r.ProducerID] {
			t.Fatalf("after restart pid %d repeated", r.ProducerID)
		}
		seen[r.ProducerID] = true
	}
}

func TestInitProducerIDErrors(t *testing.T) {
	e := newEnv(t)
	wantCode(t, "empty id", e.initPID(strp(""), 1000, -1, -1, 4).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "zero timeout", e.initPID(strp("x"), 0, -1, -1, 4).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "timeout above max", e.initPID(strp("x"), int32((15*time.Minute).Milliseconds())+1, -1, -1, 4).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "max timeout", e.initPID(strp("x"), int32((15*time.Minute).Milliseconds()), -1, -1, 4).ErrorCode, nil)
	// KIP-360 with an unknown producer id for an existing transactional id.
	wantCode(t, "wrong pid", e.initPID(strp("x"), 1000, 999999, 0, 4).ErrorCode, kerr.ProducerFenced)
}

func TestInitBumpsEpochAndFences(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	if ep != 0 {
		t.Fatalf("first epoch %d", ep)
	}
	pid2, ep2 := e.mustInit("t", 60000)
	if pid2 != pid || ep2 != 1 {
		t.Fatalf("second init: %d/%d, want %d/1", pid2, ep2, pid)
	}
	// The old epoch is fenced on every coordinator API.
	codes := e.addParts("t", pid, 0, tpA)
	wantCode(t, "add with old epoch", codes[0], kerr.ProducerFenced)
	wantCode(t, "add offsets with old epoch", e.addOffsets("t", pid, 0, "g"), kerr.ProducerFenced)
	wantCode(t, "end with old epoch", e.endTxn("t", pid, 0, true, 3).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "end with other pid", e.endTxn("t", pid+1, 1, true, 3).ErrorCode, kerr.InvalidProducerIDMapping)
	wantCode(t, "end unknown id", e.endTxn("nope", pid, 1, true, 3).ErrorCode, kerr.InvalidProducerIDMapping)
	wantCode(t, "add unknown id", e.addParts("nope", pid, 1, tpA)[0], kerr.InvalidProducerIDMapping)
	wantCode(t, "add other pid", e.addParts("t", pid+1, 1, tpA)[0], kerr.InvalidProducerIDMapping)
	// KIP-360: re-init with the current pid/epoch bumps; a stale epoch that is
	// neither current nor last is fenced.
	r := e.initPID(strp("t"), 60000, pid, 1, 4)
	wantCode(t, "kip-360 re-init", r.ErrorCode, nil)
	if r.ProducerEpoch != 2 {
		t.Fatalf("kip-360 epoch %d, want 2", r.ProducerEpoch)
	}
	// A retry of that re-init (response lost) returns the same epoch.
	r = e.initPID(strp("t"), 60000, pid, 1, 4)
	wantCode(t, "kip-360 retry", r.ErrorCode, nil)
	if r.ProducerEpoch != 2 {
		t.Fatalf("kip-360 retry epoch %d, want 2", r.ProducerEpoch)
	}
	wantCode(t, "stale epoch re-init", e.initPID(strp("t"), 60000, pid, 0, 4).ErrorCode, kerr.ProducerFenced)
}

func TestCommitTV1(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	wantCode(t, "end with no txn", e.endTxn("t", pid, ep, true, 3).ErrorCode, kerr.InvalidTxnState)
	// An unknown partition fails the whole request, adding nothing.
	codes := e.addParts("t", pid, ep, tpA, TopicPartition{"missing", 0})
	if codes[0] != kerr.OperationNotAttempted.Code || codes[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("codes %v", codes)
	}
	if st := e.describe("t"); st.State != "Empty" {
		t.Fatalf("state %s after failed add", st.State)
	}
	e.mustAdd("t", pid, ep, tpA)
	st := e.describe("t")
	if st.State != "Ongoing" || st.StartTimestamp != e.clock.Now().UnixMilli() || st.TimeoutMillis != 60000 {
		t.Fatalf("describe %+v", st)
	}
	e.clock.Advance(time.Second)
	e.mustAdd("t", pid, ep, tpA, tpB) // tpA again is fine
	wantCode(t, "add offsets", e.addOffsets("t", pid, ep, "g"), nil)
	wantCode(t, "txn offset commit", e.txnCommit("t", pid, ep, "g", 3), nil)
	st = e.describe("t")
	if st.StartTimestamp != e.clock.Now().Add(-time.Second).UnixMilli() || len(st.Topics) != 3 {
		t.Fatalf("describe %+v", st)
	}
	r := e.endTxn("t", pid, ep, true, 3)
	wantCode(t, "commit", r.ErrorCode, nil)
	e.waitState("t", "CompleteCommit")
	got := e.parts.all()
	slices.SortFunc(got, func(a, b marker) int { return int(a.tp.Partition) - int(b.tp.Partition) })
	want := []marker{{tpA, pid, ep, true}, {tpB, pid, ep, true}}
	if !slices.Equal(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}
	if om := e.offs.allMarkers(); len(om) != 1 || om[0].pid != pid || !om[0].commit {
		t.Fatalf("offsets markers %v", om)
	}
	if len(e.describe("t").Topics) != 0 {
		t.Fatalf("partitions kept after completion")
	}
	// Retries.
	wantCode(t, "commit retry", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	wantCode(t, "abort after commit", e.endTxn("t", pid, ep, false, 3).ErrorCode, kerr.InvalidTxnState)
	// The same epoch starts the next transaction (TV1 keeps the epoch).
	e.mustAdd("t", pid, ep, tpC)
	wantCode(t, "abort", e.endTxn("t", pid, ep, false, 3).ErrorCode, nil)
	e.waitState("t", "CompleteAbort")
	wantCode(t, "abort retry", e.endTxn("t", pid, ep, false, 3).ErrorCode, nil)
	wantCode(t, "commit after abort", e.endTxn("t", pid, ep, true, 3).ErrorCode, kerr.InvalidTxnState)
	last := e.parts.all()[len(e.parts.all())-1]
	if last != (marker{tpC, pid, ep, false}) {
		t.Fatalf("abort marker %v", last)
	}
}

func TestConcurrentTransactionsWhileCompleting(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	e.mustAdd("t", pid, ep, tpA, tpB)
	open := e.parts.gate(tpB)
	defer open()
	wantCode(t, "commit", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	<-e.parts.written // tpA's marker
	if st := e.describe("t"); st.State != "PrepareCommit" {
		t.Fatalf("state %s", st.State)
	}
	wantCode(t, "add while completing", e.addParts("t", pid, ep, tpC)[0], kerr.ConcurrentTransactions)
	wantCode(t, "add offsets while completing", e.addOffsets("t", pid, ep, "g"), kerr.ConcurrentTransactions)
	wantCode(t, "commit retry while completing", e.endTxn("t", pid, ep, true, 3).ErrorCode, kerr.ConcurrentTransactions)
	wantCode(t, "abort while committing", e.endTxn("t", pid, ep, false, 3).ErrorCode, kerr.InvalidTxnState)
	wantCode(t, "init while completing", e.initPID(strp("t"), 60000, -1, -1, 4).ErrorCode, kerr.ConcurrentTransactions)
	wantCode(t, "txn offset commit while completing", e.txnCommit("t", pid, ep, "g", 3), kerr.ConcurrentTransactions)
	codes, release := e.verify("t", pid, ep, false, tpA)
	release()
	wantCode(t, "produce while completing", codes[0], kerr.NotEnoughReplicas)
	open()
	e.waitState("t", "CompleteCommit")
	e.mustAdd("t", pid, ep, tpC)
}

func TestFencingByNewProducer(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	e.mustAdd("t", pid, ep, tpA)
	// A second instance with the same transactional id: the ongoing
	// transaction is aborted with a bumped epoch, and it is told to retry.
	wantCode(t, "fencing init", e.initPID(strp("t"), 60000, -1, -1, 4).ErrorCode, kerr.ConcurrentTransactions)
	e.waitState("t", "CompleteAbort")
	if m := e.parts.all(); len(m) != 1 || m[0] != (marker{tpA, pid, ep + 1, false}) {
		t.Fatalf("fence markers %v", m)
	}
	pid2, ep2 := e.mustInit("t", 60000)
	if pid2 != pid || ep2 != ep+2 {
		t.Fatalf("new instance %d/%d", pid2, ep2)
	}
	// The zombie is fenced everywhere.
	wantCode(t, "zombie add", e.addParts("t", pid, ep, tpB)[0], kerr.ProducerFenced)
	wantCode(t, "zombie end", e.endTxn("t", pid, ep, true, 3).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "zombie txn offset commit", e.txnCommit("t", pid, ep, "g", 3), kerr.InvalidProducerEpoch)
	codes, release := e.verify("t", pid, ep, false, tpA)
	release()
	wantCode(t, "zombie produce", codes[0], kerr.InvalidProducerEpoch)
	// The zombie cannot claim the epoch with KIP-360 either (it was fenced,
	// not timed out).
	wantCode(t, "zombie kip-360", e.initPID(strp("t"), 60000, pid, ep, 4).ErrorCode, kerr.ProducerFenced)
}

func TestTimeoutAbortAndKIP588(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 1000)
	e.mustAdd("t", pid, ep, tpA)
	e.clock.Advance(999 * time.Millisecond)
	e.c.Tick()
	if st := e.describe("t"); st.State != "Ongoing" {
		t.Fatalf("aborted early: %s", st.State)
	}
	e.clock.Advance(time.Millisecond)
	e.c.Tick()
	st := e.waitState("t", "CompleteAbort")
	if st.ProducerEpoch != ep+1 {
		t.Fatalf("epoch after timeout %d", st.ProducerEpoch)
	}
	if m := e.parts.all(); len(m) != 1 || m[0] != (marker{tpA, pid, ep + 1, false}) {
		t.Fatalf("timeout markers %v", m)
	}
	// The timed-out producer's writes are fenced ...
	codes, release := e.verify("t", pid, ep, false, tpA)
	release()
	wantCode(t, "produce after timeout", codes[0], kerr.InvalidProducerEpoch)
	wantCode(t, "commit after timeout", e.endTxn("t", pid, ep, true, 3).ErrorCode, kerr.ProducerFenced)
	// ... but it may claim the bumped epoch (KIP-588) without another bump.
	r := e.initPID(strp("t"), 1000, pid, ep, 4)
	wantCode(t, "kip-588 re-init", r.ErrorCode, nil)
	if r.ProducerID != pid || r.ProducerEpoch != ep+1 {
		t.Fatalf("kip-588: %d/%d, want %d/%d", r.ProducerID, r.ProducerEpoch, pid, ep+1)
	}
	if got := testutilCount(e, "timeout"); got != 1 {
		t.Fatalf("timeout aborts counted %v", got)
	}
}

func TestTV2EpochBumpPerTransaction(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	// Produce v12 adds the partition implicitly.
	codes, release := e.verify("t", pid, ep, true, tpA, tpB)
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("implicit add codes %v", codes)
	}
	release()
	wantCode(t, "txn offset commit v5 (implicit add)", e.txnCommit("t", pid, ep, "g", 5), nil)
	st := e.describe("t")
	if st.State != "Ongoing" || len(st.Topics) != 3 {
		t.Fatalf("after implicit adds: %+v", st)
	}
	r := e.endTxn("t", pid, ep, true, 5)
	wantCode(t, "commit v5", r.ErrorCode, nil)
	if r.ProducerID != pid || r.ProducerEpoch != ep+1 {
		t.Fatalf("commit v5 returned %d/%d", r.ProducerID, r.ProducerEpoch)
	}
	e.waitState("t", "CompleteCommit")
	for _, m := range e.parts.all() {
		if m.epoch != ep+1 || !m.commit {
			t.Fatalf("TV2 markers must carry the bumped epoch: %v", m)
		}
	}
	// A retry with the old epoch is recognised and answered with the current one.
	r = e.endTxn("t", pid, ep, true, 5)
	wantCode(t, "commit v5 retry", r.ErrorCode, nil)
	if r.ProducerEpoch != ep+1 {
		t.Fatalf("retry returned epoch %d", r.ProducerEpoch)
	}
	wantCode(t, "abort retry of a commit", e.endTxn("t", pid, ep, false, 5).ErrorCode, kerr.InvalidTxnState)
	// The old epoch is fenced for produce.
	codes, release = e.verify("t", pid, ep, true, tpA)
	release()
	wantCode(t, "old epoch produce", codes[0], kerr.InvalidProducerEpoch)
	ep++
	// Without implicit add (Produce < v12) a partition outside the txn is INVALID_TXN_STATE.
	codes, release = e.verify("t", pid, ep, false, tpA)
	release()
	wantCode(t, "produce without add", codes[0], kerr.InvalidTxnState)
	// Abort with nothing added is allowed in TV2 and bumps the epoch; commit is not.
	wantCode(t, "commit nothing v5", e.endTxn("t", pid, ep, true, 5).ErrorCode, kerr.InvalidTxnState)
	r = e.endTxn("t", pid, ep, false, 5)
	wantCode(t, "abort nothing v5", r.ErrorCode, nil)
	if r.ProducerEpoch != ep+1 {
		t.Fatalf("empty abort returned epoch %d", r.ProducerEpoch)
	}
	e.waitState("t", "CompleteAbort")
}

func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.mustInit("t", 60000)
	// Drive the epoch to the edge through the state log, as a long-lived id would.
	e.c.Close()
	d := txnData{producerID: pid, prevProducerID: -1, nextProducerID: -1, epoch: 32765, lastEpoch: -1,
		timeoutMs: 60000, state: stateCompleteCommit, parts: map[TopicPartition]struct{}{}, startMs: -1}
	if _, err := e.state.Append(buildBatch([]kv{{Key: txnKey("t"), Value: txnValue(&d)}}, 0), true); err != nil {
		t.Fatal(err)
	}
	e.start()
	_, ep := e.mustInit("t", 60000)
	if ep != 32766 {
		t.Fatalf("epoch %d", ep)
	}
	r := e.initPID(strp("t"), 60000, pid, 32766, 4)
	wantCode(t, "rotate", r.ErrorCode, nil)
	if r.ProducerID == pid || r.ProducerEpoch != 0 {
		t.Fatalf("rotation gave %d/%d", r.ProducerID, r.ProducerEpoch)
	}
	// A retry of the rotation (lost response) gets the same new id.
	r2 := e.initPID(strp("t"), 60000, pid, 32766, 4)
	wantCode(t, "rotate retry", r2.ErrorCode, nil)
	if r2.ProducerID != r.ProducerID || r2.ProducerEpoch != 0 {
		t.Fatalf("rotation retry gave %d/%d, want %d/0", r2.ProducerID, r2.ProducerEpoch, r.ProducerID)
	}
}

func TestTV2EpochOverflowOnEndTxn(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.mustInit("t", 60000)
	e.c.Close()
	d := txnData{producerID: pid, prevProducerID: -1, nextProducerID: -1, epoch: 32766, lastEpoch: -1,
		timeoutMs: 60000, state: stateOngoing, parts: map[TopicPartition]struct{}{tpA: {}}, startMs: e.clock.Now().UnixMilli(), tv: 2}
	if _, err := e.state.Append(buildBatch([]kv{{Key: txnKey("t"), Value: txnValue(&d)}}, 0), true); err != nil {
		t.Fatal(err)
	}
	e.start()
	r := e.endTxn("t", pid, 32766, true, 5)
	wantCode(t, "commit at exhausted epoch", r.ErrorCode, nil)
	if r.ProducerID == pid || r.ProducerEpoch != 0 {
		t.Fatalf("got %d/%d, want a new producer id with epoch 0", r.ProducerID, r.ProducerEpoch)
	}
	st := e.waitState("t", "CompleteCommit")
	if st.ProducerID != r.ProducerID || st.ProducerEpoch != 0 {
		t.Fatalf("after completion %d/%d", st.ProducerID, st.ProducerEpoch)
	}
	if m := e.parts.all(); len(m) != 1 || m[0].pid != pid || m[0].epoch != 32767 {
		t.Fatalf("markers %v", m)
	}
	// A retry of the EndTxn with the old id is recognised (retryOnOverflow).
	r2 := e.endTxn("t", pid, 32766, true, 5)
	wantCode(t, "overflow retry", r2.ErrorCode, nil)
	if r2.ProducerID != r.ProducerID {
		t.Fatalf("overflow retry gave %d", r2.ProducerID)
	}
}

func TestVerifyHoldsMarkers(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	e.mustAdd("t", pid, ep, tpA)
	codes, release := e.verify("t", pid, ep, false, tpA, tpB)
	if codes[0] != 0 || codes[1] != kerr.InvalidTxnState.Code {
		t.Fatalf("codes %v", codes)
	}
	wantCode(t, "commit", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	// The in-flight append must land first: no marker yet.
	e.c.Tick()
	if m := e.parts.all(); len(m) != 0 {
		t.Fatalf("marker written while a verified append was in flight: %v", m)
	}
	release()
	release() // idempotent
	e.waitState("t", "CompleteCommit")
	if m := e.parts.all(); len(m) != 1 {
		t.Fatalf("markers %v", m)
	}
}

func TestTxnOffsetCommitHoldsMarkers(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	wantCode(t, "txn offset commit before add", e.txnCommit("t", pid, ep, "g", 3), kerr.InvalidTxnState)
	wantCode(t, "add offsets", e.addOffsets("t", pid, ep, "g"), nil)
	e.offs.mu.Lock()
	gate := make(chan struct{})
	e.offs.gate, e.offs.entered = gate, make(chan struct{}, 1)
	e.offs.mu.Unlock()
	done := make(chan int16, 1)
	go func() { done <- e.txnCommit("t", pid, ep, "g", 3) }()
	<-e.offs.entered
	wantCode(t, "commit", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	e.c.Tick()
	if m := e.offs.allMarkers(); len(m) != 0 {
		t.Fatalf("offsets marker before the staged commit finished: %v", m)
	}
	close(gate)
	wantCode(t, "txn offset commit", <-done, nil)
	e.waitState("t", "CompleteCommit")
	if m := e.offs.allMarkers(); len(m) != 1 || !m[0].commit {
		t.Fatalf("offsets markers %v", m)
	}
}

func TestMarkerRetryAndMissingPartition(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	e.mustAdd("t", pid, ep, tpA, tpB)
	e.parts.mu.Lock()
	e.parts.failN[tpA] = 2
	delete(e.parts.exists, tpB) // deleted topic: its marker is dropped
	e.parts.mu.Unlock()
	wantCode(t, "commit", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	for i := 0; i < 2; i++ {
		deadline := time.Now().Add(5 * time.Second)
		for testutilMarkerErrors(e) < float64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("marker attempt %d not made", i+1)
			}
			time.Sleep(time.Millisecond)
		}
		if st := e.describe("t"); st.State != "PrepareCommit" {
			t.Fatalf("state %s before retry", st.State)
		}
		e.clock.Advance(100 * time.Millisecond)
		e.c.Tick()
	}
	e.waitState("t", "CompleteCommit")
	if m := e.parts.all(); len(m) != 1 || m[0].tp != tpA {
		t.Fatalf("markers %v", m)
	}
}

func TestStateAppendFailure(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	e.state.(*memState).setFail(errInjected)
	wantCode(t, "add with failing log", e.addParts("t", pid, ep, tpA)[0], kerr.CoordinatorNotAvailable)
	if st := e.describe("t"); st.State != "Empty" {
		t.Fatalf("state changed without a durable record: %s", st.State)
	}
	wantCode(t, "init with failing log", e.initPID(strp("u"), 1000, -1, -1, 4).ErrorCode, kerr.CoordinatorNotAvailable)
	e.state.(*memState).setFail(nil)
	e.mustAdd("t", pid, ep, tpA)
}

func TestDescribeListFind(t *testing.T) {
	e := newEnv(t)
	p1, e1 := e.mustInit("alpha", 60000)
	e.mustInit("beta", 60000)
	e.mustAdd("alpha", p1, e1, tpA)
	if st := e.describe("nope"); st.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("unknown id: %+v", st)
	}
	list := func(mod func(*kmsg.ListTransactionsRequest)) *kmsg.ListTransactionsResponse {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version = 2
		req.DurationFilterMillis = -1
		mod(req)
		return e.do(req).(*kmsg.ListTransactionsResponse)
	}
	ids := func(r *kmsg.ListTransactionsResponse) []string {
		var out []string
		for _, s := range r.TransactionStates {
			out = append(out, s.TransactionalID+"="+s.TransactionState)
		}
		return out
	}
	if got := ids(list(func(*kmsg.ListTransactionsRequest) {})); !slices.Equal(got, []string{"alpha=Ongoing", "beta=Empty"}) {
		t.Fatalf("list all %v", got)
	}
	r := list(func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Ongoing", "Bogus"} })
	if got := ids(r); !slices.Equal(got, []string{"alpha=Ongoing"}) || !slices.Equal(r.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("state filter %v unknown %v", got, r.UnknownStateFilters)
	}
	if got := ids(list(func(r *kmsg.ListTransactionsRequest) { r.ProducerIDFilters = []int64{p1} })); !slices.Equal(got, []string{"alpha=Ongoing"}) {
		t.Fatalf("pid filter %v", got)
	}
	if got := ids(list(func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = strp("b.*") })); !slices.Equal(got, []string{"beta=Empty"}) {
		t.Fatalf("pattern filter %v", got)
	}
	wantCode(t, "bad regex", list(func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = strp("(") }).ErrorCode, kerr.InvalidRegularExpression)
	e.clock.Advance(5 * time.Second)
	if got := ids(list(func(r *kmsg.ListTransactionsRequest) {
		r.StateFilters = []string{"Ongoing"}
		r.DurationFilterMillis = 4000
	})); !slices.Equal(got, []string{"alpha=Ongoing"}) {
		t.Fatalf("duration filter %v", got)
	}
	if got := ids(list(func(r *kmsg.ListTransactionsRequest) {
		r.StateFilters = []string{"Ongoing"}
		r.DurationFilterMillis = 6000
	})); len(got) != 0 {
		t.Fatalf("duration filter 6s %v", got)
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 3
	fc.CoordinatorType = 1
	fc.CoordinatorKey = "alpha"
	fr := e.do(fc).(*kmsg.FindCoordinatorResponse)
	if fr.ErrorCode != 0 || fr.NodeID != 1 || fr.Host != "127.0.0.1" || fr.Port != 9092 {
		t.Fatalf("find v3 %+v", fr)
	}
	fc.Version = 4
	fc.CoordinatorKeys = []string{"alpha", ""}
	fr = e.do(fc).(*kmsg.FindCoordinatorResponse)
	if len(fr.Coordinators) != 2 || fr.Coordinators[0].ErrorCode != 0 || fr.Coordinators[0].NodeID != 1 ||
		fr.Coordinators[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("find v4 %+v", fr.Coordinators)
	}
}

func TestAddPartitionsBatchedV4(t *testing.T) {
	e := newEnv(t)
	p1, e1 := e.mustInit("one", 60000)
	p2, e2 := e.mustInit("two", 60000)
	e.mustAdd("one", p1, e1, tpA)
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	mk := func(id string, pid int64, ep int16, verify bool, tps ...TopicPartition) kmsg.AddPartitionsToTxnRequestTransaction {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, ep, verify
		for _, tp := range tps {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
			tx.Topics = append(tx.Topics, tt)
		}
		return tx
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{
		mk("one", p1, e1, true, tpA, tpB),
		mk("two", p2, e2, false, tpC),
		mk("two", p2, e2+1, true, tpC),
	}
	resp := e.do(req).(*kmsg.AddPartitionsToTxnResponse)
	code := func(i, j int) int16 { return resp.Transactions[i].Topics[j].Partitions[0].ErrorCode }
	wantCode(t, "verify in txn", code(0, 0), nil)
	wantCode(t, "verify not in txn", code(0, 1), kerr.TransactionAbortable)
	wantCode(t, "add", code(1, 0), nil)
	wantCode(t, "verify fenced", code(2, 0), kerr.ProducerFenced)
	if st := e.describe("two"); st.State != "Ongoing" {
		t.Fatalf("two: %s", st.State)
	}
	if st := e.describe("one"); len(st.Topics) != 1 {
		t.Fatalf("verify-only added partitions: %+v", st.Topics)
	}
}

func TestTransactionalIDExpiration(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.TransactionalIDExpiration = time.Hour })
	pid, ep := e.mustInit("idle", 60000)
	e.mustInit("busy", 60000)
	op, oep := e.mustInit("open", 60000)
	e.mustAdd("open", op, oep, tpA)
	e.clock.Advance(50 * time.Minute)
	e.c.Tick() // "open" timed out and is aborted (updated now)
	e.waitState("open", "CompleteAbort")
	e.mustInit("busy", 60000) // updated now
	e.clock.Advance(11 * time.Minute)
	e.c.Tick()
	deadline := time.Now().Add(5 * time.Second)
	for e.describe("idle").ErrorCode != kerr.TransactionalIDNotFound.Code {
		if time.Now().After(deadline) {
			t.Fatal("idle id not expired")
		}
		time.Sleep(time.Millisecond)
	}
	if st := e.describe("busy"); st.State != "Empty" {
		t.Fatalf("busy: %+v", st)
	}
	if st := e.describe("open"); st.State != "CompleteAbort" {
		t.Fatalf("open: %+v", st)
	}
	// While the tombstone is being written the id answers
	// CONCURRENT_TRANSACTIONS (as Kafka's Dead pending state), then it is gone.
	for {
		code := e.endTxn("idle", pid, ep, false, 3).ErrorCode
		if code == kerr.ConcurrentTransactions.Code && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			continue
		}
		wantCode(t, "expired id end", code, kerr.InvalidProducerIDMapping)
		break
	}
	e.restart()
	if e.describe("idle").ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatal("expired id came back after restart")
	}
	if st := e.describe("open"); st.State != "CompleteAbort" {
		t.Fatalf("open after restart: %s", st.State)
	}
	// A new producer on the expired id starts over with a new producer id.
	np, nep := e.mustInit("idle", 60000)
	if np == pid || nep != 0 {
		t.Fatalf("re-created id %d/%d", np, nep)
	}
}

func TestHandleRejectsOtherKeysAndVersions(t *testing.T) {
	e := newEnv(t)
	if _, err := e.c.Handle(t.Context(), kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("Metadata accepted")
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 9
	if _, err := e.c.Handle(t.Context(), req); err == nil {
		t.Fatal("EndTxn v9 accepted")
	}
	e.c.Close()
	if _, err := e.c.Handle(t.Context(), kmsg.NewPtrListTransactionsRequest()); err != ErrClosed {
		t.Fatalf("after close: %v", err)
	}
	if _, _, err := e.c.Verify(t.Context(), "t", 1, 0, []TopicPartition{tpA}, false); err != ErrClosed {
		t.Fatalf("verify after close: %v", err)
	}
}
