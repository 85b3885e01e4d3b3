package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// weir topic trim: DeleteRecords (kafka-delete-records), the log start of
// partitions moved forward to an offset or to the first record at or after
// a time. Whole segments below it are deleted by the broker's retention
// pass; consumers can no longer read below it at once.

// trimPlan is one partition's trim.
type trimPlan struct {
	topic      string
	partition  int32
	start, end int64 // before the trim
	target     int64
}

func newTopicTrimCmd(cf *clientFlags) *cobra.Command {
	var (
		before     string
		partitions []int32
		dryRun     bool
		now        = time.Now
	)
	cmd := &cobra.Command{
		Use:   "trim TOPIC --before OFFSET|TIME",
		Short: "Delete the records of a topic before an offset or a time (DeleteRecords)",
		Long: `Move the log start of a topic's partitions forward, deleting the records before it
(Kafka's DeleteRecords, as kafka-delete-records does). Consumers can no longer read
below the new log start; the replay reach shrinks accordingly.

--before OFFSET (a whole number) trims every selected partition to that offset; an
offset past a partition's end is an error, one below its log start changes nothing.
--before TIME trims each partition to its first record with a timestamp at or after
TIME (nothing newer: the whole partition): RFC 3339, 2026-01-02T15:04:05 (UTC), a date,
or back from now (-24h, -P7D).`,
		Example: `  weir topic trim events --before 1000 -p 0
  weir topic trim events --before 2026-01-02T00:00:00Z
  weir topic trim events --before -P7D --dry-run`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if before == "" {
				return errors.New("--before is required (an offset or a time)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			var (
				offset int64 = -1
				at     time.Time
			)
			if n, err := strconv.ParseInt(before, 10, 64); err == nil {
				if n < 0 {
					return fmt.Errorf("--before %d: an offset must not be negative", n)
				}
				offset = n
			} else {
				t, err := parseDatetime(before, now())
				if err != nil {
					return fmt.Errorf("--before %q: want an offset or a time: RFC 3339, 2026-01-02T15:04:05 (UTC), a date, or back from now (-24h, -P7D)", before)
				}
				at = t
			}
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			plan, err := planTrim(ctx, adm, topic, partitions, offset, at)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if dryRun {
				printTrim(out, plan, nil)
				fmt.Fprintln(out, "\ndry run: nothing deleted")
				return nil
			}
			del := kadm.Offsets{}
			for _, p := range plan {
				del.Add(kadm.Offset{Topic: p.topic, Partition: p.partition, At: p.target, LeaderEpoch: -1})
			}
			resps, err := adm.DeleteRecords(ctx, del)
			if err != nil {
				return fmt.Errorf("delete records: %w", err)
			}
			printTrim(out, plan, resps)
			return resps.Error()
		},
	}
	f := cmd.Flags()
	f.StringVar(&before, "before", "", "delete the records before this offset or time")
	f.Int32SliceVarP(&partitions, "partition", "p", nil, "only these partitions (repeatable or comma separated; default all)")
	f.BoolVar(&dryRun, "dry-run", false, "show the new log starts without deleting anything")
	return cmd
}

// planTrim computes each selected partition's new log start: offset, or
// (offset < 0) the first offset at or after at.
func planTrim(ctx context.Context, adm *kadm.Client, topic string, partitions []int32, offset int64, at time.Time) ([]trimPlan, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("topic %q: %w", topic, err)
	}
	var after kadm.ListedOffsets
	if offset < 0 {
		if after, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topic); err != nil {
			return nil, fmt.Errorf("list offsets by time: %w", err)
		}
	}
	want := map[int32]bool{}
	for _, p := range partitions {
		want[p] = true
	}
	var plan []trimPlan
	var errs []error
	found := map[int32]bool{}
	ends.Each(func(e kadm.ListedOffset) {
		if len(want) > 0 && !want[e.Partition] {
			return
		}
		found[e.Partition] = true
		p := trimPlan{topic: topic, partition: e.Partition, end: e.Offset, target: offset}
		if s, ok := starts.Lookup(topic, e.Partition); ok && s.Err == nil {
			p.start = s.Offset
		}
		if offset < 0 {
			p.target = p.end
			if o, ok := after.Lookup(topic, e.Partition); ok && o.Err == nil && o.Offset >= 0 {
				p.target = o.Offset
			}
		}
		if p.target > p.end {
			errs = append(errs, fmt.Errorf("%s/%d: offset %d is past the log end %d", topic, e.Partition, p.target, p.end))
			return
		}
		p.target = max(p.target, p.start)
		plan = append(plan, p)
	})
	for p := range want {
		if !found[p] {
			errs = append(errs, fmt.Errorf("topic %q has no partition %d", topic, p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(plan, func(i, j int) bool { return plan[i].partition < plan[j].partition })
	return plan, nil
}

func printTrim(w io.Writer, plan []trimPlan, resps kadm.DeleteRecordsResponses) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLOG-START\t\tNEW-LOG-START\tLOG-END\tDELETED")
	for _, p := range plan {
		newStart, note := strconv.FormatInt(p.target, 10), strconv.FormatInt(p.target-p.start, 10)
		if resps != nil {
			r, ok := resps.Lookup(p.topic, p.partition)
			switch {
			case !ok:
				note = "no answer"
			case r.Err != nil:
				note = "error: " + r.Err.Error()
			default:
				newStart, note = strconv.FormatInt(r.LowWatermark, 10), strconv.FormatInt(r.LowWatermark-p.start, 10)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t→\t%s\t%d\t%s\n", p.topic, p.partition, p.start, newStart, p.end, note)
	}
	tw.Flush()
}
