package txn

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRandomizedAgainstModel drives random client sessions (TV1 and TV2
// producers, adds, commits, aborts, re-inits that fence, timeouts and
// crashes on the crashable file system) and checks the outcome against a
// simple model: every acknowledged commit/abort and every coordinator abort
// ends with exactly its markers (same producer id, epoch and outcome) on
// exactly the partitions that were added, and no other marker is ever
// written; epochs never go backwards, producer ids never repeat.
func TestRandomizedAgainstModel(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, seed, 150) })
	}
}

type modelClient struct {
	pid     int64
	epoch   int16
	tv2     bool
	fenced  bool // a timeout abort bumped the epoch under it
	crashed bool // the coordinator restarted since (the last epoch is not durable)
	open    map[TopicPartition]bool
}

type markerKey struct {
	tp     TopicPartition
	pid    int64
	epoch  int16
	commit bool
}

func runModel(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	ce := newCrashEnv(t)
	allParts := []*fakeParts{ce.parts}
	allOffs := []*fakeOffsets{ce.offs}
	ids := []string{"t0", "t1", "t2"}
	tps := []TopicPartition{tpA, tpB, tpC}
	clients := map[string]*modelClient{}
	expected := map[markerKey]bool{}
	pidOwner := map[int64]string{}
	const timeout = 30_000

	settle := func(id string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if ce.idle(id) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s stuck in %+v", id, ce.describe(id))
			}
			time.Sleep(time.Millisecond)
		}
	}
	expectAbort := func(c *modelClient, epoch int16) {
		for tp := range c.open {
			expected[markerKey{tp, c.pid, epoch, false}] = true
		}
		c.open = map[TopicPartition]bool{}
	}
	notePID := func(id string, pid int64) {
		if owner, ok := pidOwner[pid]; ok && owner != id {
			t.Fatalf("producer id %d given to %s and %s", pid, owner, id)
		}
		pidOwner[pid] = id
	}
	initClient := func(id string) {
		t.Helper()
		c := clients[id]
		if c != nil && c.fenced && rng.IntN(2) == 0 {
			// KIP-588: the timed-out producer claims its bumped epoch,
			// unless the coordinator restarted (Kafka keeps the last
			// epoch in memory only).
			settle(id)
			r := ce.initPID(strp(id), timeout, c.pid, c.epoch, 4)
			if !c.crashed {
				wantCode(t, "kip-588 init "+id, r.ErrorCode, nil)
				if r.ProducerID != c.pid || r.ProducerEpoch != c.epoch+1 {
					t.Fatalf("kip-588 init %s: %d/%d, want %d/%d", id, r.ProducerID, r.ProducerEpoch, c.pid, c.epoch+1)
				}
				c.epoch, c.fenced = r.ProducerEpoch, false
				return
			}
			wantCode(t, "kip-588 init after restart "+id, r.ErrorCode, kerr.ProducerFenced)
		}
		for try := 0; ; try++ {
			r := ce.initPID(strp(id), timeout, -1, -1, 4)
			if r.ErrorCode == kerr.ConcurrentTransactions.Code && try < 100 {
				if c != nil && len(c.open) > 0 {
					expectAbort(c, c.epoch+1) // the fence abort
				}
				settle(id)
				continue
			}
			wantCode(t, "init "+id, r.ErrorCode, nil)
			if c != nil && r.ProducerID == c.pid && r.ProducerEpoch < c.epoch {
				t.Fatalf("%s: epoch went back from %d to %d", id, c.epoch, r.ProducerEpoch)
			}
			notePID(id, r.ProducerID)
			clients[id] = &modelClient{pid: r.ProducerID, epoch: r.ProducerEpoch, tv2: rng.IntN(2) == 0, open: map[TopicPartition]bool{}}
			return
		}
	}

	for i := 0; i < ops; i++ {
		id := ids[rng.IntN(len(ids))]
		c := clients[id]
		switch op := rng.IntN(10); {
		case c == nil || op == 0:
			initClient(id)
		case c.fenced:
			// A fenced producer is rejected everywhere, then re-inits.
			if c.tv2 {
				codes, release := ce.verify(id, c.pid, c.epoch, true, tpA)
				release()
				wantCode(t, "fenced produce", codes[0], kerr.InvalidProducerEpoch)
			} else {
				wantCode(t, "fenced add", ce.addParts(id, c.pid, c.epoch, tpA)[0], kerr.ProducerFenced)
			}
			initClient(id)
		case op == 1 && rng.IntN(2) == 0:
			// Consumed offsets in the transaction: AddOffsetsToTxn (TV1)
			// or an implicit add by TxnOffsetCommit v5 (TV2).
			var code int16
			if c.tv2 {
				code = ce.txnCommit(id, c.pid, c.epoch, "g-"+id, 5)
			} else if code = ce.addOffsets(id, c.pid, c.epoch, "g-"+id); code == 0 {
				code = ce.txnCommit(id, c.pid, c.epoch, "g-"+id, 3)
			}
			if code == kerr.ConcurrentTransactions.Code {
				settle(id)
				continue
			}
			wantCode(t, "offsets "+id, code, nil)
			c.open[TopicPartition{OffsetsTopic, 0}] = true
		case op <= 4:
			tp := tps[rng.IntN(len(tps))]
			var code int16
			if c.tv2 {
				codes, release := ce.verify(id, c.pid, c.epoch, true, tp)
				release()
				code = codes[0]
			} else {
				code = ce.addParts(id, c.pid, c.epoch, tp)[0]
			}
			if code == kerr.ConcurrentTransactions.Code || code == kerr.NotEnoughReplicas.Code {
				settle(id)
				continue
			}
			wantCode(t, "add "+id, code, nil)
			c.open[tp] = true
		case op <= 7:
			commit := rng.IntN(3) > 0
			if len(c.open) == 0 && (!c.tv2 || commit) {
				continue // nothing to end (TV1 answers INVALID_TXN_STATE, tested elsewhere)
			}
			version := int16(3)
			if c.tv2 {
				version = 5
			}
			r := ce.endTxn(id, c.pid, c.epoch, commit, version)
			if r.ErrorCode == kerr.ConcurrentTransactions.Code {
				// The previous transaction is still completing (TV2).
				settle(id)
				r = ce.endTxn(id, c.pid, c.epoch, commit, version)
			}
			if r.ErrorCode != 0 {
				t.Logf("op %d: client %+v commit=%v; coordinator %+v", i, *c, commit, ce.describe(id))
			}
			wantCode(t, "end "+id, r.ErrorCode, nil)
			markerEpoch := c.epoch
			if c.tv2 {
				markerEpoch = c.epoch + 1
				if r.ProducerEpoch != markerEpoch || r.ProducerID != c.pid {
					t.Fatalf("v5 end returned %d/%d", r.ProducerID, r.ProducerEpoch)
				}
				c.epoch = r.ProducerEpoch
			}
			for tp := range c.open {
				expected[markerKey{tp, c.pid, markerEpoch, commit}] = true
			}
			c.open = map[TopicPartition]bool{}
			if rng.IntN(2) == 0 {
				settle(id)
			}
		case op == 8:
			// Let every open transaction time out.
			ce.clock.Advance(timeout * time.Millisecond)
			for _, id := range ids {
				settle(id) // a transaction being completed is not timed out
			}
			ce.c.Tick()
			for _, id := range ids {
				if c := clients[id]; c != nil && len(c.open) > 0 {
					expectAbort(c, c.epoch+1)
					c.fenced, c.crashed = true, false // the client still has the old epoch
				}
				settle(id)
			}
		default:
			ce.crash()
			allParts = append(allParts, ce.parts)
			allOffs = append(allOffs, ce.offs)
			for _, id := range ids {
				settle(id)
				if c := clients[id]; c != nil {
					c.crashed = true
					st := ce.describe(id)
					if st.ProducerID == c.pid && st.ProducerEpoch < c.epoch {
						t.Fatalf("%s: epoch %d after crash, client has %d", id, st.ProducerEpoch, c.epoch)
					}
				}
			}
		}
	}
	// End every open transaction so all expected markers are final.
	ce.clock.Advance(timeout * time.Millisecond)
	for _, id := range ids {
		settle(id)
	}
	ce.c.Tick()
	for _, id := range ids {
		if c := clients[id]; c != nil && len(c.open) > 0 {
			expectAbort(c, c.epoch+1)
		}
		settle(id)
	}
	seen := map[markerKey]bool{}
	var all []marker
	for _, p := range allParts {
		all = append(all, p.all()...)
	}
	for _, o := range allOffs {
		all = append(all, o.allMarkers()...)
	}
	{
		for _, m := range all {
			k := markerKey{m.tp, m.pid, m.epoch, m.commit}
			if !expected[k] {
				t.Fatalf("unexpected marker %v", m)
			}
			seen[k] = true
		}
	}
	for k := range expected {
		if !seen[k] {
			t.Fatalf("missing marker %+v", k)
		}
	}
}
