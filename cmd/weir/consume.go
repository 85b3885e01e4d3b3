package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type consumeOptions struct {
	offset     string
	timestamp  string
	partitions []int32
	count      int
	exitAtEnd  bool
	format     string
	keySep     string
	group      string
	registry   string // schema_values.go: decode wire-format values in -f json

	now func() time.Time // for relative --timestamp values; injected by tests
}

func newConsumeCmd() *cobra.Command {
	o := &consumeOptions{now: time.Now}
	var cf *clientFlags
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records of a topic (from the beginning, an offset or a timestamp)",
		Long: `Print the records of a topic, one per line, and keep following new records until
interrupted (or until -n records were printed, or with -e the end of every partition).

Without --group the topic's partitions are read directly: no consumer group, no
committed offsets. With --group the records are read as a member of that consumer group
and its offsets are committed; --offset then only says where to start when the group has
no committed offset.

Formats: value (the value only), kv (key, --key-separator, value), json (one object per
record with topic, partition, offset, timestamp (ms), key, value, headers; a key or value
that is not valid UTF-8 is given base64-encoded as key_base64 / value_base64).`,
		Example: `  weir consume events -e                       # everything there is now, then exit
  weir consume events -o end                     # only new records
  weir consume events -o 42 -p 0 -n 10           # 10 records of partition 0 from offset 42
  weir consume events --timestamp -15m -f json   # records of the last 15 minutes
  weir consume events --group audit              # as a member of consumer group "audit"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(cmd.Flags()); err != nil {
				return err
			}
			return o.run(cmd.Context(), cf, args[0], cmd.OutOrStdout())
		},
	}
	cf = addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.offset, "offset", "o", "beginning", "where to start: beginning, end, N (absolute offset in every partition), -N (N records before the end)")
	f.StringVar(&o.timestamp, "timestamp", "", "start at the first record with a timestamp >= this: RFC 3339, unix milliseconds, or a negative duration relative to now (-15m)")
	f.Int32SliceVarP(&o.partitions, "partition", "p", nil, "read only these partitions (repeatable or comma separated; default all)")
	f.IntVarP(&o.count, "count", "n", 0, "exit after this many records (0: no limit)")
	f.BoolVarP(&o.exitAtEnd, "exit", "e", false, "exit once the end of every partition (as of start) is reached")
	f.StringVarP(&o.format, "format", "f", "value", "output format: value, kv, json")
	f.StringVarP(&o.keySep, "key-separator", "K", ":", "separator between key and value in the kv format")
	f.StringVarP(&o.group, "group", "g", "", "consume as a member of this consumer group (commits offsets)")
	f.StringVar(&o.registry, "registry", envRegistry(), "with -f json: schema registry URL; wire-format values are added decoded as value_schema {id, value}")
	return cmd
}

func (o *consumeOptions) validate(fs interface{ Changed(string) bool }) error {
	switch o.format {
	case "value", "kv", "json":
	default:
		return fmt.Errorf("--format must be value, kv or json, got %q", o.format)
	}
	if o.count < 0 {
		return fmt.Errorf("--count must not be negative")
	}
	if o.timestamp != "" && fs.Changed("offset") {
		return errors.New("--offset and --timestamp are mutually exclusive")
	}
	if o.group != "" {
		if o.exitAtEnd {
			return errors.New("--exit is not supported with --group (the group decides which partitions this member reads); use -n")
		}
		if len(o.partitions) > 0 {
			return errors.New("--partition is not supported with --group (the group assigns partitions)")
		}
		if o.timestamp != "" {
			return errors.New("--timestamp is not supported with --group")
		}
		if o.offset != "beginning" && o.offset != "end" {
			return errors.New("with --group, --offset must be beginning or end (used when the group has no committed offset)")
		}
	}
	return nil
}

// parseTimestamp accepts unix milliseconds, RFC 3339, or a negative
// duration relative to now.
func parseTimestamp(s string, now time.Time) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	if strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s)
		if err == nil {
			return now.Add(d).UnixMilli(), nil
		}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("--timestamp %q: want unix milliseconds, RFC 3339 (2026-01-02T15:04:05Z) or a negative duration (-15m)", s)
	}
	return t.UnixMilli(), nil
}

// startPlan is, per partition, the offset to start at and the end offset
// observed at start (for --exit).
type startPlan struct {
	start map[int32]int64
	end   map[int32]int64
}

// plan resolves --offset/--timestamp to an exact offset per partition,
// clamped to the partition's [start, end].
func (o *consumeOptions) plan(ctx context.Context, adm *kadm.Client, topic string) (startPlan, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return startPlan{}, fmt.Errorf("metadata: %w", err)
	}
	td, ok := md.Topics[topic]
	if !ok {
		return startPlan{}, fmt.Errorf("topic %q: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if td.Err != nil {
		return startPlan{}, fmt.Errorf("topic %q: %w", topic, td.Err)
	}
	parts := o.partitions
	if len(parts) == 0 {
		for p := range td.Partitions {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	for _, p := range parts {
		if _, ok := td.Partitions[p]; !ok {
			return startPlan{}, fmt.Errorf("topic %q has no partition %d (%d partitions)", topic, p, len(td.Partitions))
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return startPlan{}, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return startPlan{}, fmt.Errorf("list end offsets: %w", err)
	}
	var byTime kadm.ListedOffsets
	if o.timestamp != "" {
		ms, err := parseTimestamp(o.timestamp, o.now())
		if err != nil {
			return startPlan{}, err
		}
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, ms, topic); err != nil {
			return startPlan{}, fmt.Errorf("list offsets by timestamp: %w", err)
		}
	}
	plan := startPlan{start: map[int32]int64{}, end: map[int32]int64{}}
	for _, p := range parts {
		s, sok := starts.Lookup(topic, p)
		e, eok := ends.Lookup(topic, p)
		if !sok || !eok {
			return startPlan{}, fmt.Errorf("partition %d: no offsets in the answer", p)
		}
		if s.Err != nil {
			return startPlan{}, fmt.Errorf("partition %d: start offset: %w", p, s.Err)
		}
		if e.Err != nil {
			return startPlan{}, fmt.Errorf("partition %d: end offset: %w", p, e.Err)
		}
		var at int64
		switch {
		case o.timestamp != "":
			t, ok := byTime.Lookup(topic, p)
			if !ok || t.Err != nil || t.Offset < 0 {
				at = e.Offset // no record that late: start at the end
			} else {
				at = t.Offset
			}
		case o.offset == "beginning":
			at = s.Offset
		case o.offset == "end":
			at = e.Offset
		default:
			n, err := strconv.ParseInt(o.offset, 10, 64)
			if err != nil {
				return startPlan{}, fmt.Errorf("--offset %q: want beginning, end, N or -N", o.offset)
			}
			if n < 0 {
				at = e.Offset + n
			} else {
				at = n
			}
		}
		at = max(s.Offset, min(at, e.Offset))
		plan.start[p] = at
		plan.end[p] = e.Offset
	}
	return plan, nil
}

func (o *consumeOptions) run(ctx context.Context, cf *clientFlags, topic string, stdout io.Writer) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	defer w.Flush()
	out := &recordPrinter{w: w, format: o.format, sep: o.keySep}
	schemas, err := newValueDecoder(o.registry)
	if err != nil {
		return err
	}
	out.schemas = schemas

	var opts []kgo.Opt
	// remaining maps a partition to the end offset still to reach (--exit).
	// A partition is done when a record at end-1 or later was printed.
	// Known gap: a partition whose last offsets hold only transaction
	// control records (commit/abort markers) never prints end-1, so --exit
	// would wait for more data there; weir does not serve transactions yet,
	// Kafka clusters with transactional producers can show it.
	var remaining map[int32]int64
	if o.group == "" {
		adm, done, err := cf.admin()
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, cf.timeout)
		plan, err := o.plan(pctx, adm, topic)
		cancel()
		done()
		if err != nil {
			return err
		}
		offs := make(map[int32]kgo.Offset, len(plan.start))
		remaining = make(map[int32]int64)
		for p, at := range plan.start {
			offs[p] = kgo.NewOffset().At(at)
			if at < plan.end[p] {
				remaining[p] = plan.end[p]
			}
		}
		if o.exitAtEnd && len(remaining) == 0 {
			return nil
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	} else {
		reset := kgo.NewOffset().AtStart()
		if o.offset == "end" {
			reset = kgo.NewOffset().AtEnd()
		}
		opts = append(opts, kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(reset))
	}
	cl, err := cf.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.group != "" {
		defer func() {
			// Commit what was printed before leaving; the context may
			// already be canceled by the signal that stops us.
			cctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
			defer cancel()
			_ = cl.CommitUncommittedOffsets(cctx)
		}()
	}

	var printed int
	for {
		// Poll no more than is still to print, so everything polled is
		// printed (and, with --group, everything committed was printed).
		limit := 0
		if o.count > 0 {
			limit = o.count - printed
		}
		fetches := cl.PollRecords(ctx, limit)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil // interrupted: a normal way to stop following
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			out.print(r)
			printed++
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
		if out.err != nil {
			return fmt.Errorf("write output: %w", out.err)
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		if (o.count > 0 && printed >= o.count) || (o.exitAtEnd && len(remaining) == 0) {
			return nil
		}
	}
}

// recordPrinter writes records in one of the output formats. The first
// write error is kept in err and later writes are skipped.
type recordPrinter struct {
	w      io.Writer
	format string
	sep    string
	err    error

	schemas *valueDecoder // nil: values are not decoded
}

type jsonHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

type jsonRecord struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   int64        `json:"timestamp"`
	Key         *string      `json:"key"`
	KeyBase64   *string      `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 *string      `json:"value_base64,omitempty"`
	Headers     []jsonHeader `json:"headers,omitempty"`
	ValueSchema *schemaValue `json:"value_schema,omitempty"`
}

// textOrBase64 returns b as text when it is valid UTF-8, else base64;
// both nil for a nil (null) b.
func textOrBase64(b []byte) (text, b64 *string) {
	if b == nil {
		return nil, nil
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

func (p *recordPrinter) print(r *kgo.Record) {
	if p.err != nil {
		return
	}
	switch p.format {
	case "value":
		_, p.err = fmt.Fprintf(p.w, "%s\n", r.Value)
	case "kv":
		_, p.err = fmt.Fprintf(p.w, "%s%s%s\n", r.Key, p.sep, r.Value)
	case "json":
		jr := jsonRecord{
			Topic:     r.Topic,
			Partition: r.Partition,
			Offset:    r.Offset,
			Timestamp: r.Timestamp.UnixMilli(),
		}
		jr.Key, jr.KeyBase64 = textOrBase64(r.Key)
		jr.Value, jr.ValueBase64 = textOrBase64(r.Value)
		jr.ValueSchema = p.schemas.decode(r.Value)
		for _, h := range r.Headers {
			jh := jsonHeader{Key: h.Key}
			jh.Value, jh.ValueBase64 = textOrBase64(h.Value)
			jr.Headers = append(jr.Headers, jh)
		}
		var b []byte
		b, p.err = json.Marshal(jr)
		if p.err == nil {
			b = append(b, '\n')
			_, p.err = p.w.Write(b)
		}
	}
}
