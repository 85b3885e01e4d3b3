package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
)

// weir group: list, describe and reset the offsets of consumer groups on
// weir or any Kafka-compatible cluster (classic and KIP-848 groups, and
// KIP-932 share groups: group_share.go).

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

// groupListEntry is one group of `group list -o json`.
type groupListEntry struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	Type         string `json:"type"`
	ProtocolType string `json:"protocol_type"`
}

func newGroupListCmd(cf *clientFlags) *cobra.Command {
	var states, types []string
	var output *outputFlag
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
			groups, err := adm.ListGroupsByType(ctx, types, states...)
			if err != nil {
				return fmt.Errorf("list groups: %w", err)
			}
			if output.json() {
				js := []groupListEntry{}
				for _, g := range groups.Sorted() {
					js = append(js, groupListEntry{g.Group, g.State, g.GroupType, g.ProtocolType})
				}
				return writeJSON(cmd.OutOrStdout(), js)
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
	cmd.Flags().StringSliceVar(&types, "type", nil, "only groups of these types: classic, consumer, share")
	output = addOutputFlag(cmd)
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
	// Not a consumer group: maybe a share group (group_share.go).
	if gi, err := describeShareGroup(ctx, adm, group); err != nil || gi != nil {
		return gi, err
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
	// watermark is the task watermark a stream App committed with the
	// offset (stream.ParseCommittedWatermark of its metadata): ok false if
	// the metadata carries none, err set if it does not decode.
	watermark committedWatermark
}

type committedWatermark struct {
	stream.CommittedWatermark
	ok  bool
	err error
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
			w := &pp.watermark
			w.CommittedWatermark, w.ok, w.err = stream.ParseCommittedWatermark(o.Metadata)
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
	var output *outputFlag
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state, members, assignment and per-partition lag (records and time)",
		Long: `Show a group's state, members and assignment, and for every partition it has committed
or is assigned: the committed offset, the log's start and end, the lag in records, and
the lag in time (now minus the timestamp of the first record not yet consumed).

For the group of a weir stream application (whose offsets carry the task's event time
in their commit metadata), a WATERMARK column shows the watermark of the task reading
each partition as committed with its offset: windows that end before it (plus their
grace) are closed. -o json gives it as watermark_ms, with the partition's largest event
time read (max_event_time_ms). This works on any Kafka-compatible cluster.`,
		Args: cobra.ExactArgs(1),
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
			if gi.kind == "share" {
				pos, err := sharePositions(ctx, adm, gi)
				if err != nil {
					return err
				}
				if output.json() {
					return writeJSON(cmd.OutOrStdout(), groupJSON(gi, pos))
				}
				printShareGroup(cmd.OutOrStdout(), gi, pos)
				return nil
			}
			pos, err := groupPositions(ctx, adm, gi, nil)
			if err != nil {
				return err
			}
			if gi.kind == "-" && len(pos) == 0 {
				return fmt.Errorf("group %q does not exist (no members, no committed offsets)", gi.name)
			}
			lagTimes(ctx, cf, pos)
			if output.json() {
				return writeJSON(cmd.OutOrStdout(), groupJSON(gi, pos))
			}
			printGroup(cmd.OutOrStdout(), gi, pos)
			return nil
		},
	}
	output = addOutputFlag(cmd)
	return cmd
}

// groupDescription is `group describe -o json`.
type groupDescription struct {
	Group    string            `json:"group"`
	State    string            `json:"state"`
	Type     string            `json:"type"`
	Protocol string            `json:"protocol"`
	Members  []groupMemberJSON `json:"members"`
	Offsets  []groupOffsetJSON `json:"offsets"`
	TotalLag int64             `json:"total_lag"`
}

type groupMemberJSON struct {
	MemberID   string             `json:"member_id"`
	InstanceID *string            `json:"instance_id"`
	ClientID   string             `json:"client_id"`
	Host       string             `json:"host"`
	Assignment map[string][]int32 `json:"assignment"`
}

type groupOffsetJSON struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Committed *int64  `json:"committed"` // null: none; share groups: the share-partition start offset
	LogStart  int64   `json:"log_start"`
	LogEnd    int64   `json:"log_end"`
	Lag       int64   `json:"lag"`
	LagMs     *int64  `json:"lag_ms"` // null: unknown
	Member    *string `json:"member"`
	Error     string  `json:"error,omitempty"`
	// Watermark: committed by a weir stream task (its commit metadata).
	Watermark      *groupWatermarkJSON `json:"watermark,omitempty"`
	WatermarkError string              `json:"watermark_error,omitempty"`
}

// groupWatermarkJSON is a stream task's committed event time; null
// fields: none yet.
type groupWatermarkJSON struct {
	WatermarkMs    *int64 `json:"watermark_ms"`
	MaxEventTimeMs *int64 `json:"max_event_time_ms"`
	Writers        int    `json:"writers"`
}

func groupJSON(gi *groupInfo, pos []partitionPos) groupDescription {
	d := groupDescription{Group: gi.name, State: gi.state, Type: gi.kind, Protocol: gi.protocol,
		Members: []groupMemberJSON{}, Offsets: []groupOffsetJSON{}}
	for _, m := range gi.members {
		mj := groupMemberJSON{MemberID: m.id, ClientID: m.client, Host: m.host, Assignment: m.assigned}
		if m.instance != "" {
			mj.InstanceID = &m.instance
		}
		d.Members = append(d.Members, mj)
	}
	for _, p := range pos {
		o := groupOffsetJSON{Topic: p.topic, Partition: p.partition, LogStart: p.start, LogEnd: p.end, Lag: p.lag}
		if p.committed >= 0 {
			o.Committed = &p.committed
		}
		if p.lagTime >= 0 {
			ms := p.lagTime.Milliseconds()
			o.LagMs = &ms
		}
		if p.owner != "" {
			o.Member = &p.owner
		}
		if err := errors.Join(p.startErr, p.endErr); err != nil {
			o.Error = err.Error()
		}
		if w := p.watermark; w.err != nil {
			o.WatermarkError = w.err.Error()
		} else if w.ok {
			o.Watermark = &groupWatermarkJSON{WatermarkMs: eventTimeMs(w.Watermark), MaxEventTimeMs: eventTimeMs(w.MaxEventTime), Writers: w.Writers}
		}
		d.TotalLag += p.lag
		d.Offsets = append(d.Offsets, o)
	}
	return d
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
	streamApp := slices.ContainsFunc(pos, func(p partitionPos) bool { return p.watermark.ok })
	if streamApp {
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG-START\tLOG-END\tLAG\tLAG-TIME\tWATERMARK\tMEMBER")
	} else {
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG-START\tLOG-END\tLAG\tLAG-TIME\tMEMBER")
	}
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
		if streamApp {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", p.topic, p.partition, committed, p.start, p.end, p.lag, lagTime,
				p.watermark.text(), orDash(p.owner))
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", p.topic, p.partition, committed, p.start, p.end, p.lag, lagTime, orDash(p.owner))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntotal lag: %d records\n", total)
	if streamApp {
		fmt.Fprintln(w, "WATERMARK: the event time of the stream task reading the partition, as committed with its offset")
	}
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

// eventTimeMs is an event time for JSON: nil for none (math.MinInt64).
func eventTimeMs(ms int64) *int64 {
	if ms == math.MinInt64 {
		return nil
	}
	return &ms
}

// text is the WATERMARK column: the committed task watermark, "-" if the
// metadata carries none, "none" if the task had none yet.
func (w committedWatermark) text() string {
	switch {
	case w.err != nil:
		return "malformed"
	case !w.ok:
		return "-"
	case w.Watermark == math.MinInt64:
		return "none"
	}
	return time.UnixMilli(w.Watermark).UTC().Format(time.RFC3339Nano)
}
