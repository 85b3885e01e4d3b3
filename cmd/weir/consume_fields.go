package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/stream"
)

// fieldFormat is how consume shows a record's key or value (--key-format,
// --value-format): the bytes as they are, or decoded as the Kafka
// serializer that wrote them (the Java console consumer's key.deserializer
// and value.deserializer, kcat's -s). A null key or value is shown as null
// whatever the format.
type fieldFormat struct {
	kind  string       // one of fieldKinds, "windowed" or "session"
	inner *fieldFormat // windowed, session: the format of the key inside the window
}

// fieldKinds are the formats of plain fields, with the Kafka serializer
// whose bytes each reads.
var fieldKinds = []struct{ name, kafka string }{
	{"bytes", "the bytes as they are (the default; string is the same)"},
	{"string", "StringSerializer (UTF-8)"},
	{"json", "JSON text, embedded as JSON in -f json"},
	{"int64", "LongSerializer: 8 bytes big-endian"},
	{"int32", "IntegerSerializer: 4 bytes big-endian"},
	{"int16", "ShortSerializer: 2 bytes big-endian"},
	{"float64", "DoubleSerializer: 8 bytes IEEE 754 big-endian"},
	{"float32", "FloatSerializer: 4 bytes IEEE 754 big-endian"},
}

// fieldFormatHelp documents the formats for consume --help.
func fieldFormatHelp() string {
	var b strings.Builder
	for _, k := range fieldKinds {
		fmt.Fprintf(&b, "  %-9s %s\n", k.name, k.kafka)
	}
	b.WriteString(`  windowed:F  a Kafka Streams time-windowed key (TimeWindowedSerializer: the key in format F,
             then the window start, 8 bytes of ms): shown as key@start
  session:F   a Kafka Streams session-windowed key (SessionWindowedSerializer: the key in
             format F, then the session's end and start): shown as key@start/end
`)
	return b.String()
}

// parseFieldFormat parses a --key-format or --value-format value.
func parseFieldFormat(flag, s string) (*fieldFormat, error) {
	if kind, inner, ok := strings.Cut(s, ":"); ok {
		if kind != "windowed" && kind != "session" {
			return nil, fmt.Errorf("--%s %q: only windowed: and session: take an inner format", flag, s)
		}
		f, err := parseFieldFormat(flag, inner)
		if err != nil {
			return nil, err
		}
		if f.inner != nil {
			return nil, fmt.Errorf("--%s %q: a windowed key's key is not windowed", flag, s)
		}
		return &fieldFormat{kind: kind, inner: f}, nil
	}
	for _, k := range fieldKinds {
		if s == k.name {
			return &fieldFormat{kind: k.name}, nil
		}
	}
	names := make([]string, 0, len(fieldKinds)+2)
	for _, k := range fieldKinds {
		names = append(names, k.name)
	}
	return nil, fmt.Errorf("--%s must be one of %s, windowed:F or session:F, got %q", flag, strings.Join(names, ", "), s)
}

// raw reports whether f shows the bytes as they are.
func (f *fieldFormat) raw() bool { return f == nil || f.kind == "bytes" || f.kind == "string" }

// fieldWindow is a decoded windowed key.
type fieldWindow struct {
	key        []byte
	start, end time.Time
	session    bool
}

// decode reads b as f says: a number (int64 or float64), json.RawMessage,
// fieldWindow, or b itself for the raw formats.
func (f *fieldFormat) decode(b []byte) (any, error) {
	switch f.kind {
	case "json":
		if !json.Valid(b) {
			return nil, errors.New("not valid JSON")
		}
		return json.RawMessage(b), nil
	case "int64", "int32", "int16", "float64", "float32":
		return decodeNumber(f.kind, b)
	case "windowed":
		w, err := stream.TimeWindowed(stream.Bytes(), 0).Decode(b)
		if err != nil {
			return nil, err
		}
		return fieldWindow{key: w.Key, start: w.Start}, f.inner.check(w.Key)
	case "session":
		w, err := stream.SessionWindowed(stream.Bytes()).Decode(b)
		if err != nil {
			return nil, err
		}
		return fieldWindow{key: w.Key, start: w.Start, end: w.End, session: true}, f.inner.check(w.Key)
	}
	return b, nil
}

// check reports whether a windowed key's key decodes in f.
func (f *fieldFormat) check(key []byte) error {
	if f.raw() {
		return nil
	}
	if _, err := f.decode(key); err != nil {
		return fmt.Errorf("the key in the window: %w", err)
	}
	return nil
}

// decodeNumber reads the fixed-width big-endian numbers of Kafka's
// serializers.
func decodeNumber(kind string, b []byte) (any, error) {
	want := map[string]int{"int64": 8, "int32": 4, "int16": 2, "float64": 8, "float32": 4}[kind]
	if len(b) != want {
		return nil, fmt.Errorf("%s: want %d bytes, got %d", kind, want, len(b))
	}
	switch kind {
	case "int64":
		return int64(binary.BigEndian.Uint64(b)), nil
	case "int32":
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case "int16":
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case "float64":
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	}
	return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
}

// appendText appends b as the text formats (value, kv, -F) show it. Bytes
// that do not decode are shown, not dropped: <not F: hex>.
func (f *fieldFormat) appendText(dst, b []byte) []byte {
	if f.raw() || b == nil {
		return append(dst, b...)
	}
	v, err := f.decode(b)
	if err != nil {
		return append(append(append(dst, "<not "+f.name()+": 0x"...), hex.EncodeToString(b)...), '>')
	}
	return appendDecodedText(dst, f, v)
}

func appendDecodedText(dst []byte, f *fieldFormat, v any) []byte {
	switch v := v.(type) {
	case int64:
		return strconv.AppendInt(dst, v, 10)
	case float64:
		return strconv.AppendFloat(dst, v, 'g', -1, 64)
	case json.RawMessage:
		return append(dst, v...)
	case fieldWindow:
		dst = f.inner.appendText(dst, v.key)
		dst = append(dst, '@')
		dst = v.start.AppendFormat(dst, time.RFC3339Nano)
		if v.session {
			dst = append(dst, '/')
			dst = v.end.AppendFormat(dst, time.RFC3339Nano)
		}
		return dst
	}
	return append(dst, v.([]byte)...)
}

// name is f as the flag spells it.
func (f *fieldFormat) name() string {
	if f.inner != nil {
		return f.kind + ":" + f.inner.name()
	}
	return f.kind
}

// jsonWindow is a windowed key in -f json: the key as its format shows it,
// the window's times in ms and RFC 3339 (a time window's end is not in its
// bytes).
type jsonWindow struct {
	Key       any    `json:"key"`
	KeyBase64 string `json:"key_base64,omitempty"`
	Start     int64  `json:"start"`
	StartTime string `json:"start_time"`
	End       *int64 `json:"end,omitempty"`
	EndTime   string `json:"end_time,omitempty"`
}

// jsonField is b as -f json shows it: the value of the "key"/"value"
// field; the base64 of bytes that are not UTF-8 text (raw formats) or that
// do not decode, with why they did not.
func (f *fieldFormat) jsonField(b []byte) (v any, b64 *string, decodeErr string) {
	if f.raw() || b == nil {
		text, b64 := textOrBase64(b)
		if text == nil {
			return nil, b64, ""
		}
		return *text, nil, ""
	}
	d, err := f.decode(b)
	if err != nil {
		s := base64.StdEncoding.EncodeToString(b)
		return nil, &s, err.Error()
	}
	switch d := d.(type) {
	case float64:
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return strconv.FormatFloat(d, 'g', -1, 64), nil, "" // JSON has no NaN or infinities
		}
	case fieldWindow:
		w := jsonWindow{Start: d.start.UnixMilli(), StartTime: d.start.Format(time.RFC3339Nano)}
		var kb64 *string
		w.Key, kb64, _ = f.inner.jsonField(d.key)
		if kb64 != nil {
			w.KeyBase64 = *kb64
		}
		if d.session {
			end := d.end.UnixMilli()
			w.End, w.EndTime = &end, d.end.Format(time.RFC3339Nano)
		}
		return w, nil, ""
	}
	return d, nil, ""
}
