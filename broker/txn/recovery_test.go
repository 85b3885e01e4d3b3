package txn

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weirhq/weir/vfs"
)

// crashEnv runs the coordinator on the storage engine over a crashable
// in-memory file system; crash keeps only what was synced.
type crashEnv struct {
	*env
	fs *vfs.MemFS
}

func newCrashEnv(t *testing.T) *crashEnv {
	fs := vfs.NewCrashableMem()
	ce := &crashEnv{fs: fs}
	ce.env = newEnv(t, func(o *Options) {
		o.State = WrapLog(openCrashLog(t, fs).log)
	})
	return ce
}

// crash simulates a power loss now: the file system keeps only synced data,
// the old coordinator is gone, a new one (with fresh partitions that
// record markers anew) replays the log.
func (ce *crashEnv) crash() {
	ce.t.Helper()
	clone := ce.fs.CrashClone()
	ce.c.Close()
	ce.fs = clone
	ce.parts = newFakeParts(tpA, tpB, tpC)
	ce.offs = &fakeOffsets{}
	ce.opts.Partitions, ce.opts.Offsets = ce.parts, ce.offs
	ce.state = WrapLog(openCrashLog(ce.t, clone).log)
	ce.start()
}

func TestRecoveryOngoingIsAbortedAtTimeout(t *testing.T) {
	ce := newCrashEnv(t)
	pid, ep := ce.mustInit("t", 10_000)
	ce.mustAdd("t", pid, ep, tpA, tpB)
	ce.clock.Advance(4 * time.Second)
	ce.crash()
	st := ce.describe("t")
	if st.State != "Ongoing" || st.ProducerID != pid || st.ProducerEpoch != ep || len(st.Topics) != 2 {
		t.Fatalf("after crash: %+v", st)
	}
	ce.clock.Advance(5 * time.Second)
	ce.c.Tick()
	if st := ce.describe("t"); st.State != "Ongoing" {
		t.Fatalf("aborted before its timeout: %s", st.State)
	}
	ce.clock.Advance(time.Second)
	ce.c.Tick()
	ce.waitState("t", "CompleteAbort")
	got := ce.parts.all()
	slices.SortFunc(got, func(a, b marker) int { return int(a.tp.Partition) - int(b.tp.Partition) })
	if want := []marker{{tpA, pid, ep + 1, false}, {tpB, pid, ep + 1, false}}; !slices.Equal(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}
	// The old producer is fenced after recovery too.
	wantCode(t, "old producer commit", ce.endTxn("t", pid, ep, true, 3).ErrorCode, kerr.ProducerFenced)
	ce.crash()
	if st := ce.describe("t"); st.State != "CompleteAbort" || st.ProducerEpoch != ep+1 {
		t.Fatalf("after second crash: %+v", st)
	}
	if m := ce.parts.all(); len(m) != 0 {
		t.Fatalf("completed transaction re-sent markers: %v", m)
	}
}

func TestRecoveryPrepareCommitWithPartialMarkers(t *testing.T) {
	ce := newCrashEnv(t)
	pid, ep := ce.mustInit("t", 60_000)
	ce.mustAdd("t", pid, ep, tpA, tpB)
	wantCode(t, "add offsets", ce.addOffsets("t", pid, ep, "g"), nil)
	open := ce.parts.gate(tpB)
	defer open()
	wantCode(t, "commit", ce.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	if m := <-ce.parts.written; m.tp != tpA {
		t.Fatalf("first marker %v", m)
	}
	ce.crash() // tpA (and maybe the offsets) have their marker, tpB not
	st := ce.describe("t")
	// The prepared transaction completes by itself: every marker is re-sent.
	st = ce.waitState("t", "CompleteCommit")
	if st.ProducerEpoch != ep {
		t.Fatalf("epoch %d", st.ProducerEpoch)
	}
	got := ce.parts.all()
	slices.SortFunc(got, func(a, b marker) int { return int(a.tp.Partition) - int(b.tp.Partition) })
	if want := []marker{{tpA, pid, ep, true}, {tpB, pid, ep, true}}; !slices.Equal(got, want) {
		t.Fatalf("markers after recovery %v, want %v", got, want)
	}
	if om := ce.offs.allMarkers(); len(om) != 1 || !om[0].commit || om[0].pid != pid {
		t.Fatalf("offsets markers after recovery %v", om)
	}
	// The commit retry of the client is answered as a completed commit.
	wantCode(t, "commit retry", ce.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	// The next producer instance bumps from the durable epoch.
	if _, ep2 := ce.mustInit("t", 60_000); ep2 != ep+1 {
		t.Fatalf("epoch after recovery %d", ep2)
	}
}

func TestRecoveryPrepareAbortTV2(t *testing.T) {
	ce := newCrashEnv(t)
	pid, ep := ce.mustInit("t", 60_000)
	codes, release := ce.verify("t", pid, ep, true, tpC)
	release()
	wantCode(t, "implicit add", codes[0], nil)
	open := ce.parts.gate(tpC)
	defer open()
	r := ce.endTxn("t", pid, ep, false, 5)
	wantCode(t, "abort v5", r.ErrorCode, nil)
	ce.crash()
	st := ce.waitState("t", "CompleteAbort")
	if st.ProducerEpoch != ep+1 {
		t.Fatalf("epoch %d", st.ProducerEpoch)
	}
	if m := ce.parts.all(); len(m) != 1 || m[0] != (marker{tpC, pid, ep + 1, false}) {
		t.Fatalf("markers %v", m)
	}
	// The v5 retry (old epoch) is recognised after the crash.
	r = ce.endTxn("t", pid, ep, false, 5)
	wantCode(t, "abort v5 retry", r.ErrorCode, nil)
	if r.ProducerEpoch != ep+1 {
		t.Fatalf("retry epoch %d", r.ProducerEpoch)
	}
}

func TestRecoveryProducerIDsNotReused(t *testing.T) {
	fs := vfs.NewCrashableMem()
	var ce *crashEnv
	ce = &crashEnv{fs: fs}
	ce.env = newEnv(t, func(o *Options) {
		o.State = WrapLog(openCrashLog(t, fs).log)
		o.ProducerIDBlockSize = 4
	})
	seen := map[int64]bool{}
	for round := 0; round < 3; round++ {
		for i := 0; i < 6; i++ {
			r := ce.initPID(nil, 0, -1, -1, 4)
			if r.ErrorCode != 0 || seen[r.ProducerID] {
				t.Fatalf("round %d: pid %d err %d (repeated=%v)", round, r.ProducerID, r.ErrorCode, seen[r.ProducerID])
			}
			seen[r.ProducerID] = true
		}
		pid, _ := ce.mustInit("tx", 1000)
		seen[pid] = true
		ce.crash()
	}
}

// TestRecoveryCompleteNotDurable: every marker was written but the
// Complete record was not; the restarted coordinator re-sends the markers
// and completes.
func TestRecoveryCompleteNotDurable(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60_000)
	e.mustAdd("t", pid, ep, tpA)
	open := e.parts.gate(tpA)
	wantCode(t, "commit", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	e.state.(*memState).setFail(errInjected) // the Complete record will fail
	open()
	<-e.parts.written
	deadline := time.Now().Add(5 * time.Second)
	for counterValue(e.c.met.appendErrors) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("complete record not attempted")
		}
		time.Sleep(time.Millisecond)
	}
	if st := e.describe("t"); st.State != "PrepareCommit" {
		t.Fatalf("state %s with a failed complete record", st.State)
	}
	e.parts = newFakeParts(tpA, tpB, tpC)
	e.opts.Partitions = e.parts
	e.state.(*memState).setFail(nil)
	e.restart()
	e.waitState("t", "CompleteCommit")
	if m := e.parts.all(); len(m) != 1 || m[0] != (marker{tpA, pid, ep, true}) {
		t.Fatalf("markers re-sent %v", m)
	}
}

// TestCompleteRetriedAfterAppendFailure: the Complete record failing is
// retried by the running coordinator after the backoff.
func TestCompleteRetriedAfterAppendFailure(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60_000)
	e.mustAdd("t", pid, ep, tpA)
	open := e.parts.gate(tpA)
	wantCode(t, "commit", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	e.state.(*memState).setFail(errInjected)
	open()
	deadline := time.Now().Add(5 * time.Second)
	for counterValue(e.c.met.appendErrors) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("complete record not attempted")
		}
		time.Sleep(time.Millisecond)
	}
	e.state.(*memState).setFail(nil)
	e.clock.Advance(100 * time.Millisecond)
	e.c.Tick()
	e.waitState("t", "CompleteCommit")
}
