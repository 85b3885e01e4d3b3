package txn

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestEndTxnMatrix pins EndTxn's answer for every state, both transaction
// versions (v3 = TV1, v5 = TV2), both outcomes and the producer epoch being
// current, one behind (a retry after a TV2 bump) or one ahead, plus a
// foreign producer id. Expectations follow Kafka's
// TransactionCoordinator.endTransaction (TV1 and TV2 paths); the one
// deliberate difference is marked.
func TestEndTxnMatrix(t *testing.T) {
	const (
		ok   = "OK"
		okB  = "OK+1" // success, epoch bumped (TV2)
		okR  = "OK="  // success without change (a retry), current epoch answered
		conc = "CONCURRENT_TRANSACTIONS"
		inv  = "INVALID_TXN_STATE"
		fen  = "PRODUCER_FENCED"
		pidm = "INVALID_PRODUCER_ID_MAPPING"
	)
	// state -> version -> [commit@cur, abort@cur, commit@cur-1, abort@cur-1, commit@cur+1, abort@cur+1]
	table := map[txnState]map[int16][6]string{
		stateEmpty: {
			3: {inv, inv, fen, fen, fen, fen},
			5: {inv, okB, fen, fen, fen, fen},
		},
		stateOngoing: {
			3: {ok, ok, fen, fen, fen, fen},
			5: {okB, okB, fen, fen, fen, fen},
		},
		statePrepareCommit: {
			3: {conc, inv, fen, fen, fen, fen},
			// Kafka: PRODUCER_FENCED at the current epoch (weir: retry later).
			5: {conc, conc, conc, inv, fen, fen},
		},
		statePrepareAbort: {
			3: {inv, conc, fen, fen, fen, fen},
			5: {conc, conc, inv, conc, fen, fen},
		},
		stateCompleteCommit: {
			3: {okR, inv, fen, fen, fen, fen},
			5: {inv, okB, okR, inv, fen, fen},
		},
		stateCompleteAbort: {
			3: {inv, okR, fen, fen, fen, fen},
			5: {inv, okB, inv, okR, fen, fen},
		},
	}
	const pid, cur = int64(500), int16(7)
	for st, byVersion := range table {
		for version, want := range byVersion {
			for i, w := range want {
				commit := i%2 == 0
				epoch := cur + int16([]int{0, 0, -1, -1, 1, 1}[i])
				name := fmt.Sprintf("%s/v%d/commit=%v/epoch%+d", st, version, commit, epoch-cur)
				t.Run(name, func(t *testing.T) {
					e := newEnv(t)
					e.c.Close()
					d := txnData{producerID: pid, prevProducerID: -1, nextProducerID: -1, epoch: cur, lastEpoch: -1,
						timeoutMs: 60000, state: st, parts: map[TopicPartition]struct{}{}, startMs: e.clock.Now().UnixMilli()}
					if st == stateOngoing || st.isPrepare() {
						d.parts[tpA] = struct{}{}
					}
					if version == 5 {
						d.tv = 2
					}
					if _, err := e.state.Append(buildBatch([]kv{{Key: txnKey("m"), Value: txnValue(&d)}}, 0), true); err != nil {
						t.Fatal(err)
					}
					defer e.parts.gate(tpA)() // prepared states stay prepared
					e.start()
					r := e.endTxn("m", pid, epoch, commit, version)
					got := ok
					if r.ErrorCode != 0 {
						got = strings.SplitN(kerr.ErrorForCode(r.ErrorCode).Error(), ":", 2)[0]
					} else if version >= 5 {
						switch r.ProducerEpoch {
						case cur + 1:
							got = okB
						case cur:
							got = okR
						default:
							got = fmt.Sprintf("OK epoch %d", r.ProducerEpoch)
						}
					} else if st.isComplete() && st != stateEmpty {
						got = okR
					}
					if got != w {
						t.Fatalf("got %s, want %s", got, w)
					}
					// A foreign producer id is never accepted (once no
					// transition is in flight: that answers CONCURRENT first).
					for deadline := time.Now().Add(5 * time.Second); !e.idle("m") && st != stateOngoing && !st.isPrepare() && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
					r = e.endTxn("m", pid+1, epoch, commit, version)
					if got := strings.SplitN(kerr.ErrorForCode(r.ErrorCode).Error(), ":", 2)[0]; r.ErrorCode == 0 || got != pidm {
						t.Fatalf("foreign pid: %v", kerr.ErrorForCode(r.ErrorCode))
					}
				})
			}
		}
	}
}

// TestAddVerifyInitMatrix pins AddPartitionsToTxn (v3), Verify (Produce,
// without and with implicit add) and InitProducerId for every state and a
// current, stale or foreign producer.
func TestAddVerifyInitMatrix(t *testing.T) {
	const (
		ok   = "OK"
		conc = "CONCURRENT_TRANSACTIONS"
		inv  = "INVALID_TXN_STATE"
		fen  = "PRODUCER_FENCED"
		iep  = "INVALID_PRODUCER_EPOCH"
		ner  = "NOT_ENOUGH_REPLICAS"
		pidm = "INVALID_PRODUCER_ID_MAPPING"
	)
	type row struct {
		add, verify, implicit [3]string // current epoch, stale epoch, foreign pid
		init                  string    // InitProducerId without KIP-360 fields
	}
	table := map[txnState]row{
		stateEmpty:          {[3]string{ok, fen, pidm}, [3]string{inv, iep, pidm}, [3]string{ok, iep, pidm}, "OK+1"},
		stateOngoing:        {[3]string{ok, fen, pidm}, [3]string{ok, iep, pidm}, [3]string{ok, iep, pidm}, conc},
		statePrepareCommit:  {[3]string{conc, fen, pidm}, [3]string{ner, iep, pidm}, [3]string{ner, iep, pidm}, conc},
		statePrepareAbort:   {[3]string{conc, fen, pidm}, [3]string{ner, iep, pidm}, [3]string{ner, iep, pidm}, conc},
		stateCompleteCommit: {[3]string{ok, fen, pidm}, [3]string{inv, iep, pidm}, [3]string{ok, iep, pidm}, "OK+1"},
		stateCompleteAbort:  {[3]string{ok, fen, pidm}, [3]string{inv, iep, pidm}, [3]string{ok, iep, pidm}, "OK+1"},
	}
	const pid, cur = int64(500), int16(7)
	name := func(code int16) string {
		if code == 0 {
			return ok
		}
		return strings.SplitN(kerr.ErrorForCode(code).Error(), ":", 2)[0]
	}
	setup := func(t *testing.T, st txnState) *env {
		e := newEnv(t)
		e.c.Close()
		d := txnData{producerID: pid, prevProducerID: -1, nextProducerID: -1, epoch: cur, lastEpoch: -1,
			timeoutMs: 60000, state: st, parts: map[TopicPartition]struct{}{}, startMs: e.clock.Now().UnixMilli()}
		if st == stateOngoing || st.isPrepare() {
			d.parts[tpA] = struct{}{}
		}
		if _, err := e.state.Append(buildBatch([]kv{{Key: txnKey("m"), Value: txnValue(&d)}}, 0), true); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.parts.gate(tpA))
		e.start()
		return e
	}
	who := []struct {
		pid   int64
		epoch int16
	}{{pid, cur}, {pid, cur - 1}, {pid + 1, cur}}
	for st, want := range table {
		for i, w := range who {
			t.Run(fmt.Sprintf("%s/add/%d", st, i), func(t *testing.T) {
				e := setup(t, st)
				if got := name(e.addParts("m", w.pid, w.epoch, tpB)[0]); got != want.add[i] {
					t.Fatalf("got %s, want %s", got, want.add[i])
				}
			})
			t.Run(fmt.Sprintf("%s/verify/%d", st, i), func(t *testing.T) {
				e := setup(t, st)
				codes, release := e.verify("m", w.pid, w.epoch, false, tpA)
				release()
				if got := name(codes[0]); got != want.verify[i] {
					t.Fatalf("got %s, want %s", got, want.verify[i])
				}
			})
			t.Run(fmt.Sprintf("%s/implicit/%d", st, i), func(t *testing.T) {
				e := setup(t, st)
				codes, release := e.verify("m", w.pid, w.epoch, true, tpB)
				release()
				if got := name(codes[0]); got != want.implicit[i] {
					t.Fatalf("got %s, want %s", got, want.implicit[i])
				}
				if want.implicit[i] == ok {
					if d := e.describe("m"); d.State != "Ongoing" {
						t.Fatalf("after an implicit add: %s", d.State)
					}
				}
			})
		}
		t.Run(fmt.Sprintf("%s/init", st), func(t *testing.T) {
			e := setup(t, st)
			r := e.initPID(strp("m"), 60000, -1, -1, 4)
			got := name(r.ErrorCode)
			if r.ErrorCode == 0 && r.ProducerID == pid && r.ProducerEpoch == cur+1 {
				got = "OK+1"
			}
			if got != want.init {
				t.Fatalf("got %s (%d/%d), want %s", got, r.ProducerID, r.ProducerEpoch, want.init)
			}
		})
	}
}
