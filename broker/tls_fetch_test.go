package broker

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch over TLS writes its record sets through crypto/tls and the
// gathering tlsWire; over PLAINTEXT with one writev. These tests hold the
// TLS path to the PLAINTEXT one, byte for byte, and to the lifetime of the
// segments it read (a way of writing TLS responses that reads the log
// later, as tried for issue 20 in docs/bench/tls.md, must pass them too).

// dialRawTLS is a raw connection to a TLS listener of e's broker. rcvBuf
// > 0 sets the socket's receive buffer (small: the broker's write of a
// large response blocks until the test reads).
func dialRawTLS(t *testing.T, e *secEnv, listener string, rcvBuf int) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", e.b.ListenerAddr(listener), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rcvBuf > 0 {
		if err := nc.(*net.TCPConn).SetReadBuffer(rcvBuf); err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.ca.ClientTLS(nil)
	cfg.ServerName = "localhost"
	tc := tls.Client(nc, cfg)
	_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	return &rawConn{t: t, nc: tc}
}

// dialRawListener is a raw PLAINTEXT connection to the named listener.
func dialRawListener(t *testing.T, e *secEnv, listener string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", e.b.ListenerAddr(listener), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// tlsFetchTopic creates topic with configs and returns its ID.
func tlsFetchTopic(t *testing.T, adm *kadm.Client, topic string, parts int32, configs map[string]*string) [16]byte {
	t.Helper()
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, parts, 1, configs, topic); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return td[topic].ID
}

// tlsFetchReq is a sessionless Fetch of version v of the given partitions
// from the given offsets, answering at once.
func tlsFetchReq(v int16, topic string, id [16]byte, offsets []int64, partMax []int32, maxBytes int32, isolation int8) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = maxBytes
	req.IsolationLevel = isolation
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	for p, off := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rp.FetchOffset = off
		rp.PartitionMaxBytes = partMax[p]
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestFetchOverTLSMatchesPlaintext: 200 random Fetch requests (versions 4 to
// the newest, both isolation levels, offsets anywhere in the log, limits
// from one byte to no limit) over the SSL listener answer exactly what the
// PLAINTEXT listener answers: the same record bytes (across small
// segments with a small index interval, compressed and not, batches of
// one to five records of 10 B to 70 KB), the same aborted transactions and
// offsets.
func TestFetchOverTLSMatchesPlaintext(t *testing.T) {
	e := newSecEnv(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(e.client(t, "PLAINTEXT", nil))
	const topic, parts = "tls-match", 3
	id := tlsFetchTopic(t, adm, topic, parts, map[string]*string{
		"segment.bytes": kmsg.StringPtr("200000"), "index.interval.bytes": kmsg.StringPtr("1024"),
	})
	rng := rand.New(rand.NewPCG(7, 8))
	prod := e.client(t, "PLAINTEXT", nil, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression(), kgo.SnappyCompression()))
	for i := range 250 {
		size := []int{10, 300, 3000, 20000, 70000}[rng.IntN(5)]
		v := bytes.Repeat([]byte{byte(i)}, size)
		n := 1 + rng.IntN(5) // several records to a batch at times
		rs := make([]*kgo.Record, n)
		p := int32(rng.IntN(parts))
		for j := range rs {
			rs[j] = &kgo.Record{Topic: topic, Partition: p, Value: v}
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Aborted and committed transactions in partition 0.
	txn := e.client(t, "PLAINTEXT", nil, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("tls-txn"))
	for _, commit := range []bool{false, true, false} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: bytes.Repeat([]byte("t"), 5000)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var hw [parts]int64
	ends.Each(func(o kadm.ListedOffset) { hw[o.Partition] = o.Offset })

	plain := dialRawListener(t, e, "PLAINTEXT")
	secure := dialRawTLS(t, e, "MTLS", 0)
	versions := []int16{4, 7, 11, 12, 13, 16, kmsg.NewPtrFetchRequest().MaxVersion()}
	withRecords := 0
	for i := range 200 {
		offsets := make([]int64, parts)
		partMax := make([]int32, parts)
		for p := range offsets {
			offsets[p] = rng.Int64N(hw[p] + 1)
			partMax[p] = []int32{1, 5000, 100000, 1 << 20, 50 << 20}[rng.IntN(5)]
		}
		maxBytes := []int32{1, 150000, 600000, 50 << 20}[rng.IntN(4)]
		v := versions[rng.IntN(len(versions))]
		req := tlsFetchReq(v, topic, id, offsets, partMax, maxBytes, int8(rng.IntN(2)))
		corr := int32(i + 1)
		want := plain.roundTrip(req, corr).(*kmsg.FetchResponse)
		got := secure.roundTrip(req, corr).(*kmsg.FetchResponse)
		want.ThrottleMillis, got.ThrottleMillis = 0, 0
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("fetch %d (v%d, offsets %v, partition max %v, max %d, isolation %d): TLS answer differs from PLAINTEXT's\nTLS:       %s\nPLAINTEXT: %s",
				i, v, offsets, partMax, maxBytes, req.IsolationLevel, fetchSummary(got), fetchSummary(want))
		}
		for _, rt := range got.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("fetch %d: partition %d error %d", i, rp.Partition, rp.ErrorCode)
				}
				if len(rp.RecordBatches) > 0 {
					withRecords++
				}
			}
		}
	}
	if withRecords < 200 {
		t.Fatalf("only %d partitions answered with records", withRecords)
	}
}

// fetchSummary describes a response's partitions for a failure message.
func fetchSummary(r *kmsg.FetchResponse) string {
	var b bytes.Buffer
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			fmt.Fprintf(&b, "[p%d err %d hw %d lso %d start %d aborted %d bytes %d] ", rp.Partition, rp.ErrorCode,
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset, len(rp.AbortedTransactions), len(rp.RecordBatches))
		}
	}
	return b.String()
}

// TestFetchOverTLSOutlivesItsSegments: the segments a Fetch response over
// TLS was read from deleted (by DeleteRecords, by the topic's deletion, or
// swapped by the cleaner) after the handler answered and while the client
// has not read most of the response, it still arrives whole and byte for
// byte what a PLAINTEXT fetch read before the deletion, and a deleted
// segment's file goes once the response is written.
func TestFetchOverTLSOutlivesItsSegments(t *testing.T) {
	for _, how := range []string{"delete-records", "delete-topic", "compaction"} {
		t.Run(how, func(t *testing.T) {
			e := newSecEnv(t)
			ctx := testCtx(t)
			adm := kadm.NewClient(e.client(t, "PLAINTEXT", nil))
			topic, parts := "tls-"+how, 4
			cfgs := map[string]*string{"segment.bytes": kmsg.StringPtr("2097152")} // a read stays within a segment
			if how == "compaction" {
				cfgs["cleanup.policy"] = kmsg.StringPtr("compact")
			}
			id := tlsFetchTopic(t, adm, topic, int32(parts), cfgs)
			prod := e.client(t, "PLAINTEXT", nil, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
			var rs []*kgo.Record
			for i := range 400 { // 4 partitions x 3 MB
				rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % parts),
					Key: fmt.Appendf(nil, "k%d", i%8), Value: bytes.Repeat([]byte{byte(i)}, 30000)})
			}
			if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			offsets := make([]int64, parts)
			partMax := make([]int32, parts)
			for p := range partMax {
				partMax[p] = 50 << 20
			}
			req := tlsFetchReq(kmsg.NewPtrFetchRequest().MaxVersion(), topic, id, offsets, partMax, 100<<20, 0)
			want := dialRawListener(t, e, "PLAINTEXT").roundTrip(req, 1).(*kmsg.FetchResponse)
			var total int
			for _, rp := range want.Topics[0].Partitions {
				total += len(rp.RecordBatches)
			}
			if total < 6<<20 {
				t.Fatalf("reference fetch read %d bytes", total)
			}

			// The handler is done once the response's bytes are
			// counted; the client reads nothing yet, so the write blocks
			// after a few socket buffers' worth.
			before := fetchedBytes(t, e.b)
			secure := dialRawTLS(t, e, "MTLS", 32<<10)
			secure.send(req, 2)
			for fetchedBytes(t, e.b) < before+float64(total) {
				if ctx.Err() != nil {
					t.Fatal("the TLS fetch was never answered")
				}
				time.Sleep(time.Millisecond)
			}
			dir := filepath.Join(logsDir(e.cfg.DataDir), topic+"-0")
			first := filepath.Join(dir, "00000000000000000000.log")
			if _, err := os.Stat(first); err != nil {
				t.Fatalf("first segment: %v", err)
			}
			switch how {
			case "delete-records":
				res, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: -1}, 1: {At: -1}, 2: {At: -1}, 3: {At: -1}}})
				if err != nil || res.Error() != nil {
					t.Fatalf("delete records: %v %v", err, res.Error())
				}
				// Out of the log (its file goes once no reader holds
				// it, checked below).
				tp, _ := e.b.topics.get(topic)
				if l, _ := tp.partition(0); l.LogStartOffset() != want.Topics[0].Partitions[0].HighWatermark {
					t.Fatalf("log start %d after DeleteRecords", l.LogStartOffset())
				}
			case "delete-topic":
				res, err := adm.DeleteTopics(ctx, topic)
				if err != nil || res.Error() != nil {
					t.Fatalf("delete topic: %v %v", err, res.Error())
				}
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Fatalf("partition directory still there after DeleteTopics: %v", err)
				}
			case "compaction":
				fi, _ := os.Stat(first)
				if n, err := e.b.logs.Clean(true); err != nil || n == 0 {
					t.Fatalf("clean: %d %v", n, err)
				}
				if fi2, err := os.Stat(first); err == nil && os.SameFile(fi, fi2) {
					t.Fatal("first segment not replaced by the cleaner")
				}
			}
			got := secure.readResp(req, 2).(*kmsg.FetchResponse)
			want.ThrottleMillis, got.ThrottleMillis = 0, 0
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("TLS answer after %s differs from the PLAINTEXT one before it\nTLS:       %s\nPLAINTEXT: %s", how, fetchSummary(got), fetchSummary(want))
			}
			if how == "delete-records" {
				// No reader holds it once the response is written.
				for _, err := os.Stat(first); err == nil; _, err = os.Stat(first) {
					if ctx.Err() != nil {
						t.Fatal("the deleted segment's file stayed after the response was written")
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
}

// fetchedBytes is the broker's fetched-bytes counter.
func fetchedBytes(t *testing.T, b *Broker) float64 {
	t.Helper()
	var m dto.Metric
	if err := b.metrics.fetchedBytes.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
