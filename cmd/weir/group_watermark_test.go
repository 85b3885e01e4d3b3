package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// watermarkMetadata encodes a stream task's commit metadata for one source
// input as docs/format/watermark.md draws it (written here from the
// document, not with the stream library's encoder).
func watermarkMetadata(wm int64, topic string, partition int32, maxEvent int64) string {
	b := []byte{1}
	b = binary.AppendVarint(b, wm)
	b = binary.AppendUvarint(b, 1)
	b = binary.AppendUvarint(b, uint64(len(topic)))
	b = append(b, topic...)
	b = binary.AppendVarint(b, int64(partition))
	b = binary.AppendVarint(b, maxEvent)
	b = binary.AppendUvarint(b, 0) // a source: no writers
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return "weir.wm1:" + base64.RawURLEncoding.EncodeToString(b)
}

// TestGroupDescribeShowsCommittedWatermark: the watermark a stream task
// commits with its offsets is shown per partition (a malformed one as
// such), and groups of plain consumers get no WATERMARK column.
func TestGroupDescribeShowsCommittedWatermark(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "rides", "-p", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(groupTestClient(t, addr))
	wm := time.Date(2026, 12, 3, 8, 0, 0, 250e6, time.UTC).UnixMilli()
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "rides", Partition: 0, At: 0, LeaderEpoch: -1, Metadata: watermarkMetadata(wm, "rides", 0, wm+5000)})
	commit.Add(kadm.Offset{Topic: "rides", Partition: 1, At: 0, LeaderEpoch: -1, Metadata: watermarkMetadata(-1<<63, "rides", 1, -1<<63)})
	commit.Add(kadm.Offset{Topic: "rides", Partition: 2, At: 0, LeaderEpoch: -1, Metadata: "weir.wm1:AAAA"})
	if r, err := adm.CommitOffsets(ctx, "app", commit); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	plain := kadm.Offsets{}
	plain.Add(kadm.Offset{Topic: "rides", Partition: 0, At: 0, LeaderEpoch: -1, Metadata: "member-1"})
	if r, err := adm.CommitOffsets(ctx, "plain", plain); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	out := mustCLI(t, "", "group", "describe", b, "app")
	for _, re := range []string{`(?m)^TOPIC\s.*\sLAG-TIME\s+WATERMARK\s+MEMBER$`, `(?m)^rides\s+0\s.*\s2026-12-03T08:00:00.25Z\s+-$`,
		`(?m)^rides\s+1\s.*\snone\s+-$`, `(?m)^rides\s+2\s.*\smalformed\s+-$`} {
		if !regexpLine(out, re) {
			t.Fatalf("describe does not match %s:\n%s", re, out)
		}
	}
	if out := mustCLI(t, "", "group", "describe", b, "plain"); strings.Contains(out, "WATERMARK") {
		t.Fatalf("a plain consumer group has a WATERMARK column:\n%s", out)
	}

	var d struct {
		Offsets []struct {
			Partition int32 `json:"partition"`
			Watermark *struct {
				WatermarkMs    *int64 `json:"watermark_ms"`
				MaxEventTimeMs *int64 `json:"max_event_time_ms"`
			} `json:"watermark"`
			WatermarkError string `json:"watermark_error"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "group", "describe", b, "app", "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Offsets) != 3 {
		t.Fatalf("offsets: %+v", d.Offsets)
	}
	if w := d.Offsets[0].Watermark; w == nil || w.WatermarkMs == nil || *w.WatermarkMs != wm || w.MaxEventTimeMs == nil || *w.MaxEventTimeMs != wm+5000 {
		t.Fatalf("partition 0 watermark: %+v", d.Offsets[0])
	}
	if w := d.Offsets[1].Watermark; w == nil || w.WatermarkMs != nil || w.MaxEventTimeMs != nil {
		t.Fatalf("partition 1 (no watermark yet): %+v", d.Offsets[1])
	}
	if d.Offsets[2].Watermark != nil || !strings.Contains(d.Offsets[2].WatermarkError, "malformed") {
		t.Fatalf("partition 2 (malformed): %+v", d.Offsets[2])
	}
}
