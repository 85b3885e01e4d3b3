package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The states of a group's partition in GroupStatus.
const (
	// GroupSynced: the target group's offset is the translation of its
	// source offset (a consumer of the group on the target resumes at the
	// copy of its next source record).
	GroupSynced = "synced"
	// GroupBehind: the target group's offset is below the translation, or
	// the target group has none (it would read records again, or start by
	// its reset policy).
	GroupBehind = "behind"
	// GroupAhead: the target group's offset is past the translation (the
	// group sync never moves it back).
	GroupAhead = "ahead"
	// GroupCopying: the mirror has not copied up to the group's source
	// offset yet, so it has no translation.
	GroupCopying = "copying"
)

// GroupPartitionStatus is where one consumer group stands on one mirrored
// partition, on the source and on the target.
type GroupPartitionStatus struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// SourceOffset is the group's committed offset on the source.
	SourceOffset int64 `json:"source_offset"`
	// TargetTopic is the copy's topic; TargetOffset the group's committed
	// offset of it on the target (-1: none); Translated the target offset
	// its source offset translates to (-1: not copied yet), as Cutover and
	// the group sync compute it.
	TargetTopic  string `json:"target_topic"`
	TargetOffset int64  `json:"target_offset"`
	Translated   int64  `json:"translated"`
	// State is GroupSynced, GroupBehind, GroupAhead or GroupCopying.
	State string `json:"state"`
	// TargetMembers is how many members the group has on the target: the
	// group sync leaves a group with members alone.
	TargetMembers int `json:"target_members"`
}

// GroupStatus reports, for every consumer group of the source whose name
// matches pattern (a regular expression matched against the whole name, as
// SyncGroups is; empty: every group), its
// committed offset of each partition the mirror copies, the translation of
// that offset on the target and the group's committed offset there: whether
// the group offset sync (or a cutover) has brought the group to where it
// resumes without a gap. It reads and commits nothing else; the mirror need
// not be running.
func GroupStatus(ctx context.Context, cfg Config, pattern string) ([]GroupPartitionStatus, error) {
	if pattern == "" {
		pattern = ".*"
	}
	cfg.SyncGroups = pattern
	c, _, err := cfg.withDefaults(false)
	if err != nil {
		return nil, err
	}
	re, _ := c.groupRegex() // withDefaults checked it
	src, tgt, err := c.adminClients()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	defer tgt.Close()

	progress, err := readProgress(ctx, &c, tgt)
	if err != nil {
		return nil, err
	}
	listed, err := src.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list source groups: %w", err)
	}
	var out []GroupPartitionStatus
	for _, g := range listed.Sorted() {
		if g.GroupType == "share" || !re.MatchString(g.Group) {
			continue
		}
		st, err := groupStatus(ctx, &c, src, tgt, progress, g.Group)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.Group, err)
		}
		out = append(out, st...)
	}
	return out, nil
}

// groupStatus is GroupStatus for one group.
func groupStatus(ctx context.Context, c *Config, src, tgt *kadm.Client, progress map[tp]offsetSync, group string) ([]GroupPartitionStatus, error) {
	committed, err := src.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("offsets on the source: %w", err)
	}
	offsets, older := map[tp]int64{}, map[tp]int64{}
	committed.Each(func(o kadm.OffsetResponse) {
		p := tp{o.Topic, o.Partition}
		if prog, ok := progress[p]; ok && o.At >= 0 {
			offsets[p] = o.At
			if prog.Source > o.At {
				older[p] = o.At
			}
		}
	})
	if len(offsets) == 0 {
		return nil, nil // the group reads nothing the mirror copies (or it never ran)
	}
	members := 0
	if dg, err := tgt.DescribeGroups(ctx, group); err != nil {
		return nil, fmt.Errorf("describe on the target: %w", err)
	} else if d, ok := dg[group]; ok && d.Err == nil {
		members = len(d.Members)
	}
	current, err := tgt.FetchOffsets(ctx, group)
	if err == nil {
		err = current.Error()
	}
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("offsets on the target: %w", err)
	}
	byPart, err := syncsFor(ctx, c, tgt, older)
	if err != nil {
		return nil, fmt.Errorf("read offset syncs: %w", err)
	}
	var out []GroupPartitionStatus
	for _, p := range sortedTPs(offsets) {
		g, prog := offsets[p], progress[p]
		st := GroupPartitionStatus{Group: group, Topic: p.topic, Partition: p.partition, SourceOffset: g,
			TargetTopic: prog.Target, TargetOffset: -1, Translated: -1, State: GroupCopying, TargetMembers: members}
		if cur, ok := current.Lookup(prog.Target, p.partition); ok && cur.Err == nil && cur.At >= 0 {
			st.TargetOffset = cur.At
		}
		if prog.Source >= g {
			tr, err := translate(ctx, c, p, g, append([]offsetSync{prog}, byPart[p]...))
			switch {
			case errors.Is(err, ErrNotCaughtUp):
				// The target does not show the copies yet: copying.
			case err != nil:
				return nil, fmt.Errorf("translate %s offset %d: %w", p, g, err)
			default:
				st.TargetTopic, st.Translated = tr.TargetTopic, tr.TargetOffset
				switch {
				case st.TargetOffset == tr.TargetOffset:
					st.State = GroupSynced
				case st.TargetOffset > tr.TargetOffset:
					st.State = GroupAhead
				default:
					st.State = GroupBehind
				}
			}
		}
		out = append(out, st)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}
