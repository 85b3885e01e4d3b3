package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

type produceOptions struct {
	keySep        string
	headers       []string
	acks          string
	partition     int32
	compression   string
	file          string
	maxLineBytes  int
	maxBatchBytes int32
	linger        time.Duration
	input         string
	quiet         bool
	valueSchema   valueSchemaFlags // schema_values.go
	keyFormat     string           // record_fields.go
	valFormat     string

	key, value *fieldFormat // parsed keyFormat, valFormat
}

func newProduceCmd() *cobra.Command {
	o := &produceOptions{}
	var cf *clientFlags
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of stdin (or --file)",
		Long: `Produce one record per input line. With --key-separator, the text before the first
separator is the record key and the rest is the value; a line without the separator is
produced with no key. Keyed records are partitioned like the Java client (murmur2), so
they land where any Kafka client would put them.

With --input json, each line is one object as printed by weir consume -f json (key,
value, key_base64/value_base64 for binary data, headers, timestamp; topic, partition and
offset are ignored), so consume -f json | produce --input json copies records. A key or
value may also be any JSON value (an object is written as its JSON text); headers may be
an object {"name": "value"}; a timestamp may be milliseconds or an RFC 3339 time.

--key-format and --value-format write keys and values as a Kafka serializer does, from
their text (line input) or JSON value (json input), the inverse of weir consume's
same flags: int64, int32, int16, float64, float32 (a number), json (JSON text),
windowed:F (key@start, start in RFC 3339 or ms) and session:F (key@start/end), or in
json input the object weir consume -f json prints; key_base64/value_base64 are written
as they are. The default, bytes, writes the text as it is.

weir produce waits until every record is acknowledged (acks=all by default: on weir,
that means fsynced) and exits non-zero if any record failed.`,
		Example: `  echo 'hello' | weir produce greetings
  printf 'user1:signed up\nuser2:logged in\n' | weir produce events --key-separator :
  weir produce events -H source=cli -H trace=abc < lines.txt
  weir consume events -e -f json | weir produce events-copy --input json
  printf 'airport@2026-12-03T08:00:00Z=42\n' | weir produce demand -K = --key-format windowed:string --value-format int64`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cf, args[0], cmd.InOrStdin(), cmd.ErrOrStderr())
		},
	}
	cf = addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.keySep, "key-separator", "K", "", "split each line at the first occurrence into key and value (e.g. ':')")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "record header key=value added to every record (repeatable)")
	f.StringVar(&o.acks, "acks", "all", "acknowledgement level: all (-1), 1 (leader) or 0 (none)")
	f.Int32VarP(&o.partition, "partition", "p", -1, "produce every record to this partition (-1: partition by key, murmur2)")
	f.StringVarP(&o.compression, "compression", "z", "none", "compression codec: none, gzip, snappy, lz4, zstd")
	f.StringVarP(&o.file, "file", "f", "", "read lines from this file instead of stdin")
	f.IntVar(&o.maxLineBytes, "max-line-bytes", 16<<20, "longest accepted input line")
	f.Int32Var(&o.maxBatchBytes, "max-batch-bytes", 1000012, "largest record batch sent (and so largest record); keep it <= the topic's max.message.bytes")
	f.StringVar(&o.input, "input", "line", `input format: "line" (one value, or key+separator+value, per line) or "json" (one object per line, as written by weir consume -f json)`)
	f.DurationVar(&o.linger, "linger", 0, "how long a partition's batch may wait for more records before it is sent (linger.ms)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not print the summary line to stderr")
	f.StringVar(&o.keyFormat, "key-format", "bytes", "how keys are written: bytes, string, json, int64, int32, int16, float64, float32, windowed:F, session:F (see above)")
	f.StringVar(&o.valFormat, "value-format", "bytes", "how values are written (as --key-format)")
	o.valueSchema.add(f)
	return cmd
}

// clientOpts translates the produce settings into franz-go options.
func (o *produceOptions) clientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch strings.ToLower(o.acks) {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1", "leader":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0", "none":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf(`--acks must be all, 1 or 0, got %q`, o.acks)
	}
	var codec kgo.CompressionCodec
	switch strings.ToLower(o.compression) {
	case "none", "":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("--compression must be none, gzip, snappy, lz4 or zstd, got %q", o.compression)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if o.input != "line" && o.input != "json" {
		return nil, fmt.Errorf(`--input must be "line" or "json", got %q`, o.input)
	}
	var err error
	if o.key, err = parseFieldFormat("key-format", o.keyFormat); err != nil {
		return nil, err
	}
	if o.value, err = parseFieldFormat("value-format", o.valFormat); err != nil {
		return nil, err
	}
	if !o.value.raw() && (o.valueSchema.subject != "" || o.valueSchema.file != "") {
		return nil, errors.New("--value-format and --value-subject/--value-schema are mutually exclusive (the schema decides the value's bytes)")
	}
	if o.maxLineBytes <= 0 {
		return nil, fmt.Errorf("--max-line-bytes must be positive, got %d", o.maxLineBytes)
	}
	if o.maxBatchBytes <= 0 {
		return nil, fmt.Errorf("--max-batch-bytes must be positive, got %d", o.maxBatchBytes)
	}
	opts = append(opts, kgo.ProducerBatchMaxBytes(o.maxBatchBytes))
	if o.linger > 0 {
		opts = append(opts, kgo.ProducerLinger(o.linger))
	}
	return opts, nil
}

func (o *produceOptions) run(ctx context.Context, cf *clientFlags, topic string, stdin io.Reader, stderr io.Writer) error {
	hdrs, err := parseKeyValues("--header", o.headers)
	if err != nil {
		return err
	}
	opts, err := o.clientOpts()
	if err != nil {
		return err
	}
	values, err := o.valueSchema.encoder(ctx, topic)
	if err != nil {
		return err
	}
	in := stdin
	if o.file != "" {
		f, err := os.Open(o.file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	// Like the Java console producer, ask for auto-creation of a missing
	// topic; whether it happens is the broker's policy (off on weir unless
	// serve --auto-create-topics).
	// connect fails fast on a broker that is not there. (franz-go's
	// RecordDeliveryTimeout would also bound a broker lost mid-run, but it
	// counts from each record's timestamp, so it fails at once the records
	// of --input json that carry an old timestamp.)
	cl, err := cf.connect(ctx, append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var (
		mu       sync.Mutex
		firstErr error
		failed   int
		acked    int
	)
	promise := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		acked++
	}

	sc := bufio.NewScanner(in)
	// The longest token is the larger of the max and the initial buffer's
	// capacity, so the initial buffer must not exceed the max.
	sc.Buffer(make([]byte, min(64<<10, o.maxLineBytes)), o.maxLineBytes)
	var (
		lines   int
		readErr error
	)
	for sc.Scan() {
		lines++
		var r *kgo.Record
		if o.input == "json" {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			if r, readErr = o.jsonRecord(sc.Bytes(), hdrs); readErr != nil {
				readErr = fmt.Errorf("line %d: %w", lines, readErr)
				lines--
				break
			}
		} else {
			if r, readErr = o.record(sc.Bytes(), hdrs); readErr != nil {
				readErr = fmt.Errorf("line %d: %w", lines, readErr)
				lines--
				break
			}
			if values != nil {
				if r.Value, readErr = values.encode(r.Value); readErr != nil {
					readErr = fmt.Errorf("line %d: %w", lines, readErr)
					lines--
					break
				}
			}
		}
		cl.Produce(ctx, r, promise)
	}
	if readErr == nil {
		readErr = sc.Err()
	}
	if errors.Is(readErr, bufio.ErrTooLong) {
		readErr = fmt.Errorf("line %d is longer than --max-line-bytes (%d)", lines+1, o.maxLineBytes)
	}
	flushErr := cl.Flush(ctx)

	mu.Lock()
	defer mu.Unlock()
	if !o.quiet {
		fmt.Fprintf(stderr, "produced %d records to %q (%d failed)\n", acked, topic, failed)
	}
	var errs []error
	if readErr != nil {
		errs = append(errs, fmt.Errorf("read input: %w", readErr))
	}
	if firstErr != nil {
		errs = append(errs, fmt.Errorf("%d of %d records failed, first error: %w", failed, lines, firstErr))
	} else if flushErr != nil {
		errs = append(errs, fmt.Errorf("flush: %w", flushErr))
	}
	return errors.Join(errs...)
}

// record builds the record for one input line. The scanner reuses its
// buffer, so key and value are copied.
func (o *produceOptions) record(line []byte, hdrs [][2]string) (*kgo.Record, error) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	r := &kgo.Record{Partition: o.partition}
	var err error
	if o.keySep != "" {
		if k, v, ok := bytes.Cut(line, []byte(o.keySep)); ok {
			if r.Key, err = o.key.encodeLine("key", k); err != nil {
				return nil, err
			}
			line = v
		}
	}
	if r.Value, err = o.value.encodeLine("value", line); err != nil {
		return nil, err
	}
	for _, h := range hdrs {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	return r, nil
}

// The json input format: one object per line, as weir consume -f json
// prints them, and what people write by hand:
//
//   - key, value: a string (its UTF-8 bytes), null or absent (a null key or
//     value), or any other JSON value (an object, array, number or boolean:
//     written as compact JSON text); key_base64 / value_base64 give binary
//     data instead;
//   - timestamp: milliseconds since the epoch (a number or a string of
//     digits) or an RFC 3339 time; absent: the producer's clock;
//   - headers: an array of {"key", "value" | "value_base64"} objects (as
//     consume prints them) or an object {"name": value, ...} (in order);
//   - topic, partition, offset: accepted and ignored (the record goes to the
//     command's topic, partitioned by key unless --partition);
//   - value_schema (consume --registry's decoding), key_error and
//     value_error (consume's --key-format/--value-format for bytes that do not
//     decode, given in key_base64/value_base64): accepted and ignored.
//
// Unknown fields are an error, so a typo is not dropped; errors name the
// field and what it should be, in JSON's terms.
var jsonInputFields = map[string]bool{
	"topic": true, "partition": true, "offset": true, "key": true, "key_base64": true,
	"value": true, "value_base64": true, "timestamp": true, "headers": true, "value_schema": true,
	"key_error": true, "value_error": true,
}

func (o *produceOptions) jsonRecord(line []byte, hdrs [][2]string) (*kgo.Record, error) {
	fields, err := jsonObject(line)
	if err != nil {
		return nil, err
	}
	for name := range fields {
		if !jsonInputFields[name] {
			return nil, fmt.Errorf("unknown field %q (known: key, value, key_base64, value_base64, timestamp, headers, topic, partition, offset)", name)
		}
	}
	r := &kgo.Record{Partition: o.partition}
	if r.Key, err = jsonBytes("key", fields["key"], fields["key_base64"], o.key); err != nil {
		return nil, err
	}
	if r.Value, err = jsonBytes("value", fields["value"], fields["value_base64"], o.value); err != nil {
		return nil, err
	}
	if ts, ok := fields["timestamp"]; ok && !isJSONNull(ts) {
		if r.Timestamp, err = jsonTimestamp(ts); err != nil {
			return nil, err
		}
	}
	if h, ok := fields["headers"]; ok && !isJSONNull(h) {
		if r.Headers, err = jsonHeaders(h); err != nil {
			return nil, err
		}
	}
	for _, h := range hdrs {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	return r, nil
}

// jsonKind names the kind of a JSON value, for error messages.
func jsonKind(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func isJSONNull(raw json.RawMessage) bool { return jsonKind(raw) == "null" }

// jsonObject decodes one line holding exactly one JSON object.
func jsonObject(line []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not valid JSON: %s", jsonSyntaxText(err))
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line (one record per line)")
	}
	if k := jsonKind(raw); k != "an object" {
		return nil, fmt.Errorf("a record must be a JSON object, got %s", k)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("not valid JSON: %s", jsonSyntaxText(err))
	}
	return fields, nil
}

// jsonSyntaxText is a JSON decoding error without Go's type names.
func jsonSyntaxText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "the line ends inside the JSON value"
	}
	return err.Error()
}

// jsonBytes is a key's or value's bytes from its text field, written in
// format f, and its base64 field, written as it is (at most one of them;
// neither, or null, means null).
func jsonBytes(what string, text, b64 json.RawMessage, f *fieldFormat) ([]byte, error) {
	hasText, hasB64 := text != nil && !isJSONNull(text), b64 != nil && !isJSONNull(b64)
	switch {
	case hasText && hasB64:
		return nil, fmt.Errorf("%s: both %s and %s_base64 given", what, what, what)
	case hasB64:
		var s string
		if json.Unmarshal(b64, &s) != nil {
			return nil, fmt.Errorf("%s_base64: want a base64 string, got %s", what, jsonKind(b64))
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%s_base64: not valid base64 (%v)", what, err)
		}
		return b, nil
	case hasText:
		b, err := f.encodeJSON(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return b, nil
	}
	return nil, nil
}

// jsonValueBytes is a JSON string's contents, or any other value's compact
// JSON text.
func jsonValueBytes(raw json.RawMessage) []byte {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return bytes.Clone(raw)
	}
	return buf.Bytes()
}

// jsonTimestamp reads milliseconds since the epoch (number or digits) or an
// RFC 3339 time.
func jsonTimestamp(raw json.RawMessage) (time.Time, error) {
	var ms int64
	if json.Unmarshal(raw, &ms) == nil {
		return time.UnixMilli(ms), nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.UnixMilli(n), nil
		}
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("timestamp %q: want milliseconds since the epoch or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
	}
	return time.Time{}, fmt.Errorf("timestamp: want milliseconds since the epoch (a whole number) or an RFC 3339 time string, got %s", jsonKind(raw))
}

// jsonHeaders reads headers given as an array of {"key", "value" |
// "value_base64"} or as an object {"name": value, ...}, keeping their order.
func jsonHeaders(raw json.RawMessage) ([]kgo.RecordHeader, error) {
	var out []kgo.RecordHeader
	switch jsonKind(raw) {
	case "an array":
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("headers: %s", jsonSyntaxText(err))
		}
		for i, item := range items {
			if k := jsonKind(item); k != "an object" {
				return nil, fmt.Errorf("headers[%d]: want an object {\"key\": ..., \"value\": ...}, got %s", i, k)
			}
			var f map[string]json.RawMessage
			if err := json.Unmarshal(item, &f); err != nil {
				return nil, fmt.Errorf("headers[%d]: %s", i, jsonSyntaxText(err))
			}
			var key string
			if json.Unmarshal(f["key"], &key) != nil {
				return nil, fmt.Errorf("headers[%d]: \"key\" must be a string", i)
			}
			for name := range f {
				if name != "key" && name != "value" && name != "value_base64" {
					return nil, fmt.Errorf("headers[%d]: unknown field %q (key, value, value_base64)", i, name)
				}
			}
			v, err := jsonBytes("header "+strconv.Quote(key)+" value", f["value"], f["value_base64"], nil)
			if err != nil {
				return nil, err
			}
			out = append(out, kgo.RecordHeader{Key: key, Value: v})
		}
	case "an object":
		// A decoder walks the object to keep the headers' order.
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil { // {
			return nil, fmt.Errorf("headers: %s", jsonSyntaxText(err))
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("headers: %s", jsonSyntaxText(err))
			}
			key, _ := tok.(string)
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("headers: %s", jsonSyntaxText(err))
			}
			var b []byte
			if !isJSONNull(v) {
				b = jsonValueBytes(v)
			}
			out = append(out, kgo.RecordHeader{Key: key, Value: b})
		}
	default:
		return nil, fmt.Errorf("headers: want an array of {\"key\", \"value\"} objects or an object of name: value, got %s", jsonKind(raw))
	}
	return out, nil
}
