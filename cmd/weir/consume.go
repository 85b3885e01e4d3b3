package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
)

type consumeOptions struct {
	offset     string
	timestamp  string
	partitions []int32
	count      int
	exitAtEnd  bool
	format     string
	keySep     string
	template   string
	group      string
	regex      bool
	isolation  string
	registry   string // schema_values.go: decode wire-format values in -f json
	markers    string // show or skip watermark markers (records with the header weir.wm)
	keyFormat  string // record_fields.go
	valFormat  string

	now func() time.Time // for relative --timestamp values; injected by tests
}

func newConsumeCmd() *cobra.Command {
	o := &consumeOptions{now: time.Now}
	var cf *clientFlags
	cmd := &cobra.Command{
		Use:   "consume TOPIC...",
		Short: "Print records of topics (from the beginning, an offset or a timestamp)",
		Long: `Print the records of one or more topics, one per line, and keep following new
records until interrupted (or until -n records were printed, or with -e the end of every
partition). With --regex the arguments are regular expressions matched against whole
topic names (as Kafka's pattern subscriptions; internal topics are not matched).

Without --group the topics' partitions are read directly: no consumer group, no
committed offsets. With --group the records are read as a member of that consumer group
and its offsets are committed; --offset then only says where to start when the group has
no committed offset. A broker that goes away is waited for (the errors are printed
as they happen); only errors no retry can fix end the command.

--isolation read_committed (the default) shows only records of committed transactions
and stops at the last stable offset, as consumers of an exactly-once pipeline (and
librdkafka/kcat) read; read_uncommitted also shows records of open and aborted
transactions, as the Java console consumer does. On topics without transactions both
are the same.

Formats: value (the value only), kv (key, --key-separator, value, then a tab and the
headers as k=v,k2=v2 if the record has any), json (one object per record with topic,
partition, offset, timestamp (ms), key, value, headers; a key or value that is not
valid UTF-8 is given base64-encoded as key_base64 / value_base64).

-F sets a kcat-like format instead: %t topic, %p partition, %o offset, %k key, %s value,
%K key length, %S value length, %T timestamp (ms), %h headers (k=v,k2=v2), %% a percent
sign; \n, \t and \\ are escapes. A newline ends each record unless the format ends
with one.

Watermark markers (records carrying the header "weir.wm", which weir stream apps write
into their repartition topics) are never data: they are printed as marker lines
("# marker topic/partition@offset writer 3/12 watermark 2026-12-02T00:00:00Z", in json
an object with a "marker" field and no key or value), or left out with --markers skip.

--key-format and --value-format decode keys and values as the Kafka serializer that wrote
them (the console consumer's key.deserializer / value.deserializer, kcat's -s), in every
output format; bytes that do not decode are shown as <not F: 0x...> (in json: null, with
key_base64/value_base64 and key_error/value_error). %K and %S stay byte lengths. produce
--input json copies records printed in the default format; decoded ones are for reading.
` + fieldFormatHelp(),
		Example: `  weir consume events -e                       # everything there is now, then exit
  weir consume events -o end                     # only new records
  weir consume events -o 42 -p 0 -n 10           # 10 records of partition 0 from offset 42
  weir consume events --timestamp -15m -f json   # records of the last 15 minutes
  weir consume events audit -e -F '%t %p %o %k %s %h'
  weir consume zone-demand -e -f kv --key-format windowed:string --value-format int64
  weir consume --regex 'orders-.*' --group audit # as a member of consumer group "audit"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(cmd.Flags()); err != nil {
				return err
			}
			return o.run(cmd.Context(), cf, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cf = addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.offset, "offset", "o", "beginning", "where to start: beginning, end, N (absolute offset in every partition), -N (N records before the end)")
	f.StringVar(&o.timestamp, "timestamp", "", "start at the first record with a timestamp >= this: RFC 3339, unix milliseconds, or a negative duration relative to now (-15m)")
	f.Int32SliceVarP(&o.partitions, "partition", "p", nil, "read only these partitions (repeatable or comma separated; default all)")
	f.IntVarP(&o.count, "count", "n", 0, "exit after this many records (0: no limit)")
	f.BoolVarP(&o.exitAtEnd, "exit", "e", false, "exit once the end of every partition (as of start) is reached")
	f.StringVarP(&o.format, "format", "f", "value", "output format: value, kv, json (-F for a format string)")
	f.StringVarP(&o.keySep, "key-separator", "K", ":", "separator between key and value in the kv format")
	f.StringVarP(&o.group, "group", "g", "", "consume as a member of this consumer group (commits offsets)")
	f.StringVarP(&o.template, "format-string", "F", "", "kcat-like output format, e.g. '%t %p %o %k %s %h' (see above)")
	f.BoolVarP(&o.regex, "regex", "r", false, "the topic arguments are regular expressions matched against whole topic names")
	f.StringVar(&o.isolation, "isolation", "read_committed", "read_committed (only committed transactions; default) or read_uncommitted")
	f.StringVar(&o.markers, "markers", "show", "watermark markers (header weir.wm): show (as markers, never as data) or skip")
	f.StringVar(&o.keyFormat, "key-format", "bytes", "how keys are decoded: bytes, string, json, int64, int32, int16, float64, float32, windowed:F, session:F (see above)")
	f.StringVar(&o.valFormat, "value-format", "bytes", "how values are decoded (as --key-format)")
	f.StringVar(&o.registry, "registry", envRegistry(), "with -f json: schema registry URL; wire-format values are added decoded as value_schema {id, value}")
	return cmd
}

func (o *consumeOptions) validate(fs interface{ Changed(string) bool }) error {
	switch o.format {
	case "value", "kv", "json":
	default:
		return fmt.Errorf("--format must be value, kv or json, got %q", o.format)
	}
	if o.template != "" && fs.Changed("format") {
		return errors.New("--format and --format-string (-F) are mutually exclusive")
	}
	if _, err := parseTemplate(o.template); err != nil {
		return err
	}
	if _, err := parseFieldFormat("key-format", o.keyFormat); err != nil {
		return err
	}
	if _, err := parseFieldFormat("value-format", o.valFormat); err != nil {
		return err
	}
	switch o.markers {
	case "show", "skip":
	default:
		return fmt.Errorf("--markers must be show or skip, got %q", o.markers)
	}
	switch o.isolation {
	case "read_committed", "read_uncommitted":
	default:
		return fmt.Errorf("--isolation must be read_committed or read_uncommitted, got %q", o.isolation)
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
	start map[topicPartition]int64
	end   map[topicPartition]int64
}

// patterns compiles the topic arguments of --regex, anchored: a topic
// matches when its whole name does, as in Kafka's pattern subscriptions.
func patterns(args []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, a := range args {
		re, err := regexp.Compile("^(?:" + a + ")$")
		if err != nil {
			return nil, fmt.Errorf("--regex %q: %w", a, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// resolveTopics returns the topics to read directly: the arguments, or with
// --regex the existing topics (internal ones excluded) a pattern matches.
func (o *consumeOptions) resolveTopics(ctx context.Context, adm *kadm.Client, args []string) ([]string, error) {
	if !o.regex {
		return args, nil
	}
	res, err := patterns(args)
	if err != nil {
		return nil, err
	}
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var topics []string
	for _, t := range all.Names() {
		for _, re := range res {
			if re.MatchString(t) {
				topics = append(topics, t)
				break
			}
		}
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("no topic matches %q", strings.Join(args, " "))
	}
	sort.Strings(topics)
	return topics, nil
}

// plan resolves --offset/--timestamp to an exact offset per partition of
// topics, clamped to the partition's [start, end]. The end is the last
// stable offset under read_committed (what such a reader can reach), the
// high watermark otherwise.
func (o *consumeOptions) plan(ctx context.Context, adm *kadm.Client, topics []string) (startPlan, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return startPlan{}, fmt.Errorf("metadata: %w", err)
	}
	var tps []topicPartition
	for _, topic := range topics {
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
			tps = append(tps, topicPartition{topic, p})
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return startPlan{}, fmt.Errorf("list start offsets: %w", err)
	}
	listEnds := adm.ListEndOffsets
	if o.isolation == "read_committed" {
		listEnds = adm.ListCommittedOffsets
	}
	ends, err := listEnds(ctx, topics...)
	if err != nil {
		return startPlan{}, fmt.Errorf("list end offsets: %w", err)
	}
	var byTime kadm.ListedOffsets
	if o.timestamp != "" {
		ms, err := parseTimestamp(o.timestamp, o.now())
		if err != nil {
			return startPlan{}, err
		}
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, ms, topics...); err != nil {
			return startPlan{}, fmt.Errorf("list offsets by timestamp: %w", err)
		}
	}
	plan := startPlan{start: map[topicPartition]int64{}, end: map[topicPartition]int64{}}
	for _, tp := range tps {
		name := partitionName(tp.topic, tp.partition)
		s, sok := starts.Lookup(tp.topic, tp.partition)
		e, eok := ends.Lookup(tp.topic, tp.partition)
		if !sok || !eok {
			return startPlan{}, fmt.Errorf("%s: no offsets in the answer", name)
		}
		if s.Err != nil {
			return startPlan{}, fmt.Errorf("%s: start offset: %w", name, s.Err)
		}
		if e.Err != nil {
			return startPlan{}, fmt.Errorf("%s: end offset: %w", name, e.Err)
		}
		var at int64
		switch {
		case o.timestamp != "":
			t, ok := byTime.Lookup(tp.topic, tp.partition)
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
		plan.start[tp] = at
		plan.end[tp] = e.Offset
	}
	return plan, nil
}

func (o *consumeOptions) run(ctx context.Context, cf *clientFlags, args []string, stdout, stderr io.Writer) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	defer w.Flush()
	tmpl, err := parseTemplate(o.template)
	if err != nil {
		return err
	}
	out := &recordPrinter{w: w, format: o.format, sep: o.keySep, template: tmpl}
	if out.key, err = parseFieldFormat("key-format", o.keyFormat); err != nil {
		return err
	}
	if out.value, err = parseFieldFormat("value-format", o.valFormat); err != nil {
		return err
	}
	schemas, err := newValueDecoder(o.registry)
	if err != nil {
		return err
	}
	out.schemas = schemas

	// Control records (transaction markers) are kept, to be seen and not
	// printed: they take offsets, often the last one below the end.
	opts := []kgo.Opt{kgo.KeepControlRecords(), kgo.FetchIsolationLevel(kgo.ReadUncommitted())}
	if o.isolation == "read_committed" {
		opts = []kgo.Opt{kgo.KeepControlRecords(), kgo.FetchIsolationLevel(kgo.ReadCommitted())}
	}
	// remaining maps a partition to the end offset still to reach (--exit).
	// A partition is done when a record or marker at end-1 or later was
	// read. The last offset below the end is never an aborted record: under
	// read_committed the end is the last stable offset, and a transaction's
	// last offset is its marker.
	var remaining map[topicPartition]int64
	if o.group == "" {
		adm, done, err := cf.admin(ctx)
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, cf.timeout)
		topics, err := o.resolveTopics(pctx, adm, args)
		var plan startPlan
		if err == nil {
			plan, err = o.plan(pctx, adm, topics)
		}
		cancel()
		done()
		if err != nil {
			return err
		}
		offs := map[string]map[int32]kgo.Offset{}
		remaining = make(map[topicPartition]int64)
		for tp, at := range plan.start {
			if offs[tp.topic] == nil {
				offs[tp.topic] = map[int32]kgo.Offset{}
			}
			offs[tp.topic][tp.partition] = kgo.NewOffset().At(at)
			if at < plan.end[tp] {
				remaining[tp] = plan.end[tp]
			}
		}
		if o.exitAtEnd && len(remaining) == 0 {
			return nil
		}
		opts = append(opts, kgo.ConsumePartitions(offs))
	} else {
		reset := kgo.NewOffset().AtStart()
		if o.offset == "end" {
			reset = kgo.NewOffset().AtEnd()
		}
		topics := args
		if o.regex {
			res, err := patterns(args)
			if err != nil {
				return err
			}
			topics = nil
			for _, re := range res {
				topics = append(topics, re.String())
			}
			opts = append(opts, kgo.ConsumeRegex())
		}
		opts = append(opts, kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(reset))
	}
	cl, err := cf.connect(ctx, opts...)
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

	var (
		printed int
		retry   retrier
	)
	for {
		// Poll no more than is still to print, so everything polled is
		// printed (and, with --group, everything committed was printed;
		// control records count against the limit, which only makes the
		// next poll come sooner).
		limit := 0
		if o.count > 0 {
			limit = o.count - printed
		}
		fetches := cl.PollRecords(ctx, limit)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil // interrupted: a normal way to stop following
		}
		var fatal error
		var transient []error
		fetches.EachError(func(t string, p int32, err error) {
			switch {
			case errors.Is(err, context.Canceled):
			case fatalConsumeError(err):
				if fatal == nil {
					fatal = fmt.Errorf("fetch %s: %w", partitionName(t, p), err)
				}
			default:
				transient = append(transient, fmt.Errorf("%s: %w", partitionName(t, p), err))
			}
		})
		if fatal != nil {
			return fatal
		}
		fetches.EachRecord(func(r *kgo.Record) {
			switch m, isMarker, merr := stream.ParseWatermarkMarker(r.Headers); {
			case r.Attrs.IsControl():
			case isMarker && o.markers == "skip":
			case isMarker:
				out.printMarker(r, m, merr)
				printed++
			default:
				out.print(r)
				printed++
			}
			tp := topicPartition{r.Topic, r.Partition}
			if end, ok := remaining[tp]; ok && r.Offset+1 >= end {
				delete(remaining, tp)
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
		if len(transient) > 0 {
			// The client retries by itself (reconnects, rejoins the
			// group, refreshes metadata); this only says so and paces
			// the polls while it does.
			if !retry.wait(ctx, stderr, errors.Join(transient...)) {
				return nil
			}
		} else if fetches.NumRecords() > 0 {
			retry.recovered(stderr)
		}
	}
}

// partitionName is "topic/partition", or what is known of it (a group
// error has neither).
func partitionName(topic string, p int32) string {
	switch {
	case topic == "":
		return "group"
	case p < 0:
		return topic
	}
	return fmt.Sprintf("%s/%d", topic, p)
}

// fatalConsumeError reports whether a fetch or group error ends consume.
// Everything the client recovers from by itself is not fatal: a broker
// that is down or restarting (refused or reset connections, timeouts), a
// coordinator or leader moving, a rebalance. Fatal are Kafka errors that
// are not retriable and not part of group membership (authorization,
// invalid group id or topic, unsupported version), a batch the client
// refuses to decompress, and a closed client.
func fatalConsumeError(err error) bool {
	if errors.Is(err, kgo.ErrClientClosed) {
		return true
	}
	if _, ok := errors.AsType[*kgo.ErrDecompressTooLarge](err); ok {
		return true
	}
	if _, ok := errors.AsType[*kgo.ErrDataLoss](err); ok {
		return false // the client reset and goes on; printed as a warning
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress,
			kerr.FencedMemberEpoch, kerr.StaleMemberEpoch, kerr.UnreleasedInstanceID,
			kerr.OffsetOutOfRange:
			return false // group membership and resets the client handles
		}
		return !ke.Retriable
	}
	return false
}

// retrier paces consume's polls while the client recovers from transient
// errors, and tells the user (stderr) when it started and when it is over.
// The backoff doubles from 250ms to 5s.
type retrier struct {
	backoff time.Duration
	last    string
}

// wait reports err (once per distinct message) and sleeps the backoff; false
// if ctx ended meanwhile.
func (r *retrier) wait(ctx context.Context, stderr io.Writer, err error) bool {
	r.backoff = min(max(2*r.backoff, 250*time.Millisecond), 5*time.Second)
	if msg := err.Error(); msg != r.last {
		r.last = msg
		fmt.Fprintf(stderr, "weir: %v (retrying)\n", err)
	}
	t := time.NewTimer(r.backoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// recovered resets the backoff after records arrived again.
func (r *retrier) recovered(stderr io.Writer) {
	if r.last != "" {
		fmt.Fprintln(stderr, "weir: consuming again")
	}
	r.backoff, r.last = 0, ""
}

// recordPrinter writes records in one of the output formats. The first
// write error is kept in err and later writes are skipped.
type recordPrinter struct {
	w        io.Writer
	format   string
	sep      string
	template []templatePart // -F; nil: format
	err      error

	key, value *fieldFormat // nil: bytes

	schemas *valueDecoder // nil: values are not decoded
}

// templatePart is a literal or one %-field of a -F format string.
type templatePart struct {
	lit   string
	field byte // 0 for a literal
}

// parseTemplate parses a kcat-like format string (see consume --help). A
// newline is appended unless it ends with one. "" gives nil.
func parseTemplate(s string) ([]templatePart, error) {
	if s == "" {
		return nil, nil
	}
	var parts []templatePart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, templatePart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' && c != '\\' || i+1 == len(s) {
			if c == '%' || c == '\\' {
				return nil, fmt.Errorf("--format-string %q: %q at the end", s, c)
			}
			lit.WriteByte(c)
			continue
		}
		i++
		n := s[i]
		if c == '\\' {
			switch n {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, fmt.Errorf("--format-string %q: unknown escape \\%c (\\n, \\t, \\r, \\\\)", s, n)
			}
			continue
		}
		switch n {
		case '%':
			lit.WriteByte('%')
		case 't', 'p', 'o', 'k', 's', 'K', 'S', 'T', 'h':
			flush()
			parts = append(parts, templatePart{field: n})
		default:
			return nil, fmt.Errorf("--format-string %q: unknown field %%%c (%%t %%p %%o %%k %%s %%K %%S %%T %%h %%%%)", s, n)
		}
	}
	if !strings.HasSuffix(lit.String(), "\n") {
		lit.WriteByte('\n')
	}
	flush()
	return parts, nil
}

// headerText is a record's headers as kcat's %h prints them: k=v,k2=v2.
func headerText(hs []kgo.RecordHeader) string {
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(h.Key)
		b.WriteByte('=')
		b.Write(h.Value)
	}
	return b.String()
}

// lengthText is a key's or value's length as kcat prints it (-1 for null).
func lengthText(b []byte) string {
	if b == nil {
		return "-1"
	}
	return strconv.Itoa(len(b))
}

func (p *recordPrinter) printTemplate(r *kgo.Record) {
	var b []byte
	for _, part := range p.template {
		switch part.field {
		case 0:
			b = append(b, part.lit...)
		case 't':
			b = append(b, r.Topic...)
		case 'p':
			b = strconv.AppendInt(b, int64(r.Partition), 10)
		case 'o':
			b = strconv.AppendInt(b, r.Offset, 10)
		case 'k':
			b = p.key.appendText(b, r.Key)
		case 's':
			b = p.value.appendText(b, r.Value)
		case 'K':
			b = append(b, lengthText(r.Key)...)
		case 'S':
			b = append(b, lengthText(r.Value)...)
		case 'T':
			b = strconv.AppendInt(b, r.Timestamp.UnixMilli(), 10)
		case 'h':
			b = append(b, headerText(r.Headers)...)
		}
	}
	_, p.err = p.w.Write(b)
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
	Key         any          `json:"key"`
	KeyBase64   *string      `json:"key_base64,omitempty"`
	KeyError    string       `json:"key_error,omitempty"`
	Value       any          `json:"value"`
	ValueBase64 *string      `json:"value_base64,omitempty"`
	ValueError  string       `json:"value_error,omitempty"`
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
	if p.template != nil {
		p.printTemplate(r)
		return
	}
	switch p.format {
	case "value":
		_, p.err = p.w.Write(append(p.value.appendText(nil, r.Value), '\n'))
	case "kv":
		b := p.key.appendText(nil, r.Key)
		b = p.value.appendText(append(b, p.sep...), r.Value)
		if len(r.Headers) > 0 {
			b = append(append(b, '\t'), headerText(r.Headers)...)
		}
		_, p.err = p.w.Write(append(b, '\n'))
	case "json":
		jr := jsonRecord{
			Topic:     r.Topic,
			Partition: r.Partition,
			Offset:    r.Offset,
			Timestamp: r.Timestamp.UnixMilli(),
		}
		jr.Key, jr.KeyBase64, jr.KeyError = p.key.jsonField(r.Key)
		jr.Value, jr.ValueBase64, jr.ValueError = p.value.jsonField(r.Value)
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

type jsonMarker struct {
	Writer        uint32 `json:"writer"`
	Writers       uint32 `json:"writers"`
	Watermark     *int64 `json:"watermark"` // ms; null: the writer has none yet
	WatermarkTime string `json:"watermark_time,omitempty"`
	Idle          bool   `json:"idle,omitempty"`
	Error         string `json:"error,omitempty"` // a marker header that does not decode
}

type jsonMarkerRecord struct {
	Topic     string     `json:"topic"`
	Partition int32      `json:"partition"`
	Offset    int64      `json:"offset"`
	Timestamp int64      `json:"timestamp"`
	Marker    jsonMarker `json:"marker"`
}

// printMarker writes a watermark marker as a marker, never as a data
// record: a "# marker" line, or in json an object with a "marker" field
// and no key or value. A marker header that does not decode is still a
// marker, shown with its error.
func (p *recordPrinter) printMarker(r *kgo.Record, m stream.WatermarkMarker, merr error) {
	if p.err != nil {
		return
	}
	jm := jsonMarker{Writer: m.Writer, Writers: m.Writers, Idle: m.Idle}
	wm := "none"
	if merr != nil {
		jm.Error = merr.Error()
	} else if m.Watermark != math.MinInt64 {
		jm.Watermark = &m.Watermark
		jm.WatermarkTime = time.UnixMilli(m.Watermark).UTC().Format(time.RFC3339Nano)
		wm = jm.WatermarkTime
	}
	if p.template == nil && p.format == "json" {
		b, err := json.Marshal(jsonMarkerRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			Timestamp: r.Timestamp.UnixMilli(), Marker: jm})
		if p.err = err; err == nil {
			_, p.err = p.w.Write(append(b, '\n'))
		}
		return
	}
	line := fmt.Sprintf("# marker %s/%d@%d ", r.Topic, r.Partition, r.Offset)
	switch {
	case merr != nil:
		line += "malformed: " + merr.Error()
	default:
		line += fmt.Sprintf("writer %d/%d watermark %s", m.Writer, m.Writers, wm)
		if m.Idle {
			line += " idle"
		}
	}
	_, p.err = fmt.Fprintln(p.w, line)
}
