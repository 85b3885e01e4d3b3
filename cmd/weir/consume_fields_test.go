package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// be64 is v as 8 big-endian bytes (Kafka's LongSerializer, and the times in
// windowed keys), written out here rather than with the stream library.
func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// TestConsumeWindowedKeysAndNumbers: the bytes a Kafka Streams windowed
// count writes (windowed keys, int64 counts) are shown decoded in the kv,
// -F and json formats, and bytes that do not decode are shown, not
// dropped.
func TestConsumeWindowedKeysAndNumbers(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "demand", "-p", "1")
	mustCLI(t, "", "topic", "create", b, "sessions", "-p", "1")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := time.Date(2026, 12, 3, 7, 54, 0, 0, time.UTC)
	end := start.Add(20 * time.Minute)
	sessionKey := append(append([]byte("ann"), be64(end.UnixMilli())...), be64(start.UnixMilli())...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Topic: "demand", Key: append([]byte("airport"), be64(start.UnixMilli())...), Value: be64(39)},
		&kgo.Record{Topic: "demand", Key: []byte("abc"), Value: []byte{1, 2, 3}},
		&kgo.Record{Topic: "demand", Key: append([]byte("harbor"), be64(start.UnixMilli())...), Value: nil},
		&kgo.Record{Topic: "sessions", Key: sessionKey, Value: be64(-2)},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	out := mustCLI(t, "", "consume", b, "demand", "-e", "-f", "kv", "--key-format", "windowed:string", "--value-format", "int64")
	want := "airport@2026-12-03T07:54:00Z:39\n" +
		"<not windowed:string: 0x616263>:<not int64: 0x010203>\n" +
		"harbor@2026-12-03T07:54:00Z:\n"
	if out != want {
		t.Fatalf("kv:\n%s\nwant:\n%s", out, want)
	}
	out = mustCLI(t, "", "consume", b, "sessions", "-e", "-F", "%k=%s (%K %S)", "--key-format", "session:string", "--value-format", "int64")
	if want := "ann@2026-12-03T07:54:00Z/2026-12-03T08:14:00Z=-2 (19 8)\n"; out != want {
		t.Fatalf("-F:\n%s\nwant:\n%s", out, want)
	}

	lines := strings.Split(strings.TrimSpace(mustCLI(t, "", "consume", b, "demand", "-e", "-f", "json",
		"--key-format", "windowed:string", "--value-format", "int64")), "\n")
	if len(lines) != 3 {
		t.Fatalf("json: %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	var good struct {
		Key struct {
			Key       string `json:"key"`
			Start     int64  `json:"start"`
			StartTime string `json:"start_time"`
		} `json:"key"`
		Value int64 `json:"value"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &good); err != nil {
		t.Fatal(err)
	}
	if good.Key.Key != "airport" || good.Key.Start != start.UnixMilli() || good.Key.StartTime != "2026-12-03T07:54:00Z" || good.Value != 39 {
		t.Fatalf("json record: %s", lines[0])
	}
	var bad map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &bad); err != nil {
		t.Fatal(err)
	}
	if bad["key"] != nil || bad["key_base64"] != "YWJj" || !strings.Contains(bad["key_error"].(string), "shorter than its window") ||
		bad["value"] != nil || bad["value_base64"] != "AQID" || bad["value_error"] != "int64: want 8 bytes, got 3" {
		t.Fatalf("undecodable record in json: %s", lines[1])
	}
	var null map[string]any
	if err := json.Unmarshal([]byte(lines[2]), &null); err != nil {
		t.Fatal(err)
	}
	if v, ok := null["value"]; !ok || v != nil || null["value_error"] != nil {
		t.Fatalf("a null value is null whatever the format: %s", lines[2])
	}

	// The default shows the bytes as they are, as before.
	if out := mustCLI(t, "", "consume", b, "sessions", "-e", "-f", "kv"); out != string(sessionKey)+":"+string(be64(-2))+"\n" {
		t.Fatalf("default format changed the bytes: %q", out)
	}
}

func TestFieldFormatNumbers(t *testing.T) {
	f32 := binary.BigEndian.AppendUint32(nil, math.Float32bits(1.5))
	for _, c := range []struct {
		format string
		in     []byte
		text   string
		json   string
	}{
		{"int32", []byte{0xff, 0xff, 0xff, 0xfe}, "-2", "-2"},
		{"int16", []byte{0x01, 0x00}, "256", "256"},
		{"float64", binary.BigEndian.AppendUint64(nil, math.Float64bits(-0.25)), "-0.25", "-0.25"},
		{"float32", f32, "1.5", "1.5"},
		{"float64", binary.BigEndian.AppendUint64(nil, math.Float64bits(math.NaN())), "NaN", `"NaN"`},
		{"json", []byte(`{"zone": "a"}`), `{"zone": "a"}`, `{"zone":"a"}`},
		{"json", []byte(`{"zone"`), "<not json: 0x7b227a6f6e6522>", "null"},
		{"windowed:int64", append(be64(7), be64(0)...), "7@1970-01-01T00:00:00Z", `{"key":7,"start":0,"start_time":"1970-01-01T00:00:00Z"}`},
		{"windowed:int64", append([]byte{1}, be64(0)...), "<not windowed:int64: 0x010000000000000000>", "null"},
		{"session:bytes", append([]byte{0xff}, append(be64(5), be64(1)...)...), "\xff@1970-01-01T00:00:00.001Z/1970-01-01T00:00:00.005Z",
			`{"key":null,"key_base64":"/w==","start":1,"start_time":"1970-01-01T00:00:00.001Z","end":5,"end_time":"1970-01-01T00:00:00.005Z"}`},
		{"session:string", append([]byte("k"), append(be64(1), be64(5)...)...), "<not session:string: 0x6b00000000000000010000000000000005>", "null"},
	} {
		f, err := parseFieldFormat("value-format", c.format)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(f.appendText(nil, c.in)); got != c.text {
			t.Errorf("%s %x: text %q, want %q", c.format, c.in, got, c.text)
		}
		v, _, _ := f.jsonField(c.in)
		got, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s %x: %v", c.format, c.in, err)
		}
		if string(got) != c.json {
			t.Errorf("%s %x: json %s, want %s", c.format, c.in, got, c.json)
		}
	}
}

func TestParseFieldFormatErrors(t *testing.T) {
	for _, s := range []string{"", "long", "int64:string", "windowed:", "windowed:windowed:string", "session:nope"} {
		if _, err := parseFieldFormat("key-format", s); err == nil {
			t.Errorf("%q parsed", s)
		} else if !strings.Contains(err.Error(), "--key-format") {
			t.Errorf("%q: error does not name the flag: %v", s, err)
		}
	}
	if _, errOut, code := runCLI(t, "", "consume", "--brokers=127.0.0.1:1", "t", "--value-format", "long"); code == 0 ||
		!strings.Contains(errOut, "--value-format must be one of") {
		t.Fatalf("consume with a bad --value-format: exit %d, %s", code, errOut)
	}
}

// FuzzFieldFormat: no bytes make a format panic, and -f json always
// marshals.
func FuzzFieldFormat(f *testing.F) {
	f.Add([]byte("airport\x00\x00\x01\xa2\x3a\xe4\x9a\x70"), uint8(0))
	f.Add([]byte{0xff, 0xf0, 0, 0, 0, 0, 0, 0}, uint8(3))
	f.Add([]byte(`{"a":1}`), uint8(2))
	formats := []string{"bytes", "string", "json", "int64", "int32", "int16", "float64", "float32",
		"windowed:string", "windowed:int64", "session:bytes", "session:json"}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		ff, err := parseFieldFormat("value-format", formats[int(which)%len(formats)])
		if err != nil {
			t.Fatal(err)
		}
		_ = ff.appendText(nil, b)
		v, b64, _ := ff.jsonField(b)
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("%s %x: %v", ff.name(), b, err)
		}
		if v == nil && b64 == nil && b != nil {
			t.Fatalf("%s %x: the bytes are lost", ff.name(), b)
		}
	})
}
