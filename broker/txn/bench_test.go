package txn

import (
	"context"
	"fmt"
	"testing"
	"time"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
)

// BenchmarkTxnCycle measures the coordinator's cost of one transaction
// (implicit add of 2 partitions, EndTxn v5 commit, markers, Complete), on
// the storage engine with real fsyncs, against the baseline of one durable
// append of a state record to the same log in the same run. The cycle does
// 3 durable state appends (Ongoing, PrepareCommit, CompleteCommit), so a
// ratio near 3 means the coordinator adds nothing beyond its fsyncs.
// Markers go to a fake partition (their fsync is the data log's cost).
func BenchmarkTxnCycle(b *testing.B) {
	open := func(b *testing.B) *wlog.Log {
		l, err := wlog.Open(wlog.Options{FS: vfs.Default, Dir: b.TempDir(), Config: wlog.Config{Compact: true}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l
	}
	b.Run("baseline-append", func(b *testing.B) {
		s := WrapLog(open(b))
		d := txnData{producerID: 1, epoch: 1, state: stateOngoing, parts: map[TopicPartition]struct{}{tpA: {}, tpB: {}}}
		batch := buildBatch([]kv{{Key: txnKey("bench"), Value: txnValue(&d)}}, 0)
		for b.Loop() {
			if _, err := s.Append(batch, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("txn-cycle", func(b *testing.B) {
		parts := newFakeParts(tpA, tpB)
		parts.written = make(chan marker, 1<<20)
		c, err := NewCoordinator(Options{State: WrapLog(open(b)), Partitions: parts})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		e := &env{t: &testing.T{}, c: c}
		r := e.initPID(strp("bench"), 60000, -1, -1, 4)
		pid, ep := r.ProducerID, r.ProducerEpoch
		var tv, te, tw time.Duration
		for b.Loop() {
			t0 := time.Now()
			codes, release, err := c.Verify(ctx, "bench", pid, ep, []TopicPartition{tpA, tpB}, true)
			if err != nil || codes[0] != 0 || codes[1] != 0 {
				b.Fatalf("verify %v %v", codes, err)
			}
			release()
			t1 := time.Now()
			resp := e.endTxn("bench", pid, ep, true, 5)
			t2 := time.Now()
			if resp.ErrorCode != 0 {
				b.Fatalf("end %d", resp.ErrorCode)
			}
			ep = resp.ProducerEpoch
			// The next transaction's implicit add waits for completion.
			for !e.idle("bench") {
				time.Sleep(20 * time.Microsecond)
			}
			tv += t1.Sub(t0)
			te += t2.Sub(t1)
			tw += time.Since(t2)
		}
		b.ReportMetric(float64(tv.Microseconds())/float64(b.N), "verify-us/op")
		b.ReportMetric(float64(te.Microseconds())/float64(b.N), "end-us/op")
		b.ReportMetric(float64(tw.Microseconds())/float64(b.N), "complete-us/op")
	})
}

// BenchmarkReplay measures NewCoordinator's replay of a state log holding
// 100k transaction records (what ~9 hours of one commit per second per
// producer looks like before compaction), on the storage engine over an
// in-memory file system. Reported as records/s.
func BenchmarkReplay(b *testing.B) {
	const records = 100_000
	fs := vfs.NewCrashableMem()
	l, err := wlog.Open(wlog.Options{FS: fs, Dir: "s", Config: wlog.Config{Compact: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var buf []byte
	for i := 0; i < records; i++ {
		d := txnData{producerID: int64(i % 1000), prevProducerID: -1, nextProducerID: -1, epoch: int16(i / 1000),
			timeoutMs: 60000, state: txnState(i % 3), parts: map[TopicPartition]struct{}{tpA: {}, tpB: {}}, startMs: 1}
		if d.state == stateOngoing || d.state == statePrepareCommit {
			d.state = stateCompleteCommit // nothing to complete after the replay
		}
		buf = append(buf, buildBatch([]kv{{Key: txnKey(fmt.Sprintf("id-%d", i%1000)), Value: txnValue(&d)}}, 0)...)
		if len(buf) > 1<<20 || i == records-1 {
			if _, err := l.Append(buf, true); err != nil {
				b.Fatal(err)
			}
			buf = buf[:0]
		}
	}
	for b.Loop() {
		c, err := NewCoordinator(Options{State: WrapLog(l), Partitions: newFakeParts()})
		if err != nil {
			b.Fatal(err)
		}
		if len(c.txns) != 1000 {
			b.Fatalf("%d ids", len(c.txns))
		}
		c.Close()
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
