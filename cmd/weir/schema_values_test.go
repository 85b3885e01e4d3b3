package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/registry/registrytest"
	"github.com/weirhq/weir/registry/schema"
	"github.com/weirhq/weir/weirtest"
)

// TestSchemaProduceConsume: produce --value-schema/--value-subject encodes
// JSON lines in the wire format with a registered schema; consume -f json
// --registry prints each value decoded, with its schema id; and consume's
// output still feeds produce --input json.
func TestSchemaProduceConsume(t *testing.T) {
	addr := weirtest.Start(t, weirtest.WithTopic("avro", 1), weirtest.WithTopic("json", 1), weirtest.WithTopic("proto", 1), weirtest.WithTopic("copy", 1)).Addr()
	url := registrytest.Serve(t, addr)
	b, r := "--brokers="+addr, "--registry="+url
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	avsc := write("order.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"},{"name":"note","type":["null","string"],"default":null},{"name":"tags","type":{"type":"array","items":"string"}}]}`)
	jsonSchema := write("order.json", `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)
	proto := write("order.proto", `syntax = "proto3"; package shop; message Order { int64 id = 1; string item = 2; }`)

	for _, c := range []struct {
		topic, typ, file string
		lines            []string
		want             []string // decoded values
	}{
		{"avro", "AVRO", avsc,
			[]string{`{"id":1,"item":"tea","tags":["hot"]}`, `{"id":2,"item":"cake","note":"fresh","tags":[]}`},
			[]string{`{"id":1,"item":"tea","note":null,"tags":["hot"]}`, `{"id":2,"item":"cake","note":"fresh","tags":[]}`}},
		{"json", "JSON", jsonSchema, []string{`{"id":1,"x":true}`, `{"id": 2}`}, []string{`{"id":1,"x":true}`, `{"id":2}`}},
		{"proto", "PROTOBUF", proto, []string{`{"id":"1","item":"tea"}`, `{"item":"cake"}`}, []string{`{"id":"1","item":"tea"}`, `{"item":"cake"}`}},
	} {
		mustCLI(t, strings.Join(c.lines, "\n")+"\n", "produce", b, r, c.topic, "--value-schema", c.file, "--value-type", c.typ, "-q")
		// Again through the subject's latest schema.
		mustCLI(t, c.lines[0]+"\n", "produce", b, r, c.topic, "--value-subject", c.topic+"-value", "-q")
		out := mustCLI(t, "", "consume", b, r, c.topic, "-e", "-f", "json")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		want := append(append([]string{}, c.want...), c.want[0])
		if len(lines) != len(want) {
			t.Fatalf("%s: consumed %d records, want %d:\n%s", c.topic, len(lines), len(want), out)
		}
		for i, l := range lines {
			var rec struct {
				ValueSchema struct {
					ID    int             `json:"id"`
					Value json.RawMessage `json:"value"`
					Error string          `json:"error"`
				} `json:"value_schema"`
			}
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.ValueSchema.ID == 0 || rec.ValueSchema.Error != "" || compactJSON(t, rec.ValueSchema.Value) != want[i] {
				t.Errorf("%s record %d: %+v (value %s), want %s", c.topic, i, rec.ValueSchema, rec.ValueSchema.Value, want[i])
			}
		}
		if c.topic == "avro" {
			// consume's output (with value_schema) still feeds produce --input json.
			mustCLI(t, out, "produce", b, "copy", "--input", "json", "-q")
		}
	}
	// A line the schema refuses fails the command, naming the line.
	if _, errOut, code := runCLI(t, `{"id":"not a number","item":"x","tags":[]}`+"\n", "produce", b, r, "avro", "--value-subject", "avro-value"); code == 0 || !strings.Contains(errOut, "line 1") {
		t.Fatalf("bad line: exit %d, stderr %q", code, errOut)
	}
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzDecodeToJSON: consume's decoding of wire-format payloads returns an
// error for anything malformed, never panics.
func FuzzDecodeToJSON(f *testing.F) {
	var schemas []*registrySchema
	for _, c := range []struct{ typ, text string }{
		{"AVRO", `{"type":"record","name":"R","fields":[{"name":"a","type":["null","long"]},{"name":"b","type":{"type":"map","values":"bytes"}}]}`},
		{"JSON", `{"type":"object"}`},
		{"PROTOBUF", `syntax = "proto3"; message M { int64 a = 1; message N { string s = 1; } N n = 2; }`},
	} {
		typ, _ := schema.ParseType(c.typ)
		p, err := schema.Parse(typ, c.text, nil)
		if err != nil {
			f.Fatal(err)
		}
		schemas = append(schemas, &registrySchema{id: 1, parsed: p})
	}
	f.Add([]byte{2, 2, 2, 'k', 2, 'v', 0})
	f.Add([]byte(`{"a":1}`))
	f.Add([]byte{0, 8, 1, 18, 3, 10, 1, 'x'})
	f.Add([]byte{4, 2, 2, 0x80})
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, s := range schemas {
			out, err := decodeToJSON(s, payload)
			if err == nil && !json.Valid(out) {
				t.Fatalf("%s: decoded to invalid JSON %q", s.parsed.Type(), out)
			}
		}
	})
}
