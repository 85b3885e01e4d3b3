package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Share groups (KIP-932) in weir group: describe finds a group that is
// neither classic nor KIP-848 with ShareGroupDescribe and shows, per
// partition, the share-partition start offset (records below it are
// acknowledged or archived) and the lag the broker computes (records not
// yet acknowledged or archived). A share partition may be assigned to
// several members.

// describeShareGroup returns the share group named group, or nil if the
// cluster knows no share group of that name.
func describeShareGroup(ctx context.Context, adm *kadm.Client, group string) (*groupInfo, error) {
	ds, err := adm.DescribeShareGroups(ctx, group)
	if err != nil {
		var se *kadm.ShardErrors
		if errors.As(err, &se) || errors.Is(err, kerr.UnsupportedVersion) {
			return nil, nil // the cluster has no share groups
		}
		return nil, fmt.Errorf("describe share group: %w", err)
	}
	d, ok := ds[group]
	if !ok || errors.Is(d.Err, kerr.GroupIDNotFound) {
		return nil, nil
	}
	if d.Err != nil {
		return nil, fmt.Errorf("share group %q: %w", group, d.Err)
	}
	gi := &groupInfo{name: group, state: d.GroupState, kind: "share", protocol: "share/" + orDash(d.Assignor) + " (server-side)"}
	for _, m := range d.Members {
		mi := memberInfo{id: m.MemberID, client: m.ClientID, host: m.ClientHost, assigned: map[string][]int32{}}
		for t, ps := range m.Assignment {
			for p := range ps {
				mi.assigned[t] = append(mi.assigned[t], p)
			}
		}
		gi.members = append(gi.members, mi)
	}
	return gi, nil
}

// owners is every member assigned topic's partition p, comma-separated.
func (g *groupInfo) owners(topic string, p int32) string {
	var out []string
	for _, m := range g.members {
		for _, q := range m.assigned[topic] {
			if q == p {
				out = append(out, m.id)
			}
		}
	}
	return strings.Join(out, ",")
}

// sharePositions are a share group's start offsets and lag per partition.
func sharePositions(ctx context.Context, adm *kadm.Client, gi *groupInfo) ([]partitionPos, error) {
	offs, err := adm.DescribeShareGroupOffsets(ctx, gi.name)
	if err != nil {
		return nil, fmt.Errorf("describe share group offsets: %w", err)
	}
	d, ok := offs[gi.name]
	if !ok {
		return nil, fmt.Errorf("share group %q: no answer from the cluster", gi.name)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("share group %q offsets: %w", gi.name, d.Err)
	}
	var topics []string
	for t := range d.Offsets {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var starts, ends kadm.ListedOffsets
	if len(topics) > 0 {
		starts, _ = adm.ListStartOffsets(ctx, topics...)
		ends, _ = adm.ListEndOffsets(ctx, topics...)
	}
	var out []partitionPos
	for _, t := range topics {
		var ps []int32
		for p := range d.Offsets[t] {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			o := d.Offsets[t][p]
			pp := partitionPos{topic: t, partition: p, committed: o.StartOffset, lag: o.Lag, lagTime: -1, owner: gi.owners(t, p), startErr: o.Err}
			if s, ok := starts.Lookup(t, p); ok {
				pp.start = s.Offset
			}
			if e, ok := ends.Lookup(t, p); ok {
				pp.end = e.Offset
			}
			out = append(out, pp)
		}
	}
	return out, nil
}

func printShareGroup(w io.Writer, gi *groupInfo, pos []partitionPos) {
	fmt.Fprintf(w, "group:    %s\nstate:    %s\ntype:     %s\nprotocol: %s\nmembers:  %d\n", gi.name, gi.state, gi.kind, gi.protocol, len(gi.members))
	if len(gi.members) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tCLIENT\tHOST\tASSIGNMENT")
		for _, m := range gi.members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.id, m.client, m.host, formatAssignment(m.assigned))
		}
		tw.Flush()
	}
	if len(pos) == 0 {
		fmt.Fprintln(w, "\nno share-partition state yet")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART-OFFSET\tLOG-START\tLOG-END\tLAG\tMEMBERS")
	var total int64
	for _, p := range pos {
		lag := "?"
		if p.lag >= 0 {
			lag = fmt.Sprint(p.lag)
			total += p.lag
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", p.topic, p.partition, p.committed, p.start, p.end, lag, orDash(p.owner))
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntotal lag: %d records (not yet acknowledged or archived)\n", total)
}
