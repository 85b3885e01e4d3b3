package txn

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Data-driven scripts (github.com/cockroachdb/datadriven) for the
// transaction state machine, testdata/*.txt: requests and clock ticks in,
// responses, the records written to the state log and the markers written
// to partitions out. A block is one or more commands, "----", then the
// expected output. A producer is named by its transactional id; the
// script remembers the producer id and epoch of its last InitProducerId
// and uses them unless pid= or epoch= says otherwise.
//
//	init T [timeout=MS] [v=N] [pid=N epoch=N]   InitProducerId (v4)
//	add T a:0 b:1 [v=N]                         AddPartitionsToTxn (v3)
//	produce T a:0 [implicit]                    a produce's verification (Verify)
//	add-offsets T GROUP                         AddOffsetsToTxn (v3)
//	txn-commit T GROUP [v=N]                    TxnOffsetCommit (v3)
//	end T commit|abort [v=N]                    EndTxn (v3; v5 is transaction version 2)
//	describe T
//	advance DURATION                            move the fake clock, then Tick
//	gate a:0 / open a:0                         hold / release marker writes to a:0
//	settle                                      wait until no transition or marker job is in flight
//	records                                     state records appended since the last "records"
//	markers                                     markers written since the last "markers"
//	restart                                     a new coordinator replays the state log
//
// Every request also takes pid= and epoch=. Topics: a:0, b:1, c:0 exist.
// EndTxn is answered at the prepare (Kafka's behaviour); "settle" waits
// for the markers and the Complete record. Rewrite the expected outputs
// with: go test ./broker/txn -run Scripts -rewrite

type txnScript struct {
	e       *env
	pids    map[string]int64
	epochs  map[string]int16
	gates   map[TopicPartition]func()
	logged  int // state batches already printed
	markers int // partition markers already printed
	offMark int // offsets-partition markers already printed
}

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			s := &txnScript{e: newEnv(t), pids: map[string]int64{}, epochs: map[string]int16{}, gates: map[TopicPartition]func(){}}
			t.Cleanup(func() {
				for _, open := range s.gates {
					open()
				}
			})
			datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
				lines := []string{d.FullCmd()}
				if d.Input != "" {
					lines = append(lines, strings.Split(d.Input, "\n")...)
				}
				var out []string
				for _, line := range lines {
					out = append(out, s.run(t, line))
				}
				return strings.Join(out, "\n") + "\n"
			})
		})
	}
}

func (s *txnScript) run(t *testing.T, line string) string {
	f := strings.Fields(line)
	a := map[string]string{}
	var parts []TopicPartition
	for _, x := range f[1:] {
		if k, v, ok := strings.Cut(x, "="); ok {
			a[k] = v
		} else if name, p, ok := strings.Cut(x, ":"); ok {
			parts = append(parts, TopicPartition{name, int32(num(t, p))})
		}
	}
	id := ""
	if len(f) > 1 {
		id = f[1]
	}
	pid, epoch := s.pids[id], s.epochs[id]
	if x, ok := a["pid"]; ok {
		pid = int64(num(t, x))
	}
	if x, ok := a["epoch"]; ok {
		epoch = int16(num(t, x))
	}
	version := func(def int16) int16 {
		if x, ok := a["v"]; ok {
			return int16(num(t, x))
		}
		return def
	}
	switch f[0] {
	case "init":
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = version(4)
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 60000
		if x, ok := a["timeout"]; ok {
			req.TransactionTimeoutMillis = int32(num(t, x))
		}
		req.ProducerID, req.ProducerEpoch = -1, -1
		if _, ok := a["pid"]; ok {
			req.ProducerID, req.ProducerEpoch = pid, epoch
		}
		r := s.e.do(req).(*kmsg.InitProducerIDResponse)
		if r.ErrorCode != 0 {
			return fmt.Sprintf("%s: init %s", id, code(r.ErrorCode))
		}
		s.pids[id], s.epochs[id] = r.ProducerID, r.ProducerEpoch
		return fmt.Sprintf("%s: init pid=%d epoch=%d", id, r.ProducerID, r.ProducerEpoch)
	case "add":
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = version(3)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		for _, tp := range parts {
			req.Topics = append(req.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
		}
		r := s.e.do(req).(*kmsg.AddPartitionsToTxnResponse)
		var out []string
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s:%d=%s", rt.Topic, rp.Partition, code(rp.ErrorCode)))
			}
		}
		return fmt.Sprintf("%s: add %s", id, strings.Join(out, " "))
	case "produce":
		codes, release, err := s.e.c.Verify(context.Background(), id, pid, epoch, parts, slices.Contains(f, "implicit"))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		release()
		var out []string
		for i, tp := range parts {
			out = append(out, fmt.Sprintf("%s:%d=%s", tp.Topic, tp.Partition, code(codes[i])))
		}
		return fmt.Sprintf("%s: produce %s", id, strings.Join(out, " "))
	case "add-offsets":
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.Version = version(3)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, f[2]
		r := s.e.do(req).(*kmsg.AddOffsetsToTxnResponse)
		return fmt.Sprintf("%s: add-offsets %s", id, code(r.ErrorCode))
	case "txn-commit":
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = version(3)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, f[2]
		req.Generation = -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42}}}}
		r := s.e.do(req).(*kmsg.TxnOffsetCommitResponse)
		return fmt.Sprintf("%s: txn-commit %s", id, code(r.Topics[0].Partitions[0].ErrorCode))
	case "end":
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = version(3)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		req.Commit = f[2] == "commit"
		r := s.e.do(req).(*kmsg.EndTxnResponse)
		if r.ErrorCode != 0 {
			return fmt.Sprintf("%s: end %s %s", id, f[2], code(r.ErrorCode))
		}
		out := fmt.Sprintf("%s: end %s OK", id, f[2])
		if req.Version >= 5 {
			// Transaction version 2: every EndTxn bumps the epoch.
			s.pids[id], s.epochs[id] = r.ProducerID, r.ProducerEpoch
			out += fmt.Sprintf(" pid=%d epoch=%d", r.ProducerID, r.ProducerEpoch)
		}
		return out
	case "describe":
		st := s.e.describe(id)
		if st.ErrorCode != 0 {
			return fmt.Sprintf("%s: describe %s", id, code(st.ErrorCode))
		}
		var ps []string
		for _, tt := range st.Topics {
			for _, p := range tt.Partitions {
				ps = append(ps, fmt.Sprintf("%s:%d", tt.Topic, p))
			}
		}
		slices.Sort(ps)
		return fmt.Sprintf("%s: %s pid=%d epoch=%d timeout=%dms parts=[%s]", id, st.State, st.ProducerID, st.ProducerEpoch, st.TimeoutMillis, strings.Join(ps, " "))
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			t.Fatal(err)
		}
		s.e.clock.Advance(d)
		s.e.c.Tick()
		return "ok"
	case "gate":
		for _, tp := range parts {
			s.gates[tp] = s.e.parts.gate(tp)
		}
		return "ok"
	case "open":
		for _, tp := range parts {
			if open := s.gates[tp]; open != nil {
				open()
				delete(s.gates, tp)
			}
		}
		return "ok"
	case "settle":
		s.settle(t)
		return "ok"
	case "records":
		return s.records(t)
	case "markers":
		return s.newMarkers()
	case "restart":
		s.e.restart()
		return "ok"
	}
	t.Fatalf("unknown command %q", line)
	return ""
}

// settle waits (bounded) until no transactional id has a transition or a
// marker job in flight: marker writes run on their own goroutines.
func (s *txnScript) settle(t *testing.T) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := false
		if err := s.e.c.do(context.Background(), func() {
			for _, m := range s.e.c.txns {
				if m.pending != nil || m.markers != nil {
					busy = true
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("transactions did not settle")
		}
		time.Sleep(time.Millisecond)
	}
}

// records prints the state records appended since the last call, one per
// line.
func (s *txnScript) records(t *testing.T) string {
	st := s.e.state.(*memState)
	st.mu.Lock()
	batches := slices.Clone(st.batches[s.logged:])
	s.logged = len(st.batches)
	st.mu.Unlock()
	var out []string
	for _, b := range batches {
		_, _, err := forEachRecord(b, func(_ int64, key, value []byte) error {
			rec, ok, err := decodeRecord(key, value)
			switch {
			case err != nil:
				return err
			case !ok:
				out = append(out, "unknown record")
			case rec.pidBlockEnd > 0:
				out = append(out, fmt.Sprintf("producer-id-block end=%d", rec.pidBlockEnd))
			case rec.tombstone:
				out = append(out, rec.txnID+" tombstone")
			default:
				d := rec.data
				var ps []string
				for _, tp := range d.sortedParts() {
					ps = append(ps, fmt.Sprintf("%s:%d", tp.Topic, tp.Partition))
				}
				out = append(out, fmt.Sprintf("%s %s pid=%d epoch=%d parts=[%s]", rec.txnID, d.state, d.producerID, d.epoch, strings.Join(ps, " ")))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "\n")
}

// newMarkers prints the markers written since the last call: to data
// partitions (in an order that does not depend on goroutine scheduling)
// and to the group coordinator's offsets partition.
func (s *txnScript) newMarkers() string {
	all := s.e.parts.all()
	ms := all[s.markers:]
	s.markers = len(all)
	offs := s.e.offs.allMarkers()
	ms = append(ms, offs[s.offMark:]...)
	s.offMark = len(offs)
	var out []string
	for _, m := range ms {
		kind := "ABORT"
		if m.commit {
			kind = "COMMIT"
		}
		out = append(out, fmt.Sprintf("marker %s:%d %s pid=%d epoch=%d", m.tp.Topic, m.tp.Partition, kind, m.pid, m.epoch))
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "\n")
}

func code(c int16) string {
	if c == 0 {
		return "OK"
	}
	if e, ok := kerr.ErrorForCode(c).(*kerr.Error); ok {
		return e.Message
	}
	return strconv.Itoa(int(c))
}

func num(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}
