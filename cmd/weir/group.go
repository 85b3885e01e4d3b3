package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// weir group: list, describe and reset the offsets of consumer groups on
// weir or any Kafka-compatible cluster (classic and KIP-848 groups).

func newGroupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe and reset consumer groups (any Kafka-compatible cluster)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(
		newGroupListCmd(cf),
		newGroupDescribeCmd(cf),
		newGroupResetOffsetsCmd(cf),
		newGroupDeleteCmd(cf),
	)
	return cmd
}

func newGroupDeleteCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups and their committed offsets (a group must have no members)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, groups []string) error {
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.DeleteGroups(ctx, groups...)
			if err != nil {
				return fmt.Errorf("delete groups: %w", err)
			}
			var errs []error
			for _, g := range groups {
				r, ok := resps[g]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("group %q: no answer from the cluster", g))
				case errors.Is(r.Err, kerr.NonEmptyGroup):
					errs = append(errs, fmt.Errorf("group %q has active members: stop its consumers first", g))
				case r.Err != nil:
					errs = append(errs, fmt.Errorf("group %q: %w", g, r.Err))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "deleted group %q\n", g)
				}
			}
			return errors.Join(errs...)
		},
	}
}

func newGroupListCmd(cf *clientFlags) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List consumer groups with their state and type",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			groups, err := adm.ListGroups(ctx, states...)
			if err != nil {
				return fmt.Errorf("list groups: %w", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "GROUP\tSTATE\tTYPE\tPROTOCOL-TYPE")
			for _, g := range groups.Sorted() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Group, orDash(g.State), orDash(g.GroupType), orDash(g.ProtocolType))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only groups in these states (e.g. Stable,Empty)")
	return cmd
}

// groupInfo is what describe and reset-offsets need to know of a group,
// from DescribeGroups (classic) or ConsumerGroupDescribe (KIP-848).
type groupInfo struct {
	name, state, kind, protocol string
	members                     []memberInfo
}

type memberInfo struct {
	id, instance, client, host string
	assigned                   map[string][]int32
}

func (g *groupInfo) owner(topic string, p int32) string {
	for _, m := range g.members {
		for _, q := range m.assigned[topic] {
			if q == p {
				return m.id
			}
		}
	}
	return ""
}

func describeGroup(ctx context.Context, adm *kadm.Client, group string) (*groupInfo, error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe group: %w", err)
	}
	d, ok := ds[group]
	if !ok {
		return nil, fmt.Errorf("group %q: no answer from the cluster", group)
	}
	if d.Err == nil && d.State != "Dead" {
		proto := "-"
		if d.ProtocolType != "" {
			proto = d.ProtocolType + "/" + orDash(d.Protocol)
		}
		gi := &groupInfo{name: group, state: d.State, kind: "classic", protocol: proto}
		for _, m := range d.Members {
			mi := memberInfo{id: m.MemberID, client: m.ClientID, host: m.ClientHost, assigned: map[string][]int32{}}
			if m.InstanceID != nil {
				mi.instance = *m.InstanceID
			}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					mi.assigned[t.Topic] = append(mi.assigned[t.Topic], t.Partitions...)
				}
			}
			gi.members = append(gi.members, mi)
		}
		return gi, nil
	}
	if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("group %q: %w%s", group, d.Err, detail(d.ErrMessage))
	}
	// Not a classic group: maybe a KIP-848 consumer group.
	cds, err := adm.DescribeConsumerGroups(ctx, group)
	if err == nil {
		if cd, ok := cds[group]; ok && cd.Err == nil {
			gi := &groupInfo{name: group, state: cd.State, kind: "consumer", protocol: "consumer/" + cd.AssignorName + " (server-side)"}
			for _, m := range cd.Members {
				mi := memberInfo{id: m.MemberID, client: m.ClientID, host: m.ClientHost, assigned: map[string][]int32{}}
				if m.InstanceID != nil {
					mi.instance = *m.InstanceID
				}
				for t, ps := range m.Assignment {
					for p := range ps {
						mi.assigned[t] = append(mi.assigned[t], p)
					}
				}
				gi.members = append(gi.members, mi)
			}
			return gi, nil
		}
	}
	// Neither: a group that only has committed offsets, or none at all.
	return &groupInfo{name: group, state: "Empty", kind: "-", protocol: "-"}, nil
}

// partitionPos is one partition's committed offset against the log.
type partitionPos struct {
	topic            string
	partition        int32
	committed        int64 // -1: none
	start, end       int64
	lag              int64
	lagTime          time.Duration // -1 unknown
	owner            string
	startErr, endErr error
}

// groupPositions is the one place the CLI gathers a group's positions: the
// committed offset, log start and log end of every partition of topics, or,
// when topics is empty, of every topic the group has committed offsets for
// or is assigned. Per-partition list errors are kept in startErr/endErr;
// describe shows them, reset-offsets refuses to act on them. Lag is counted
// from the committed offset, or from the log start where nothing is
// committed (or the commit fell out of the log).
func groupPositions(ctx context.Context, adm *kadm.Client, gi *groupInfo, topics []string) ([]partitionPos, error) {
	var offs kadm.OffsetResponses
	var err error
	if len(topics) > 0 {
		offs, err = adm.FetchOffsetsForTopics(ctx, gi.name, topics...)
	} else {
		offs, err = adm.FetchOffsets(ctx, gi.name)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch offsets: %w", err)
	}
	if err := offs.Error(); err != nil {
		return nil, fmt.Errorf("fetch offsets: %w", err)
	}
	names := topics
	if len(names) == 0 {
		set := map[string]bool{}
		for t := range offs {
			set[t] = true
		}
		for _, m := range gi.members {
			for t := range m.assigned {
				set[t] = true
			}
		}
		for t := range set {
			names = append(names, t)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	sort.Strings(names)
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	var out []partitionPos
	ends.Each(func(e kadm.ListedOffset) {
		pp := partitionPos{topic: e.Topic, partition: e.Partition, committed: -1, end: e.Offset, endErr: e.Err, lagTime: -1}
		if s, ok := starts.Lookup(e.Topic, e.Partition); ok {
			pp.start, pp.startErr = s.Offset, s.Err
		}
		if o, ok := offs.Lookup(e.Topic, e.Partition); ok && o.Err == nil && o.At >= 0 {
			pp.committed = o.At
		}
		pp.lag = max(pp.end-max(pp.committed, pp.start), 0)
		pp.owner = gi.owner(e.Topic, e.Partition)
		out = append(out, pp)
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out, nil
}

// lagTimes fills lagTime: now minus the timestamp of the first unconsumed
// record, read with a direct partition consumer (no group involved). A
// partition without lag has lagTime 0.
func lagTimes(ctx context.Context, cf *clientFlags, ps []partitionPos) {
	want := map[string]map[int32]kgo.Offset{}
	pending := 0
	for i := range ps {
		p := &ps[i]
		if p.lag == 0 {
			p.lagTime = 0
			continue
		}
		from := max(p.committed, p.start)
		if want[p.topic] == nil {
			want[p.topic] = map[int32]kgo.Offset{}
		}
		want[p.topic][p.partition] = kgo.NewOffset().At(from)
		pending++
	}
	if pending == 0 {
		return
	}
	cl, err := cf.client(kgo.ConsumePartitions(want), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := time.Now()
	got := map[string]map[int32]time.Time{}
	for pending > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if got[r.Topic] == nil {
				got[r.Topic] = map[int32]time.Time{}
			}
			if _, ok := got[r.Topic][r.Partition]; !ok {
				got[r.Topic][r.Partition] = r.Timestamp
				pending--
			}
		})
	}
	for i := range ps {
		if ts, ok := got[ps[i].topic][ps[i].partition]; ok {
			ps[i].lagTime = max(now.Sub(ts), 0)
		}
	}
}

func newGroupDescribeCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state, members, assignment and per-partition lag (records and time)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			gi, err := describeGroup(ctx, adm, args[0])
			if err != nil {
				return err
			}
			pos, err := groupPositions(ctx, adm, gi, nil)
			if err != nil {
				return err
			}
			lagTimes(ctx, cf, pos)
			printGroup(cmd.OutOrStdout(), gi, pos)
			return nil
		},
	}
	return cmd
}

func printGroup(w io.Writer, gi *groupInfo, pos []partitionPos) {
	fmt.Fprintf(w, "group:    %s\nstate:    %s\ntype:     %s\nprotocol: %s\nmembers:  %d\n", gi.name, gi.state, gi.kind, gi.protocol, len(gi.members))
	if len(gi.members) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNMENT")
		for _, m := range gi.members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.id, orDash(m.instance), m.client, m.host, formatAssignment(m.assigned))
		}
		tw.Flush()
	}
	if len(pos) == 0 {
		fmt.Fprintln(w, "\nno committed offsets")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG-START\tLOG-END\tLAG\tLAG-TIME\tMEMBER")
	var total int64
	for _, p := range pos {
		committed := "-"
		if p.committed >= 0 {
			committed = fmt.Sprint(p.committed)
		}
		lagTime := "?"
		switch {
		case p.lagTime >= 10*time.Second:
			lagTime = p.lagTime.Round(time.Second).String()
		case p.lagTime >= 0:
			lagTime = p.lagTime.Round(time.Millisecond).String()
		}
		total += p.lag
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", p.topic, p.partition, committed, p.start, p.end, p.lag, lagTime, orDash(p.owner))
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntotal lag: %d records\n", total)
}

func formatAssignment(a map[string][]int32) string {
	if len(a) == 0 {
		return "-"
	}
	ts := make([]string, 0, len(a))
	for t := range a {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	var parts []string
	for _, t := range ts {
		ps := append([]int32(nil), a[t]...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = fmt.Sprint(p)
		}
		parts = append(parts, t+"["+strings.Join(s, ",")+"]")
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resetSpec is one of the --to-* / --shift-by flags.
type resetSpec struct {
	earliest, latest bool
	toOffset         int64
	toOffsetSet      bool
	datetime         string
	shiftBy          int64
	shiftSet         bool
}

func (s resetSpec) validate() error {
	n := 0
	for _, b := range []bool{s.earliest, s.latest, s.toOffsetSet, s.datetime != "", s.shiftSet} {
		if b {
			n++
		}
	}
	if n != 1 {
		return errors.New("exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by is required")
	}
	return nil
}

// parseDatetime accepts RFC 3339, "2006-01-02T15:04:05" (UTC) or a date.
func parseDatetime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--to-datetime %q: use RFC 3339 (2026-01-02T15:04:05Z) or 2026-01-02", s)
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

// planReset computes the new offsets. Targets are clamped to
// [log start, log end] like Kafka's tool, and the clamp is reported.
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
		case spec.datetime != "":
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

func newGroupResetOffsetsCmd(cf *clientFlags) *cobra.Command {
	var (
		spec    resetSpec
		topics  []string
		execute bool
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic T (--to-earliest|--to-latest|--to-offset N|--to-datetime T|--shift-by N)",
		Short: "Move a group's committed offsets (dry run unless --execute; the group must have no members)",
		Example: `  weir group reset-offsets billing --topic orders --to-earliest
  weir group reset-offsets billing --topic orders --to-datetime 2026-01-02T15:00:00Z --execute
  weir group reset-offsets billing --topic orders --shift-by -100 --execute`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			spec.toOffsetSet = cmd.Flags().Changed("to-offset")
			spec.shiftSet = cmd.Flags().Changed("shift-by")
			if len(topics) == 0 {
				return errors.New("--topic is required")
			}
			return spec.validate()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			out := cmd.OutOrStdout()
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
			pos, err := groupPositions(ctx, adm, gi, topics)
			if err != nil {
				return err
			}
			for _, p := range pos {
				if err := errors.Join(p.startErr, p.endErr); err != nil {
					return fmt.Errorf("%s/%d: list offsets: %w", p.topic, p.partition, err)
				}
			}
			var after kadm.ListedOffsets
			if spec.datetime != "" {
				ts, err := parseDatetime(spec.datetime)
				if err != nil {
					return err
				}
				after, err = adm.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), topics...)
				if err != nil {
					return fmt.Errorf("list offsets after %s: %w", ts, err)
				}
			}
			plan := planReset(spec, pos, after)
			printPlan(out, group, plan)
			if !execute {
				fmt.Fprintln(out, "\ndry run: nothing changed; add --execute to apply")
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
			fmt.Fprintf(out, "\napplied: %d partitions of group %q reset\n", len(plan), group)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&topics, "topic", nil, "topic to reset (repeatable or comma separated); all its partitions")
	f.BoolVar(&spec.earliest, "to-earliest", false, "reset to the log start offset")
	f.BoolVar(&spec.latest, "to-latest", false, "reset to the log end offset")
	f.Int64Var(&spec.toOffset, "to-offset", 0, "reset to this offset")
	f.StringVar(&spec.datetime, "to-datetime", "", "reset to the first offset with a timestamp at or after this time (RFC 3339)")
	f.Int64Var(&spec.shiftBy, "shift-by", 0, "move the committed offset by N (negative: back)")
	f.BoolVar(&execute, "execute", false, "apply the change (default: dry run)")
	return cmd
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
