package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// markerValue encodes a watermark marker header value as
// docs/format/watermark.md draws it (written here from the document, not
// with the stream library's encoder).
func markerValue(writer, writers uint32, wm int64, idle bool) []byte {
	b := []byte{1, 0}
	if idle {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint32(b, writer)
	b = binary.BigEndian.AppendUint32(b, writers)
	return binary.BigEndian.AppendUint64(b, uint64(wm))
}

// TestConsumeShowsMarkersAsMarkers: a repartition topic's watermark
// markers are printed as markers in every format (a malformed one too),
// never as empty data records, or left out with --markers skip.
func TestConsumeShowsMarkersAsMarkers(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "rep", "-p", "1")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Topic: "rep", Key: []byte("k"), Value: []byte("data"), Timestamp: at},
		&kgo.Record{Topic: "rep", Headers: []kgo.RecordHeader{{Key: "weir.wm", Value: markerValue(3, 12, at.UnixMilli(), false)}}},
		&kgo.Record{Topic: "rep", Headers: []kgo.RecordHeader{{Key: "weir.wm", Value: markerValue(0, 1, -1<<63, true)}}},
		&kgo.Record{Topic: "rep", Headers: []kgo.RecordHeader{{Key: "weir.wm", Value: []byte{9}}}},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	out := mustCLI(t, "", "consume", b, "rep", "-e")
	want := "data\n" +
		"# marker rep/0@1 writer 3/12 watermark 2026-12-02T00:00:00Z\n" +
		"# marker rep/0@2 writer 0/1 watermark none idle\n" +
		"# marker rep/0@3 malformed: watermark: malformed marker: 1 bytes, want 18\n"
	if out != want {
		t.Fatalf("value format:\n%s\nwant:\n%s", out, want)
	}
	if out := mustCLI(t, "", "consume", b, "rep", "-e", "-F", "%o %s\n"); !strings.HasPrefix(out, "0 data\n# marker rep/0@1 writer 3/12") {
		t.Fatalf("-F format:\n%s", out)
	}
	if out := mustCLI(t, "", "consume", b, "rep", "-e", "--markers", "skip", "-f", "kv"); out != "k:data\n" {
		t.Fatalf("--markers skip:\n%q", out)
	}
	lines := strings.Split(strings.TrimSpace(mustCLI(t, "", "consume", b, "rep", "-e", "-f", "json")), "\n")
	if len(lines) != 4 {
		t.Fatalf("json: %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	var m struct {
		Offset int64           `json:"offset"`
		Key    json.RawMessage `json:"key"`
		Value  json.RawMessage `json:"value"`
		Marker *struct {
			Writer, Writers uint32
			Watermark       *int64 `json:"watermark"`
			WatermarkTime   string `json:"watermark_time"`
		} `json:"marker"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil {
		t.Fatal(err)
	}
	if m.Marker == nil || m.Key != nil || m.Value != nil || m.Marker.Writer != 3 || m.Marker.Writers != 12 ||
		m.Marker.Watermark == nil || *m.Marker.Watermark != at.UnixMilli() || m.Marker.WatermarkTime != "2026-12-02T00:00:00Z" {
		t.Fatalf("json marker: %s", lines[1])
	}
	if _, _, code := runCLI(t, "", "consume", b, "rep", "-e", "--markers", "hide"); code == 0 {
		t.Fatal("--markers hide accepted")
	}
}
