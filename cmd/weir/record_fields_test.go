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

// fuzzFormats are the formats the fuzz tests pick from.
var fuzzFormats = []string{"bytes", "string", "json", "int64", "int32", "int16", "float64", "float32",
	"windowed:string", "windowed:int64", "session:bytes", "session:json"}

// FuzzFieldFormat: no bytes make a format panic, and -f json always
// marshals.
func FuzzFieldFormat(f *testing.F) {
	f.Add([]byte("airport\x00\x00\x01\xa2\x3a\xe4\x9a\x70"), uint8(0))
	f.Add([]byte{0xff, 0xf0, 0, 0, 0, 0, 0, 0}, uint8(3))
	f.Add([]byte(`{"a":1}`), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		ff, err := parseFieldFormat("value-format", fuzzFormats[int(which)%len(fuzzFormats)])
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

// TestProduceFormats: weir produce writes the bytes of Kafka's serializers
// from text lines and from consume's json, and consume reads them back:
// a windowed count's topic copied through consume -f json | produce
// --input json with the formats is byte for byte the same, an
// undecodable record included.
func TestProduceFormats(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	for _, topic := range []string{"demand", "copy"} {
		mustCLI(t, "", "topic", "create", b, topic, "-p", "1")
	}
	formats := []string{"--key-format", "windowed:string", "--value-format", "int64"}
	in := "airport@2026-12-03T07:54:00Z=39\nhar@bor@1796284440000=-7\n"
	mustCLI(t, in, append([]string{"produce", b, "demand", "-K", "=", "-q"}, formats...)...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "demand", Key: []byte("abc"), Value: []byte{1, 2, 3}}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	start := time.Date(2026, 12, 3, 7, 54, 0, 0, time.UTC).UnixMilli()
	want := []kgo.Record{
		{Key: append([]byte("airport"), be64(start)...), Value: be64(39)},
		{Key: append([]byte("har@bor"), be64(start)...), Value: be64(-7)},
		{Key: []byte("abc"), Value: []byte{1, 2, 3}},
	}
	checkTopic := func(topic string) {
		t.Helper()
		got := readAll(t, addr, topic, len(want))
		for i := range want {
			if string(got[i].Key) != string(want[i].Key) || string(got[i].Value) != string(want[i].Value) {
				t.Fatalf("%s record %d: %x=%x, want %x=%x", topic, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
			}
		}
	}
	checkTopic("demand")
	js := mustCLI(t, "", append([]string{"consume", b, "demand", "-e", "-f", "json"}, formats...)...)
	mustCLI(t, js, append([]string{"produce", b, "copy", "--input", "json", "-q"}, formats...)...)
	checkTopic("copy")

	// A session key from a line, and from json given by hand.
	mustCLI(t, "", "topic", "create", b, "sessions", "-p", "1")
	mustCLI(t, "ann@1000/5000:x\n", "produce", b, "sessions", "-K", ":", "-q", "--key-format", "session:string")
	mustCLI(t, `{"key": {"key": "bob", "start_time": "1970-01-01T00:00:01Z", "end": 5000}, "value": {"n": 1}}`+"\n",
		"produce", b, "sessions", "--input", "json", "-q", "--key-format", "session:string", "--value-format", "json")
	got := readAll(t, addr, "sessions", 2)
	wantKey := func(k string) string { return k + string(be64(5000)) + string(be64(1000)) }
	if string(got[0].Key) != wantKey("ann") || string(got[0].Value) != "x" || string(got[1].Key) != wantKey("bob") || string(got[1].Value) != `{"n":1}` {
		t.Fatalf("sessions: %q=%q, %q=%q", got[0].Key, got[0].Value, got[1].Key, got[1].Value)
	}
}

// readAll reads the first n records of partition 0 of topic.
func readAll(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: %d of %d records: %v", topic, len(out), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestProduceFormatErrors: a line that does not encode stops produce with
// the line and the reason; the lines before it are produced.
func TestProduceFormatErrors(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "n", "-p", "1")
	for _, c := range []struct {
		input string
		args  []string
		err   string
	}{
		{"1\n2\nx\n", []string{"--value-format", "int64"}, `line 3: value: int64: "x" is not a 64-bit integer`},
		{"70000\n", []string{"--value-format", "int16"}, `line 1: value: int16: "70000" is not a 16-bit integer`},
		{"k:1\n", []string{"-K", ":", "--key-format", "windowed:string"}, `line 1: key: windowed:string: "k" has no @ before the window`},
		{"k@5/1:1\n", []string{"-K", ":", "--key-format", "session:string"}, "line 1: key: session:string: the session ends before it starts"},
		{`{"value": true}` + "\n", []string{"--input", "json", "--value-format", "float64"}, "line 1: value: float64: want a number or a string, got a boolean"},
		{`{"key": {"key": "k"}}` + "\n", []string{"--input", "json", "--key-format", "windowed:string"}, "line 1: key: windowed:string: the object has no start (ms) nor start_time"},
		{"1\n", []string{"--value-format", "int64", "--value-subject", "s"}, "mutually exclusive"},
	} {
		_, errOut, code := runCLI(t, c.input, append([]string{"produce", b, "n"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.err) {
			t.Errorf("%q %v: exit %d, stderr %s; want %q", c.input, c.args, code, errOut, c.err)
		}
	}
	if got := readAll(t, addr, "n", 2); string(got[0].Value) != string(be64(1)) || string(got[1].Value) != string(be64(2)) {
		t.Fatalf("the lines before the bad one: %x %x", got[0].Value, got[1].Value)
	}
}

// FuzzFieldFormatRoundTrip: what consume shows of bytes that decode,
// produce writes back as the same bytes — from the text formats and from
// -f json (JSON values compacted).
func FuzzFieldFormatRoundTrip(f *testing.F) {
	f.Add([]byte("airport\x00\x00\x01\xa2\x3a\xe4\x9a\x70"), uint8(8))
	f.Add([]byte("k@\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x01"), uint8(10))
	f.Add([]byte{0xc0, 0, 0, 0, 0, 0, 0, 0}, uint8(6))
	f.Add([]byte(`{"a": [1, 2]}`), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		ff, err := parseFieldFormat("value-format", fuzzFormats[int(which)%len(fuzzFormats)])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ff.decode(b); err != nil || b == nil {
			return
		}
		if strings.HasPrefix(ff.kind, "float") {
			if v, _ := ff.decode(b); math.IsNaN(v.(float64)) {
				return // NaN payloads are not kept by text
			}
		}
		want := b
		if ff.kind == "json" || ff.inner != nil && ff.inner.kind == "json" {
			return // JSON text is compacted on the way back
		}
		text := ff.appendText(nil, b)
		back, err := ff.encodeText(string(text))
		if err != nil || string(back) != string(want) {
			t.Fatalf("%s %x: text %q back to %x, %v", ff.name(), b, text, back, err)
		}
		v, b64, _ := ff.jsonField(b)
		if b64 != nil {
			return // not UTF-8: written back from base64 as is
		}
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err = ff.encodeJSON(raw)
		if err != nil || string(back) != string(want) {
			t.Fatalf("%s %x: json %s back to %x, %v", ff.name(), b, raw, back, err)
		}
	})
}
