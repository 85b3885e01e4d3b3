package txn

import (
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// TestStateLogDiskFull runs the coordinator on the storage engine over a
// file system that fails writes and fsyncs with ENOSPC on demand: requests
// that need a state change answer COORDINATOR_NOT_AVAILABLE (retriable)
// and change nothing; once space is back the coordinator continues, and a
// crash afterwards recovers exactly the acknowledged state.
func TestStateLogDiskFull(t *testing.T) {
	mem := vfs.NewCrashableMem()
	full := errorfs.NewToggle(errorfs.FailIf(errorfs.OnOps(errorfs.OpWrite, errorfs.OpSync), syscall.ENOSPC))
	fs := errorfs.Wrap(mem, full)
	l, err := wlog.Open(wlog.Options{FS: fs, Dir: "state", Config: wlog.Config{Compact: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := newEnv(t, func(o *Options) { o.State = WrapLog(l) })
	pid, ep := e.mustInit("t", 60000)

	full.On()
	wantCode(t, "add on a full disk", e.addParts("t", pid, ep, tpA)[0], kerr.CoordinatorNotAvailable)
	wantCode(t, "init on a full disk", e.initPID(strp("u"), 1000, -1, -1, 4).ErrorCode, kerr.CoordinatorNotAvailable)
	if st := e.describe("t"); st.State != "Empty" {
		t.Fatalf("state after failed appends: %s", st.State)
	}
	full.Off()

	e.mustAdd("t", pid, ep, tpA)
	wantCode(t, "commit", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	e.waitState("t", "CompleteCommit")

	// The disk fills while the Complete record is written: the commit is
	// decided (PrepareCommit is durable); Complete is retried.
	e.mustAdd("t", pid, ep, tpB)
	open := e.parts.gate(tpB)
	wantCode(t, "commit 2", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	full.On()
	open()
	deadline := time.Now().Add(5 * time.Second)
	for counterValue(e.c.met.appendErrors) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("complete record not attempted on the full disk")
		}
		time.Sleep(time.Millisecond)
	}
	full.Off()
	e.clock.Advance(100 * time.Millisecond)
	e.c.Tick()
	e.waitState("t", "CompleteCommit")

	// Crash: what was acknowledged is what comes back.
	clone := mem.CrashClone()
	e.c.Close()
	l2, err := wlog.Open(wlog.Options{FS: clone, Dir: "state", Config: wlog.Config{Compact: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	e.parts = newFakeParts(tpA, tpB, tpC)
	e.opts.Partitions = e.parts
	e.state = WrapLog(l2)
	e.start()
	st := e.describe("t")
	if st.State != "CompleteCommit" || st.ProducerID != pid || st.ProducerEpoch != ep {
		t.Fatalf("after crash: %+v", st)
	}
	if d := e.describe("u"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("an id whose record failed came back: %+v", d)
	}
}
