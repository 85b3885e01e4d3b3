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
offset are ignored), so consume -f json | produce --input json copies records.

weir produce waits until every record is acknowledged (acks=all by default: on weir,
that means fsynced) and exits non-zero if any record failed.`,
		Example: `  echo 'hello' | weir produce greetings
  printf 'user1:signed up\nuser2:logged in\n' | weir produce events --key-separator :
  weir produce events -H source=cli -H trace=abc < lines.txt
  weir consume events -e -f json | weir produce events-copy --input json`,
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
	cl, err := cf.client(append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())...)
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
			r = o.record(sc.Bytes(), hdrs)
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
func (o *produceOptions) record(line []byte, hdrs [][2]string) *kgo.Record {
	line = bytes.TrimSuffix(line, []byte("\r"))
	r := &kgo.Record{Partition: o.partition}
	if o.keySep != "" {
		if k, v, ok := bytes.Cut(line, []byte(o.keySep)); ok {
			r.Key = bytes.Clone(k)
			if r.Key == nil {
				r.Key = []byte{} // an empty key is a key, not a null key
			}
			line = v
		}
	}
	r.Value = bytes.Clone(line)
	if r.Value == nil {
		r.Value = []byte{}
	}
	for _, h := range hdrs {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	return r
}

// jsonInput is one record in the json input format: the objects weir
// consume -f json prints. topic, partition and offset are accepted and
// ignored (the record goes to the command's topic, partitioned by key
// unless --partition); a timestamp (ms) is kept; a null or absent key or
// value stays null. Unknown fields are an error, so a typo is not dropped.
type jsonInput struct {
	Topic       string         `json:"topic"`
	Partition   int32          `json:"partition"`
	Offset      int64          `json:"offset"`
	Key         *string        `json:"key"`
	KeyBase64   *string        `json:"key_base64"`
	Value       *string        `json:"value"`
	ValueBase64 *string        `json:"value_base64"`
	Timestamp   *int64         `json:"timestamp"`
	Headers     []jsonHeaderIn `json:"headers"`
	ValueSchema any            `json:"value_schema"` // consume --registry's decoding: ignored, value is the record
}

type jsonHeaderIn struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64"`
}

func (o *produceOptions) jsonRecord(line []byte, hdrs [][2]string) (*kgo.Record, error) {
	var in jsonInput
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("bad json record: %w", err)
	}
	if dec.More() {
		return nil, errors.New("bad json record: more than one value on the line")
	}
	r := &kgo.Record{Partition: o.partition}
	var err error
	if r.Key, err = textOrB64("key", in.Key, in.KeyBase64); err != nil {
		return nil, err
	}
	if r.Value, err = textOrB64("value", in.Value, in.ValueBase64); err != nil {
		return nil, err
	}
	if in.Timestamp != nil {
		r.Timestamp = time.UnixMilli(*in.Timestamp)
	}
	for _, h := range in.Headers {
		v, err := textOrB64("header "+strconv.Quote(h.Key), h.Value, h.ValueBase64)
		if err != nil {
			return nil, err
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: v})
	}
	for _, h := range hdrs {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	return r, nil
}

// textOrB64 is the inverse of consume's textOrBase64: at most one of text
// and b64 may be given; neither means null.
func textOrB64(what string, text, b64 *string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, fmt.Errorf("%s: both text and base64 given", what)
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s: bad base64: %w", what, err)
		}
		return b, nil
	}
	return nil, nil
}
