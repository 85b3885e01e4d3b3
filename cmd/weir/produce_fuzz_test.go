package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzJSONRecord: any input line gives a record or an error, never a
// panic; an accepted record printed by consume's json format and read
// back gives the same key, value, headers and timestamp (the formats are
// each other's inverse).
func FuzzJSONRecord(f *testing.F) {
	for _, seed := range []string{
		`{"key":"k","value":"v"}`,
		`{"topic":"t","partition":3,"offset":9,"timestamp":1700000000123,"key":null,"key_base64":"/wE=","value":null,"value_base64":"gA==","headers":[{"key":"h","value":"x"},{"key":"b","value_base64":"AA=="}]}`,
		`{"key":"tomb","value":null}`, `{}`, `{"value":""}`, `{"key":"a","key_base64":"YQ=="}`,
		`{"value_base64":"!!"}`, `{"headers":[{"key":"h"}]}`, `{"timestamp":-1}`, `[]`, `{"a":1}`, `null`,
		`{"key":7,"value":{"b":[1,2.5e3,null]},"headers":{"h":"x","n":null,"o":{}},"timestamp":"2026-01-02T15:04:05.5Z"}`,
		`{"timestamp":"1700000000999"}`, `{"timestamp":true}`, `{"headers":[1]}`, `{"value":`,
	} {
		f.Add([]byte(seed))
	}
	o := &produceOptions{partition: -1}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := o.jsonRecord(line, nil)
		if err != nil {
			return
		}
		r.Topic = "t"
		var buf bytes.Buffer
		p := &recordPrinter{w: &buf, format: "json"}
		p.print(r)
		if p.err != nil {
			t.Fatalf("print %+v: %v", r, p.err)
		}
		r2, err := o.jsonRecord(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil)
		if err != nil {
			t.Fatalf("printed record %s does not read back: %v", buf.Bytes(), err)
		}
		if !sameBytes(r.Key, r2.Key) || !sameBytes(r.Value, r2.Value) || len(r.Headers) != len(r2.Headers) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v\nvia %s", r, r2, buf.Bytes())
		}
		for i := range r.Headers {
			if r.Headers[i].Key != r2.Headers[i].Key || !bytes.Equal(r.Headers[i].Value, r2.Headers[i].Value) {
				t.Fatalf("header %d changed: %+v -> %+v", i, r.Headers[i], r2.Headers[i])
			}
		}
		if r.Timestamp.UnixMilli() != r2.Timestamp.UnixMilli() {
			t.Fatalf("timestamp changed: %v -> %v", r.Timestamp, r2.Timestamp)
		}
	})
}

// sameBytes compares including the null / empty distinction.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// FuzzConsumeFormats: -F format strings, --topic selections and reset plan
// files are parsed or refused, never a panic; an accepted format prints a
// record.
func FuzzConsumeFormats(f *testing.F) {
	for _, seed := range []string{`%t %p %o %k %s %h`, `%%\n`, `%`, `\q`, `%T\t%K:%S`, `t:0,2`, `a,b:1,c`, `:1`,
		"ev,1,3\ng,other,0,4\n", "a,b\n", "\"x\n"} {
		f.Add(seed)
	}
	r := &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}}
	f.Fuzz(func(t *testing.T, s string) {
		if tmpl, err := parseTemplate(s); err == nil && tmpl != nil {
			var buf bytes.Buffer
			p := &recordPrinter{w: &buf, template: tmpl}
			p.print(r)
			if p.err != nil || !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
				t.Fatalf("format %q printed %q, %v", s, buf.Bytes(), p.err)
			}
		}
		_, _ = parseTopicSelection([]string{s})
		_, _ = readPlanCSV(strings.NewReader(s), "g")
	})
}
