package main

import (
	"bytes"
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

// fieldFormat is how consume shows a record's key or value and produce
// writes it (--key-format, --value-format): the bytes as they are, or as the
// Kafka serializer that writes them (the Java console consumer's
// key.deserializer and value.deserializer, kcat's -s). A null key or value
// is null whatever the format.
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
		return fieldWindow{key: nonNil(w.Key), start: w.Start}, f.inner.check(w.Key)
	case "session":
		w, err := stream.SessionWindowed(stream.Bytes()).Decode(b)
		if err != nil {
			return nil, err
		}
		return fieldWindow{key: nonNil(w.Key), start: w.Start, end: w.End, session: true}, f.inner.check(w.Key)
	}
	return b, nil
}

// nonNil is b, or an empty slice for nil: a windowed key's key is never
// null, if empty.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
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
	if want := numberWidth(kind); len(b) != want {
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

// numberWidth is the byte width of a number format's encoding.
func numberWidth(kind string) int {
	switch kind {
	case "int64", "float64":
		return 8
	case "int32", "float32":
		return 4
	}
	return 2 // int16
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
		dst = appendWindowTime(append(dst, '@'), v.start)
		if v.session {
			dst = appendWindowTime(append(dst, '/'), v.end)
		}
		return dst
	}
	return append(dst, v.([]byte)...)
}

// appendWindowTime appends a window time in RFC 3339, or in ms since the
// epoch where RFC 3339 has no year for it (before year 0, after 9999), so
// that parseWindowTime reads back every time.
func appendWindowTime(dst []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		return strconv.AppendInt(dst, t.UnixMilli(), 10)
	}
	return t.AppendFormat(dst, time.RFC3339Nano)
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
		w := jsonWindow{Start: d.start.UnixMilli(), StartTime: string(appendWindowTime(nil, d.start))}
		var kb64 *string
		w.Key, kb64, _ = f.inner.jsonField(d.key)
		if kb64 != nil {
			w.KeyBase64 = *kb64
		}
		if d.session {
			end := d.end.UnixMilli()
			w.End, w.EndTime = &end, string(appendWindowTime(nil, d.end))
		}
		return w, nil, ""
	}
	return d, nil, ""
}

// encodeText is the inverse of appendText, for weir produce's line input:
// the bytes the Kafka serializer of f writes for the text s. A windowed key
// is written key@start (RFC 3339 or ms since the epoch), a session key
// key@start/end; the key is everything before the last '@'.
func (f *fieldFormat) encodeText(s string) ([]byte, error) {
	switch f.kind {
	case "json":
		if !json.Valid([]byte(s)) {
			return nil, errors.New("json: not valid JSON")
		}
		return []byte(s), nil
	case "int64", "int32", "int16":
		bits := 8 * numberWidth(f.kind)
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a %d-bit integer", f.kind, s, bits)
		}
		return binary.BigEndian.AppendUint64(nil, uint64(v))[8-bits/8:], nil
	case "float64":
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("float64: %q is not a number", s)
		}
		return binary.BigEndian.AppendUint64(nil, math.Float64bits(v)), nil
	case "float32":
		v, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return nil, fmt.Errorf("float32: %q is not a 32-bit number", s)
		}
		return binary.BigEndian.AppendUint32(nil, math.Float32bits(float32(v))), nil
	case "windowed", "session":
		i := strings.LastIndexByte(s, '@')
		if i < 0 {
			return nil, fmt.Errorf("%s: %q has no @ before the window", f.name(), s)
		}
		key, err := f.inner.encodeText(s[:i])
		if err != nil {
			return nil, err
		}
		times := s[i+1:]
		if f.kind == "windowed" {
			start, err := parseWindowTime(times)
			if err != nil {
				return nil, fmt.Errorf("%s: window start: %w", f.name(), err)
			}
			return windowKey(key, start), nil
		}
		from, to, ok := strings.Cut(times, "/")
		if !ok {
			return nil, fmt.Errorf("%s: %q: want key@start/end", f.name(), s)
		}
		start, err := parseWindowTime(from)
		if err != nil {
			return nil, fmt.Errorf("%s: session start: %w", f.name(), err)
		}
		end, err := parseWindowTime(to)
		if err != nil {
			return nil, fmt.Errorf("%s: session end: %w", f.name(), err)
		}
		return sessionKey(f.name(), key, start, end)
	}
	return []byte(s), nil
}

// encodeLine is a key's or value's bytes from its text in a line (never
// null: an empty key is a key).
func (f *fieldFormat) encodeLine(what string, text []byte) ([]byte, error) {
	if f.raw() {
		return append([]byte{}, text...), nil
	}
	b, err := f.encodeText(string(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// encodeJSON is the inverse of jsonField, for weir produce --input json: the
// bytes for the JSON value of a "key" or "value" field that is not null. A
// number format takes a JSON number or a string; json takes any value (a
// string too: its JSON text); a windowed key takes a string (as
// encodeText) or an object as jsonField writes it (key or key_base64,
// start or start_time, and for a session end or end_time).
func (f *fieldFormat) encodeJSON(raw json.RawMessage) ([]byte, error) {
	if f.raw() {
		return jsonValueBytes(raw), nil
	}
	var s string
	isString := json.Unmarshal(raw, &s) == nil
	switch {
	case f.kind == "json":
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
		return b.Bytes(), nil
	case isString:
		return f.encodeText(s)
	case f.inner == nil:
		if jsonKind(raw) != "a number" {
			return nil, fmt.Errorf("%s: want a number or a string, got %s", f.kind, jsonKind(raw))
		}
		return f.encodeText(string(bytes.TrimSpace(raw)))
	}
	var w struct {
		Key       json.RawMessage `json:"key"`
		KeyBase64 *string         `json:"key_base64"`
		Start     *int64          `json:"start"`
		StartTime string          `json:"start_time"`
		End       *int64          `json:"end"`
		EndTime   string          `json:"end_time"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%s: want a string key@start or an object {key, start[, end]}: %v", f.name(), err)
	}
	var key []byte
	var err error
	switch {
	case w.KeyBase64 != nil:
		if key, err = base64.StdEncoding.DecodeString(*w.KeyBase64); err != nil {
			return nil, fmt.Errorf("%s: key_base64: %v", f.name(), err)
		}
	case w.Key != nil && !isJSONNull(w.Key):
		if key, err = f.inner.encodeJSON(w.Key); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: the object has no key", f.name())
	}
	start, err := windowTimeField("start", w.Start, w.StartTime)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name(), err)
	}
	if f.kind == "windowed" {
		return windowKey(key, start), nil
	}
	end, err := windowTimeField("end", w.End, w.EndTime)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name(), err)
	}
	return sessionKey(f.name(), key, start, end)
}

// parseWindowTime reads ms since the epoch or an RFC 3339 time.
func parseWindowTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither ms since the epoch nor an RFC 3339 time", s)
	}
	return t.UnixMilli(), nil
}

// windowTimeField reads a window time from its ms field or, without one,
// its RFC 3339 field (name_time).
func windowTimeField(name string, ms *int64, text string) (int64, error) {
	switch {
	case ms != nil:
		return *ms, nil
	case text != "":
		return parseWindowTime(text)
	}
	return 0, fmt.Errorf("the object has no %s (ms) nor %s_time", name, name)
}

// windowKey is a time-windowed key's bytes (TimeWindowedSerializer's).
func windowKey(key []byte, start int64) []byte {
	b, _ := stream.TimeWindowed(stream.Bytes(), 0).Encode(stream.Windowed[[]byte]{Key: key, Start: time.UnixMilli(start)})
	return b
}

// sessionKey is a session-windowed key's bytes (SessionWindowedSerializer's).
func sessionKey(format string, key []byte, start, end int64) ([]byte, error) {
	if end < start {
		return nil, fmt.Errorf("%s: the session ends before it starts", format)
	}
	return stream.SessionWindowed(stream.Bytes()).Encode(stream.Windowed[[]byte]{Key: key, Start: time.UnixMilli(start), End: time.UnixMilli(end)})
}
