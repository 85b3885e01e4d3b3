package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// weir group reset-offsets: move a group's committed offsets, as
// kafka-consumer-groups --reset-offsets does: select partitions (--topic
// t, --topic t:0,2, --all-topics, or a plan file), pick a target (earliest,
// latest, an offset, a time, a duration back, a shift), see the plan (dry
// run) or apply it (--execute); --export prints the plan as CSV, which
// --from-file reads back.

// resetSpec is the target: one of the --to-* / --by-duration / --shift-by
// flags, or the offsets of a plan file.
type resetSpec struct {
	earliest, latest bool
	toOffset         int64
	toOffsetSet      bool
	datetime         string
	byDuration       string
	shiftBy          int64
	shiftSet         bool
	fromFile         map[topicPartition]int64 // --from-file

	now func() time.Time // for relative times; injected by tests
}

type topicPartition struct {
	topic     string
	partition int32
}

func (s resetSpec) validate() error {
	n := 0
	for _, b := range []bool{s.earliest, s.latest, s.toOffsetSet, s.datetime != "", s.byDuration != "", s.shiftSet, s.fromFile != nil} {
		if b {
			n++
		}
	}
	if n != 1 {
		return errors.New("exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --by-duration, --shift-by, --from-file is required")
	}
	return nil
}

// targetTime is the time --to-datetime or --by-duration names (ok false if
// neither is set).
func (s resetSpec) targetTime() (t time.Time, ok bool, err error) {
	switch {
	case s.datetime != "":
		t, err = parseDatetime(s.datetime, s.now())
		return t, true, err
	case s.byDuration != "":
		d, err := parseDurationArg(s.byDuration)
		if err != nil {
			return time.Time{}, true, fmt.Errorf("--by-duration %q: %w", s.byDuration, err)
		}
		return s.now().Add(-d), true, nil
	}
	return time.Time{}, false, nil
}

// parseDatetime accepts what consume --timestamp accepts (unix
// milliseconds, RFC 3339, a negative duration relative to now such as -15m
// or -P1D) and kafka-consumer-groups' local layouts without a zone, read as
// UTC (2006-01-02T15:04:05.000, 2006-01-02T15:04:05, a date).
func parseDatetime(s string, now time.Time) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		if d, err := parseDurationArg(rest); err == nil {
			return now.Add(-d), nil
		}
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000", "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--to-datetime %q: want RFC 3339 (2026-01-02T15:04:05Z), 2026-01-02T15:04:05 (UTC), a date, unix milliseconds, or a time back from now (-15m, -P1DT2H)", s)
}

// isoDuration is ISO 8601's PnDTnHnMnS (kafka-consumer-groups --by-duration).
var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// parseDurationArg accepts a Go duration (90m, 1h30m) or ISO 8601
// PnDTnHnMnS (P1D, PT15M); it must not be negative.
func parseDurationArg(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, errors.New("must not be negative")
		}
		return d, nil
	}
	m := isoDuration.FindStringSubmatch(strings.ToUpper(s))
	if m == nil || s == "P" || strings.HasSuffix(strings.ToUpper(s), "T") {
		return 0, errors.New("want a duration such as 90m, 1h30m, P1D or PT15M")
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
		if m[i+1] != "" {
			n, err := strconv.ParseInt(m[i+1], 10, 64)
			if err != nil || n > int64(1<<62)/int64(unit) {
				return 0, errors.New("too large")
			}
			d += time.Duration(n) * unit
		}
	}
	if m[4] != "" {
		f, err := strconv.ParseFloat(m[4], 64)
		if err != nil || f > 1e9 {
			return 0, errors.New("too large")
		}
		d += time.Duration(f * float64(time.Second))
	}
	return d, nil
}

// topicSelection is the partitions --topic names: every partition of a
// topic (parts nil) or some.
type topicSelection map[string]map[int32]bool

// parseTopicSelection reads --topic values: "t" (all partitions), "t:0,2"
// (partitions 0 and 2), several topics comma separated ("a,b"); a number
// after "t:p" continues t's partition list.
func parseTopicSelection(vals []string) (topicSelection, error) {
	sel := topicSelection{}
	// add selects partition p of topic (p < 0: all of them); a topic
	// selected whole stays whole.
	add := func(topic string, p int32) {
		parts, seen := sel[topic]
		switch {
		case p < 0:
			sel[topic] = nil
		case seen && parts == nil:
		case parts == nil:
			sel[topic] = map[int32]bool{p: true}
		default:
			parts[p] = true
		}
	}
	for _, v := range vals {
		last := "" // the topic a bare number continues
		for _, tok := range strings.Split(v, ",") {
			tok = strings.TrimSpace(tok)
			if tok == "" {
				continue
			}
			if n, err := strconv.ParseInt(tok, 10, 32); err == nil && last != "" {
				if n < 0 {
					return nil, fmt.Errorf("--topic %q: partition %d is negative", v, n)
				}
				add(last, int32(n))
				continue
			}
			topic, part, hasPart := strings.Cut(tok, ":")
			if topic == "" {
				return nil, fmt.Errorf("--topic %q: empty topic name", v)
			}
			if !hasPart {
				add(topic, -1)
				last = ""
				continue
			}
			n, err := strconv.ParseInt(part, 10, 32)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--topic %q: %q is not a partition number (want topic:0,2)", v, part)
			}
			add(topic, int32(n))
			last = topic
		}
	}
	return sel, nil
}

func (s topicSelection) topics() []string {
	out := make([]string, 0, len(s))
	for t := range s {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// readPlanCSV reads a reset plan as kafka-consumer-groups --export writes
// it: one "topic,partition,offset" line per partition, or
// "group,topic,partition,offset" (the multi-group form; lines of other
// groups are skipped).
func readPlanCSV(r io.Reader, group string) (map[topicPartition]int64, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	plan := map[topicPartition]int64{}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("plan file: %w", err)
		}
		switch len(rec) {
		case 3:
		case 4:
			if rec[0] != group {
				continue
			}
			rec = rec[1:]
		default:
			return nil, fmt.Errorf("plan file line %d: %d fields, want topic,partition,offset (or group,topic,partition,offset)", line, len(rec))
		}
		p, err := strconv.ParseInt(rec[1], 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("plan file line %d: partition %q is not a partition number", line, rec[1])
		}
		off, err := strconv.ParseInt(rec[2], 10, 64)
		if err != nil || off < 0 {
			return nil, fmt.Errorf("plan file line %d: offset %q is not an offset", line, rec[2])
		}
		if rec[0] == "" {
			return nil, fmt.Errorf("plan file line %d: empty topic", line)
		}
		plan[topicPartition{rec[0], int32(p)}] = off
	}
	if len(plan) == 0 {
		return nil, fmt.Errorf("plan file: no partition of group %q in it", group)
	}
	return plan, nil
}

// resetPlan is one partition's change.
type resetPlan struct {
	topic      string
	partition  int32
	current    int64 // -1: none
	target     int64
	start, end int64
	note       string
}

// planReset computes the new offsets. afterTime answers --to-datetime and
// --by-duration. Targets are clamped to [log start, log end] like Kafka's
// tool, and the clamp is reported.
func planReset(spec resetSpec, pos []partitionPos, afterTime kadm.ListedOffsets) []resetPlan {
	var out []resetPlan
	for _, p := range pos {
		rp := resetPlan{topic: p.topic, partition: p.partition, current: p.committed, start: p.start, end: p.end}
		switch {
		case spec.earliest:
			rp.target = p.start
		case spec.latest:
			rp.target = p.end
		case spec.toOffsetSet:
			rp.target = spec.toOffset
		case spec.shiftSet:
			base := p.committed
			if base < 0 {
				base = p.end
			}
			rp.target = base + spec.shiftBy
		case spec.fromFile != nil:
			rp.target = spec.fromFile[topicPartition{p.topic, p.partition}]
		default: // a time
			rp.target = p.end
			if o, ok := afterTime.Lookup(p.topic, p.partition); ok && o.Err == nil && o.Offset >= 0 {
				rp.target = o.Offset
			}
		}
		switch {
		case rp.target < p.start:
			rp.note = fmt.Sprintf("target %d is before the log start %d (outside the replay reach): using %d", rp.target, p.start, p.start)
			rp.target = p.start
		case rp.target > p.end:
			rp.note = fmt.Sprintf("target %d is past the log end %d: using %d", rp.target, p.end, p.end)
			rp.target = p.end
		}
		out = append(out, rp)
	}
	return out
}

// resetTargets is what reset-offsets acts on: the positions of the selected
// partitions (topics with a partition selection keep only those).
func resetTargets(ctx context.Context, adm *kadm.Client, gi *groupInfo, sel topicSelection, all bool) ([]partitionPos, error) {
	var topics []string
	if !all {
		topics = sel.topics()
	}
	pos, err := groupPositions(ctx, adm, gi, topics)
	if err != nil {
		return nil, err
	}
	if all && len(pos) == 0 {
		return nil, fmt.Errorf("group %q has no committed offsets: --all-topics selects nothing (name the topics with --topic)", gi.name)
	}
	var out []partitionPos
	found := map[topicPartition]bool{}
	for _, p := range pos {
		if err := errors.Join(p.startErr, p.endErr); err != nil {
			return nil, fmt.Errorf("%s/%d: list offsets: %w", p.topic, p.partition, err)
		}
		if parts := sel[p.topic]; !all && parts != nil && !parts[p.partition] {
			continue
		}
		found[topicPartition{p.topic, p.partition}] = true
		out = append(out, p)
	}
	for _, t := range sel.topics() {
		for p := range sel[t] {
			if !found[topicPartition{t, p}] {
				return nil, fmt.Errorf("topic %q has no partition %d", t, p)
			}
		}
	}
	return out, nil
}

func newGroupResetOffsetsCmd(cf *clientFlags) *cobra.Command {
	var (
		spec              = resetSpec{now: time.Now}
		topicArgs         []string
		allTopics, export bool
		execute           bool
		fromFile          string
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP (--topic T[:P,...] | --all-topics | --from-file PLAN.csv) (--to-earliest|--to-latest|--to-offset N|--to-datetime T|--by-duration D|--shift-by N)",
		Short: "Move a group's committed offsets (dry run unless --execute; the group must have no members)",
		Long: `Move a group's committed offsets, as kafka-consumer-groups --reset-offsets does.

Partitions: --topic T (all its partitions), --topic T:0,2 (some), repeatable; or
--all-topics (every topic the group has committed offsets for); or --from-file, a plan
as --export writes it (CSV lines topic,partition,offset, or group,topic,partition,offset),
which also gives the targets.

Targets are clamped to [log start, log end], with a warning. Nothing changes without
--execute; --export prints the plan as CSV instead of a table.`,
		Example: `  weir group reset-offsets billing --topic orders --to-earliest
  weir group reset-offsets billing --topic orders:0,2 --to-datetime 2026-01-02T15:00:00Z --execute
  weir group reset-offsets billing --all-topics --to-datetime -2h --execute
  weir group reset-offsets billing --topic orders --by-duration PT30M --export > plan.csv
  weir group reset-offsets billing --from-file plan.csv --execute
  weir group reset-offsets billing --topic orders --shift-by -100 --execute`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			spec.toOffsetSet = cmd.Flags().Changed("to-offset")
			spec.shiftSet = cmd.Flags().Changed("shift-by")
			n := 0
			for _, b := range []bool{len(topicArgs) > 0, allTopics, fromFile != ""} {
				if b {
					n++
				}
			}
			if n != 1 {
				return errors.New("exactly one of --topic, --all-topics, --from-file is required")
			}
			if fromFile != "" {
				f, err := os.Open(fromFile)
				if err != nil {
					return err
				}
				defer f.Close()
				if spec.fromFile, err = readPlanCSV(f, args[0]); err != nil {
					return err
				}
			}
			if err := spec.validate(); err != nil {
				return err
			}
			_, _, err := spec.targetTime()
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			out := cmd.OutOrStdout()
			sel, err := parseTopicSelection(topicArgs)
			if err != nil {
				return err
			}
			for tp := range spec.fromFile {
				if sel[tp.topic] == nil {
					sel[tp.topic] = map[int32]bool{}
				}
				sel[tp.topic][tp.partition] = true
			}
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			gi, err := describeGroup(ctx, adm, group)
			if err != nil {
				return err
			}
			if len(gi.members) > 0 {
				return fmt.Errorf("group %q has %d active members (state %s): stop its consumers first; offsets of a live group are overwritten by its next commit", group, len(gi.members), gi.state)
			}
			pos, err := resetTargets(ctx, adm, gi, sel, allTopics)
			if err != nil {
				return err
			}
			var after kadm.ListedOffsets
			if ts, ok, err := spec.targetTime(); err != nil {
				return err
			} else if ok {
				var topics []string
				for _, p := range pos {
					if len(topics) == 0 || topics[len(topics)-1] != p.topic {
						topics = append(topics, p.topic)
					}
				}
				after, err = adm.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), topics...)
				if err != nil {
					return fmt.Errorf("list offsets after %s: %w", ts.UTC().Format(time.RFC3339), err)
				}
			}
			plan := planReset(spec, pos, after)
			if export {
				if err := writePlanCSV(out, plan); err != nil {
					return err
				}
			} else {
				printPlan(out, group, plan)
			}
			// With --export, stdout holds only the plan; the rest goes to
			// stderr so the CSV can be redirected to a file.
			msgs := out
			if export {
				msgs = cmd.ErrOrStderr()
			}
			if !execute {
				fmt.Fprintln(msgs, "\ndry run: nothing changed; add --execute to apply")
				return nil
			}
			commit := kadm.Offsets{}
			for _, p := range plan {
				commit.Add(kadm.Offset{Topic: p.topic, Partition: p.partition, At: p.target, LeaderEpoch: -1})
			}
			resp, err := adm.CommitOffsets(ctx, group, commit)
			if err != nil {
				return fmt.Errorf("commit offsets: %w", err)
			}
			if err := resp.Error(); err != nil {
				return fmt.Errorf("commit offsets: %w", err)
			}
			fmt.Fprintf(msgs, "\napplied: %d partitions of group %q reset\n", len(plan), group)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&topicArgs, "topic", nil, "topic to reset: T (all partitions) or T:0,2 (those partitions); repeatable, several topics comma separated")
	f.BoolVar(&allTopics, "all-topics", false, "reset every topic the group has committed offsets for")
	f.StringVar(&fromFile, "from-file", "", "reset to the offsets of a plan file (CSV as --export writes it)")
	f.BoolVar(&spec.earliest, "to-earliest", false, "reset to the log start offset")
	f.BoolVar(&spec.latest, "to-latest", false, "reset to the log end offset")
	f.Int64Var(&spec.toOffset, "to-offset", 0, "reset to this offset")
	f.StringVar(&spec.datetime, "to-datetime", "", "reset to the first offset with a timestamp at or after this time: RFC 3339, 2026-01-02T15:04:05 (UTC), unix ms, or back from now (-15m, -P1D)")
	f.StringVar(&spec.byDuration, "by-duration", "", "reset to the first offset with a timestamp at or after now minus this duration (90m, PT1H30M)")
	f.Int64Var(&spec.shiftBy, "shift-by", 0, "move the committed offset by N (negative: back)")
	f.BoolVar(&execute, "execute", false, "apply the change (default: dry run)")
	f.BoolVar(&export, "export", false, "print the plan as CSV (topic,partition,offset), as kafka-consumer-groups --export; --from-file reads it")
	return cmd
}

// writePlanCSV writes the plan as kafka-consumer-groups --export does for
// one group: topic,partition,offset per line, no header.
func writePlanCSV(w io.Writer, plan []resetPlan) error {
	cw := csv.NewWriter(w)
	for _, p := range plan {
		if err := cw.Write([]string{p.topic, strconv.Itoa(int(p.partition)), strconv.FormatInt(p.target, 10)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func printPlan(w io.Writer, group string, plan []resetPlan) {
	fmt.Fprintf(w, "group %s:\n", group)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\t\tNEW\tLOG-START\tLOG-END")
	var notes []string
	for _, p := range plan {
		cur := "-"
		if p.current >= 0 {
			cur = fmt.Sprint(p.current)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t→\t%d\t%d\t%d\n", p.topic, p.partition, cur, p.target, p.start, p.end)
		if p.note != "" {
			notes = append(notes, fmt.Sprintf("%s/%d: %s", p.topic, p.partition, p.note))
		}
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, "warning:", n)
	}
}
