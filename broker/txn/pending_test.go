package txn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPendingTransitionIsConcurrent: while one transition's record is being
// appended, every other request that would change the id answers
// CONCURRENT_TRANSACTIONS (Kafka's pendingTransitionInProgress), and reads
// still see the durable state.
func TestPendingTransitionIsConcurrent(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	unblock := e.state.(*memState).block()
	defer unblock()
	done := make(chan []int16, 1)
	go func() { done <- e.addParts("t", pid, ep, tpA) }()
	// Wait until the add is pending on the loop.
	deadline := time.Now().Add(5 * time.Second)
	for e.idle("t") {
		if time.Now().After(deadline) {
			t.Fatal("add never became pending")
		}
		time.Sleep(time.Millisecond)
	}
	wantCode(t, "add while pending", e.addParts("t", pid, ep, tpB)[0], kerr.ConcurrentTransactions)
	wantCode(t, "end while pending", e.endTxn("t", pid, ep, true, 3).ErrorCode, kerr.ConcurrentTransactions)
	wantCode(t, "init while pending", e.initPID(strp("t"), 60000, -1, -1, 4).ErrorCode, kerr.ConcurrentTransactions)
	codes, release := e.verify("t", pid, ep, true, tpC)
	release()
	wantCode(t, "implicit add while pending", codes[0], kerr.NotEnoughReplicas)
	if st := e.describe("t"); st.State != "Empty" {
		t.Fatalf("describe shows an undurable state: %s", st.State)
	}
	unblock()
	if codes := <-done; codes[0] != 0 {
		t.Fatalf("add: %v", codes)
	}
	if st := e.describe("t"); st.State != "Ongoing" {
		t.Fatalf("after the append: %s", st.State)
	}
}

// TestCloseWhileWaiting: requests parked on an append that never finishes
// return ErrClosed when the coordinator closes; Close does not wait for
// them.
func TestCloseWhileWaiting(t *testing.T) {
	e := newEnv(t)
	unblock := e.state.(*memState).block()
	errc := make(chan error, 2)
	go func() {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = strp("t")
		req.TransactionTimeoutMillis = 1000
		_, err := e.c.Handle(context.Background(), req)
		errc <- err
	}()
	go func() {
		req := kmsg.NewPtrInitProducerIDRequest() // idempotent: waits for the id block
		_, err := e.c.Handle(context.Background(), req)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond) // let them park (not needed for correctness)
	closed := make(chan struct{})
	go func() {
		e.c.Close()
		close(closed)
	}()
	for i := 0; i < 2; i++ {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("parked request: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("parked request did not return")
		}
	}
	unblock() // the writer's in-flight append returns; Close completes
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung")
	}
}

// TestHandleContextCancelled: a caller whose context ends gets its error.
func TestHandleContextCancelled(t *testing.T) {
	e := newEnv(t)
	unblock := e.state.(*memState).block()
	defer unblock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	if _, err := e.c.Handle(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

// TestEndTxnWaitsForCompletion: by default EndTxn answers once the markers
// and the Complete record are written, so the producer's next transaction
// starts without CONCURRENT_TRANSACTIONS; if markers are stuck, it answers
// after EndTxnCompletionWait anyway (the outcome is durable at the prepare).
func TestEndTxnWaitsForCompletion(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.EndTxnCompletionWait = 0 }) // default
	pid, ep := e.mustInit("t", 60000)
	codes, release := e.verify("t", pid, ep, true, tpA, tpB)
	release()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("codes %v", codes)
	}
	r := e.endTxn("t", pid, ep, true, 5)
	wantCode(t, "commit", r.ErrorCode, nil)
	if st := e.describe("t"); st.State != "CompleteCommit" {
		t.Fatalf("EndTxn answered in %s", st.State)
	}
	if len(e.parts.all()) != 2 {
		t.Fatalf("markers %v", e.parts.all())
	}
	// The next transaction starts at once.
	codes, release = e.verify("t", pid, r.ProducerEpoch, true, tpA)
	release()
	wantCode(t, "next produce", codes[0], nil)

	e.c.Close()
	e.opts.EndTxnCompletionWait = 20 * time.Millisecond
	e.start()
	open := e.parts.gate(tpA)
	defer open()
	r = e.endTxn("t", pid, r.ProducerEpoch, false, 5)
	wantCode(t, "abort with a stuck marker", r.ErrorCode, nil)
	if st := e.describe("t"); st.State != "PrepareAbort" {
		t.Fatalf("state %s", st.State)
	}
	open()
	e.waitState("t", "CompleteAbort")
}

func TestVerifyUnknownPartition(t *testing.T) {
	e := newEnv(t)
	pid, ep := e.mustInit("t", 60000)
	codes, release := e.verify("t", pid, ep, true, TopicPartition{"", 0}, tpA)
	release()
	if codes[0] != kerr.UnknownTopicOrPartition.Code || codes[1] != 0 {
		t.Fatalf("codes %v", codes)
	}
	if st := e.describe("t"); len(st.Topics) != 1 || st.Topics[0].Topic != "a" {
		t.Fatalf("added %+v", st.Topics)
	}
}

func TestWriteTxnMarkers(t *testing.T) {
	e := newEnv(t)
	e.parts.mu.Lock()
	e.parts.failN[tpB] = 1
	e.parts.mu.Unlock()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = 42, 3, false, 0
	for _, tp := range []TopicPartition{tpA, tpB, {"gone", 0}, {OffsetsTopic, 0}} {
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
		mk.Topics = append(mk.Topics, rt)
	}
	req.Markers = append(req.Markers, mk)
	resp := e.do(req).(*kmsg.WriteTxnMarkersResponse)
	var codes []int16
	for _, rt := range resp.Markers[0].Topics {
		codes = append(codes, rt.Partitions[0].ErrorCode)
	}
	want := []int16{0, kerr.KafkaStorageError.Code, kerr.UnknownTopicOrPartition.Code, 0}
	if len(codes) != len(want) {
		t.Fatalf("codes %v", codes)
	}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("codes %v, want %v", codes, want)
		}
	}
	if m := e.parts.all(); len(m) != 1 || m[0] != (marker{tpA, 42, 3, false}) {
		t.Fatalf("markers %v", m)
	}
	if m := e.offs.allMarkers(); len(m) != 1 || m[0].pid != 42 || m[0].commit {
		t.Fatalf("offsets markers %v", m)
	}
}

// TestMetricsRegistry: metrics register on the given registry, a second
// coordinator on the same registry is refused, and Close unregisters so a
// restart on the same registry works.
func TestMetricsRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *Options) { o.Registerer = reg })
	pid, ep := e.mustInit("t", 60000)
	e.mustAdd("t", pid, ep, tpA)
	wantCode(t, "commit", e.endTxn("t", pid, ep, true, 3).ErrorCode, nil)
	e.waitState("t", "CompleteCommit")
	if _, err := NewCoordinator(e.opts); err == nil {
		t.Fatal("second coordinator on the same registry accepted")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "," + l.GetValue()
			}
			got[name] = v
		}
	}
	for name, want := range map[string]float64{
		"weir_txn_commits_total":                    1,
		"weir_txn_markers_written_total":            1,
		"weir_txn_producer_ids_allocated_total":     1,
		"weir_txn_transactional_ids,CompleteCommit": 1,
		"weir_txn_transactional_ids,Ongoing":        0,
		"weir_txn_transactional_ids,PrepareCommit":  0,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
	e.restart()
	if st := e.describe("t"); st.State != "CompleteCommit" {
		t.Fatalf("after restart %s", st.State)
	}
}
