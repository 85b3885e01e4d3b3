package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/weirtest"
)

// TestTopicDescribeReach: describe reports per partition the log start and
// its record's timestamp, end offset, size, retention and the replay reach,
// in text and JSON, for a delete and a compacted topic.
func TestTopicDescribeReach(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "ev", "-p", "2", "-c", "retention.ms=86400000", "-c", "retention.bytes=1073741824")
	mustCLI(t, "", "topic", "create", b, "tbl", "-p", "1", "-c", "cleanup.policy=compact")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		r := &kgo.Record{Topic: "ev", Partition: 0, Value: []byte("x"), Timestamp: first.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tbl", Key: []byte("k"), Value: []byte("v"), Timestamp: first}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "", "topic", "describe", b, "ev", "tbl", "--output", "json")
	var got []topicReach
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(got) != 2 || len(got[0].Partitions) != 2 || len(got[1].Partitions) != 1 {
		t.Fatalf("shape: %s", out)
	}
	p0, p1, c0 := got[0].Partitions[0], got[0].Partitions[1], got[1].Partitions[0]
	if p0.LogStartOffset != 0 || p0.EndOffset != 5 || p0.StartTsMillis != first.UnixMilli() || p0.SizeBytes <= 0 ||
		p0.RetentionMs != 86400000 || p0.RetentionBytes != 1<<30 || p0.CleanupPolicy != "delete" {
		t.Fatalf("ev-0: %+v", p0)
	}
	if want := "replayable from offset 0, 2026-11-23T10:00Z (retention 1d, at most 1 GiB kept)"; p0.Reach != want {
		t.Fatalf("ev-0 reach %q, want %q", p0.Reach, want)
	}
	if p1.EndOffset != 0 || p1.StartTsMillis != -1 || !strings.HasPrefix(p1.Reach, "empty") {
		t.Fatalf("ev-1: %+v", p1)
	}
	if c0.CleanupPolicy != "compact" || !strings.Contains(c0.Reach, "compacted: only the latest value per key is guaranteed before offset 1") ||
		strings.Contains(c0.Reach, "retention") {
		t.Fatalf("tbl-0: %+v", c0)
	}
	if got[1].Configs["cleanup.policy"] != "compact" {
		t.Fatalf("tbl configs: %v", got[1].Configs)
	}
	text := mustCLI(t, "", "topic", "describe", b, "ev")
	if !strings.Contains(text, "REPLAY REACH") || !strings.Contains(text, "2026-11-23T10:00:00Z") ||
		!strings.Contains(text, "replayable from offset 0, 2026-11-23T10:00Z (retention 1d") {
		t.Fatalf("text:\n%s", text)
	}
	if _, errOut, code := runCLI(t, "", "topic", "describe", b, "ev", "--output", "yaml"); code == 0 || !strings.Contains(errOut, "--output") {
		t.Fatalf("bad --output: %d %s", code, errOut)
	}
}

// TestTopicDescribeCleanerProgress: for a compacted topic describe reads the
// cleaner's checkpoint from weir's admin API: "not cleaned yet" before the
// first pass, "only the latest value per key before offset N (cleaned), full
// history from N" after it, N being what the broker computed from the data;
// an admin address that does not answer, or answers for another broker's
// topic of the same name, makes the progress "unknown" with the reason.
func TestTopicDescribeCleanerProgress(t *testing.T) {
	wb := weirtest.Start(t, weirtest.WithBrokerConfig(func(c *broker.Config) { c.CleanerInterval = 20 * time.Millisecond }))
	admin := httptest.NewServer(wb.Broker().AdminHandler())
	defer admin.Close()
	adminAddr := strings.TrimPrefix(admin.URL, "http://")
	b := "--brokers=" + wb.Addr()
	mustCLI(t, "", "topic", "create", b, "tbl", "-p", "1", "-c", "cleanup.policy=compact", "-c", "segment.bytes=1024",
		"-c", "min.cleanable.dirty.ratio=0.01")
	cl := wb.Client(kgo.DefaultProduceTopic("tbl"), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint("k", i%5)), Value: []byte(fmt.Sprint("v", i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	describe := func(args ...string) partitionReach {
		t.Helper()
		out := mustCLI(t, "", append([]string{"topic", "describe", b, "tbl", "--output", "json"}, args...)...)
		var got []topicReach
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 || len(got[0].Partitions) != 1 {
			t.Fatalf("json: %v\n%s", err, out)
		}
		return got[0].Partitions[0]
	}
	// A few records stay in the active segment, which is never cleaned.
	produce(0, 5)
	p := describe("--admin-addr", adminAddr)
	if p.Cleaner == nil || p.Cleaner.CleanedUpTo != -1 || p.Cleaner.Source != adminAddr ||
		!strings.Contains(p.Reach, "compacted: not cleaned yet, full history from offset 0") {
		t.Fatalf("before cleaning: %+v cleaner %+v", p, p.Cleaner)
	}
	// More segments: the background cleaner runs; wait (bounded) until it
	// has nothing left to do.
	produce(5, 200)
	var at broker.AdminTopic
	for deadline := time.Now().Add(15 * time.Second); ; {
		resp, err := http.Get(admin.URL + "/v1/partitions/tbl")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&at)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Settled: every closed segment cleaned (the threshold is 0.01,
		// so any dirty one would start another pass).
		if ap := at.Partitions[0]; ap.CleanedUpTo > 0 && ap.DirtyRatio == 0 && !ap.Cleaning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner never ran: %+v", at)
		}
		time.Sleep(20 * time.Millisecond)
	}
	n := at.Partitions[0].CleanedUpTo
	p = describe("--admin-addr", adminAddr)
	want := fmt.Sprintf("compacted: only the latest value per key before offset %d (cleaned), full history from %d", n, n)
	if p.Cleaner == nil || p.Cleaner.CleanedUpTo != n || p.Cleaner.LastCleanMs <= 0 || !strings.Contains(p.Reach, want) {
		t.Fatalf("after cleaning: reach %q cleaner %+v, want %q", p.Reach, p.Cleaner, want)
	}
	text := mustCLI(t, "", "topic", "describe", b, "tbl", "--admin-addr", adminAddr)
	if !strings.Contains(text, want) {
		t.Fatalf("text lacks %q:\n%s", want, text)
	}
	// Nobody there.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := strings.TrimPrefix(dead.URL, "http://")
	dead.Close()
	p = describe("--admin-addr", deadAddr)
	if p.Cleaner != nil || !strings.Contains(p.CleanerUnknown, "no weir admin API at "+deadAddr) ||
		!strings.Contains(p.Reach, "cleaner progress unknown") {
		t.Fatalf("dead admin address: %+v", p)
	}
	// Another broker with a topic of the same name: its ID differs.
	other := weirtest.Start(t, weirtest.WithTopic("tbl", 1, "cleanup.policy", "compact"))
	otherAdmin := httptest.NewServer(other.Broker().AdminHandler())
	defer otherAdmin.Close()
	p = describe("--admin-addr", strings.TrimPrefix(otherAdmin.URL, "http://"))
	if p.Cleaner != nil || !strings.Contains(p.CleanerUnknown, "serves another topic") {
		t.Fatalf("another broker's admin API: %+v", p)
	}
	if p = describe("--admin-addr", "off"); p.Cleaner != nil || !strings.Contains(p.CleanerUnknown, "not asked") {
		t.Fatalf("--admin-addr off: %+v", p)
	}
}

// TestTopicDescribeStampedMarkerAtLogStart: when the cleaner has removed a
// transaction's data and stamped its marker with a delete horizon (KIP-534:
// firstTimestamp = now + delete.retention.ms), the marker may be the first
// batch at the log start; the start timestamp is then its max timestamp,
// never the horizon in the future.
func TestTopicDescribeStampedMarkerAtLogStart(t *testing.T) {
	wb := weirtest.Start(t, weirtest.WithBrokerConfig(func(c *broker.Config) { c.CleanerInterval = 20 * time.Millisecond }))
	b := "--brokers=" + wb.Addr()
	mustCLI(t, "", "topic", "create", b, "tx", "-p", "1", "-c", "cleanup.policy=compact", "-c", "segment.bytes=1024",
		"-c", "min.cleanable.dirty.ratio=0.01", "-c", "delete.retention.ms=86400000")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := time.Now().Add(-time.Second)
	p := wb.Client(kgo.TransactionalID("stamp"), kgo.DefaultProduceTopic("tx"))
	// Two transactions: the first's data (k) is overwritten below; the
	// second (other) stays, so the first's batch is not its producer's
	// last one (that one would be kept, empty, with its marker).
	for _, key := range []string{"k", "other"} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte("txn")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	plain := wb.Client(kgo.DefaultProduceTopic("tx"), kgo.ProducerLinger(0))
	details, err := wb.Admin().ListTopics(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	topicIDOf := details["tx"].ID // franz-go sends Fetch v13+ (topics by ID)
	first := func() kmsg.RecordBatch {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "tx", topicIDOf
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kr, err := req.RequestWith(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		if len(kr.Topics) != 1 || len(kr.Topics[0].Partitions) != 1 || kr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch: %+v", kr)
		}
		var rb kmsg.RecordBatch
		if recs := kr.Topics[0].Partitions[0].RecordBatches; len(recs) > 0 {
			if err := rb.ReadFrom(recs); err != nil {
				t.Fatal(err)
			}
		}
		return rb
	}
	// Overwrite k until two passes have run: the first removes the data,
	// the second stamps the marker (bounded wait).
	var rb kmsg.RecordBatch
	for i, deadline := 0, time.Now().Add(15*time.Second); ; i++ {
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if rb = first(); rb.Attributes&0x60 == 0x60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the marker was never stamped; first batch %+v", rb)
		}
	}
	if rb.FirstTimestamp < time.Now().Add(23*time.Hour).UnixMilli() {
		t.Fatalf("stamped marker's firstTimestamp %d is not the delete horizon", rb.FirstTimestamp)
	}
	out := mustCLI(t, "", "topic", "describe", b, "tx", "--output", "json", "--admin-addr", "off")
	var got []topicReach
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		t.Fatalf("json: %v\n%s", err, out)
	}
	pr := got[0].Partitions[0]
	if pr.LogStartOffset != 0 || pr.StartTsMillis < before.UnixMilli() || pr.StartTsMillis > time.Now().UnixMilli() {
		t.Fatalf("log start timestamp %d (%s), want the marker's time, between %d and now", pr.StartTsMillis, pr.StartTimestamp, before.UnixMilli())
	}
}

// Issue 18 defect 4: describe knows every partition's log start time, not
// only the first non-empty one's (one Fetch with PartitionMaxBytes=1 is only
// guaranteed to return the first partition's batch, KIP-74).
func TestTopicDescribeReachEveryPartition(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	const parts = 5
	mustCLI(t, "", "topic", "create", b, "wide", "-p", fmt.Sprint(parts))
	cl := groupTestClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for p := range int32(parts) {
		for i := range 3 {
			r := &kgo.Record{Topic: "wide", Partition: p, Value: []byte(strings.Repeat("v", 100)),
				Timestamp: first.Add(time.Duration(p)*time.Hour + time.Duration(i)*time.Minute)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := mustCLI(t, "", "topic", "describe", b, "wide", "-o", "json")
	var got []topicReach
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(got) != 1 || len(got[0].Partitions) != parts {
		t.Fatalf("shape: %s", out)
	}
	for _, pr := range got[0].Partitions {
		want := first.Add(time.Duration(pr.Partition) * time.Hour)
		if pr.StartTsMillis != want.UnixMilli() || pr.Error != "" {
			t.Errorf("partition %d: log start time %d (%s), want %d (%s); error %q", pr.Partition, pr.StartTsMillis, pr.StartTimestamp, want.UnixMilli(), want.Format(time.RFC3339), pr.Error)
		}
	}
}
