package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
