package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrGroupActive is returned by Cutover when the group has members on the
// source (it must be stopped first) or on the target.
var ErrGroupActive = errors.New("mirror: consumer group is active")

// ErrNotCaughtUp is returned by Cutover when the mirror has not copied the
// records below the group's offsets within CutoverOptions.Wait.
var ErrNotCaughtUp = errors.New("mirror: the mirror has not copied up to the group's offsets")

// CutoverOptions tune Cutover.
type CutoverOptions struct {
	// Wait is how long to wait for the mirror to copy every record below
	// the group's source offsets (it must be running). Default 1 minute.
	Wait time.Duration
	// DryRun computes the target offsets without committing them.
	DryRun bool
	// Force skips the check that the group has no member on the source.
	Force bool
}

// Translation is the move of one partition of a group.
type Translation struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	SourceOffset int64  `json:"source_offset"`
	TargetTopic  string `json:"target_topic"`
	TargetOffset int64  `json:"target_offset"`
	// SyncSource and SyncTarget are the offset sync the translation
	// started from; Between is the number of source data records in
	// [SyncSource, SourceOffset), skipped on the target.
	SyncSource int64 `json:"sync_source_offset"`
	SyncTarget int64 `json:"sync_target_offset"`
	Between    int64 `json:"records_between"`
	// BeforeMirror is set when the group's offset is below the first
	// record the mirror copied: it resumes at the first copy.
	BeforeMirror bool `json:"before_mirror,omitempty"`
}

// Cutover moves consumer group group from the source to the target: it
// translates the group's committed source offsets of every mirrored topic
// into target offsets and commits them for the group on the target.
//
// The group must have stopped on the source (no member), unless Force. The
// translation of an offset G of a partition starts from the last offset sync
// (s, t) with s <= G, counts the source's data records in [s, G) (read
// committed) and skips as many data records on the target from t: the
// group's next record on the target is the copy of its next record on the
// source, so nothing is skipped and nothing read twice. If the source lost
// records of [s, G) after they were copied (retention, compaction), fewer
// are skipped on the target: at most the records of that one batch are
// read twice, never a gap.
func Cutover(ctx context.Context, cfg Config, group string, opts CutoverOptions) ([]Translation, error) {
	c, re, err := cfg.withDefaults(false)
	if err != nil {
		return nil, err
	}
	if opts.Wait == 0 {
		opts.Wait = time.Minute
	}
	src, tgt, err := c.adminClients()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	defer tgt.Close()

	if !opts.Force {
		if err := checkStopped(ctx, src, group, "source"); err != nil {
			return nil, err
		}
	}
	if err := checkStopped(ctx, tgt, group, "target"); err != nil {
		return nil, err
	}
	committed, err := src.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("offsets of group %s on the source: %w", group, err)
	}
	groupOffsets := map[tp]int64{}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			groupOffsets[tp{o.Topic, o.Partition}] = o.At
		}
	})
	// With topics configured, the group's partitions of those topics must
	// be copied; without, the partitions the mirror has progress for.
	expect := func(topic string) bool { return (len(c.Topics) > 0 || re != nil) && c.selected(re, topic) }
	progress, err := waitCopied(ctx, &c, tgt, groupOffsets, expect, opts.Wait)
	if err != nil {
		return nil, err
	}
	mirrored, older := map[tp]int64{}, map[tp]int64{}
	for p, g := range groupOffsets {
		if prog, ok := progress[p]; ok {
			mirrored[p] = g
			if prog.Source > g { // the progress sync is past g: older syncs needed
				older[p] = g
			}
		}
	}
	byPart, err := syncsFor(ctx, &c, tgt, older)
	if err != nil {
		return nil, fmt.Errorf("read offset syncs: %w", err)
	}
	var out []Translation
	commit := kadm.Offsets{}
	for _, p := range sortedTPs(mirrored) {
		// The stored progress is the partition's newest sync (and the
		// only one left if retention emptied offset-syncs).
		cands := append([]offsetSync{progress[p]}, byPart[p]...)
		tr, err := translate(ctx, &c, p, groupOffsets[p], cands)
		if err != nil {
			return nil, fmt.Errorf("translate %s offset %d: %w", p, groupOffsets[p], err)
		}
		out = append(out, tr)
		commit.Add(kadm.Offset{Topic: tr.TargetTopic, Partition: tr.Partition, At: tr.TargetOffset, LeaderEpoch: -1})
	}
	if opts.DryRun || len(out) == 0 {
		return out, nil
	}
	resp, err := tgt.CommitOffsets(ctx, group, commit)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("commit offsets of group %s on the target: %w", group, err)
	}
	return out, nil
}

// syncsChunk is the first chunk syncsFor reads (a variable for tests).
var syncsChunk int64 = 1 << 14

// syncsFor reads the offset syncs needed to translate offsets, from the end
// of the offset-syncs topic backwards in growing chunks: a partition's syncs
// are written in source-offset order, so the last one at or below a group's
// offset is the best, and a stopped group is usually near the mirror's
// position. It stops when every partition of offsets (all mirrored: they
// have progress) has a sync at or below its offset, or at the topic's start.
func syncsFor(ctx context.Context, c *Config, tgt *kadm.Client, offsets map[tp]int64) (map[tp][]offsetSync, error) {
	byPart := map[tp][]offsetSync{}
	if len(offsets) == 0 {
		return byPart, nil
	}
	start, end, err := syncsBounds(ctx, tgt, c.syncsTopic())
	if err != nil {
		return nil, err
	}
	chunk := syncsChunk
	for end > start {
		from := max(start, end-chunk)
		syncs, err := readSyncsRange(ctx, c, c.syncsTopic(), from, end)
		if err != nil {
			return nil, err
		}
		for i := len(syncs) - 1; i >= 0; i-- { // byPart lists each partition's syncs newest first
			p := tp{syncs[i].Topic, syncs[i].Partition}
			if _, ok := offsets[p]; ok {
				byPart[p] = append(byPart[p], syncs[i])
			}
		}
		done := true
		for p, g := range offsets {
			found := false
			for _, s := range byPart[p] {
				if s.Source <= g {
					found = true
					break
				}
			}
			done = done && found
		}
		if done {
			break
		}
		end, chunk = from, 2*chunk
	}
	return byPart, nil
}

func checkStopped(ctx context.Context, adm *kadm.Client, group, side string) error {
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe group %s on the %s: %w", group, side, err)
	}
	g, ok := dg[group]
	if !ok || errors.Is(g.Err, kerr.GroupIDNotFound) {
		return nil
	}
	if g.Err != nil {
		return fmt.Errorf("describe group %s on the %s: %w", group, side, g.Err)
	}
	if len(g.Members) > 0 {
		return fmt.Errorf("%w: %s has %d members on the %s (state %s): stop it first", ErrGroupActive, group, len(g.Members), side, g.State)
	}
	return nil
}

// waitCopied waits until the mirror's progress covers every group offset:
// progress at or past it, or no data record between them on the source.
func waitCopied(ctx context.Context, c *Config, tgt *kadm.Client, offsets map[tp]int64, expect func(string) bool, wait time.Duration) (map[tp]offsetSync, error) {
	deadline := time.Now().Add(wait)
	for {
		progress, err := readProgress(ctx, c, tgt)
		if err != nil {
			return nil, err
		}
		var behind []string
		for _, p := range sortedTPs(offsets) {
			prog, ok := progress[p]
			if !ok && expect(p.topic) {
				behind = append(behind, fmt.Sprintf("%s (not copied yet)", p))
				continue
			}
			if !ok || prog.Source >= offsets[p] {
				continue
			}
			n, err := countData(ctx, c.sourceOpts(), p, prog.Source, offsets[p])
			if err != nil {
				return nil, err
			}
			if n > 0 {
				behind = append(behind, fmt.Sprintf("%s (copied below %d, group at %d)", p, prog.Source, offsets[p]))
			}
		}
		if len(behind) == 0 {
			return progress, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %v; is the mirror running?", ErrNotCaughtUp, behind)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// countData counts the source's data records (read committed) of p in
// [from, to).
func countData(ctx context.Context, opts []kgo.Opt, p tp, from, to int64) (int64, error) {
	var n int64
	err := scan(ctx, opts, p.topic, p.partition, from, to, true, func(r *kgo.Record) bool {
		if !r.Attrs.IsControl() && r.Offset < to {
			n++
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("count source records of %s in [%d, %d): %w", p, from, to, err)
	}
	return n, nil
}

func translate(ctx context.Context, c *Config, p tp, g int64, cands []offsetSync) (Translation, error) {
	// cands are newest first: the first at or below g is the latest such.
	var best *offsetSync
	for i := range cands {
		if cands[i].Source <= g {
			best = &cands[i]
			break
		}
	}
	tr := Translation{Topic: p.topic, Partition: p.partition, SourceOffset: g}
	if best == nil {
		// The group is below everything copied: it resumes at the first copy.
		first := cands[0]
		for _, s := range cands {
			if s.Source < first.Source {
				first = s
			}
		}
		tr.TargetTopic, tr.TargetOffset, tr.SyncSource, tr.SyncTarget, tr.BeforeMirror = first.Target, first.TargetOffset, first.Source, first.TargetOffset, true
		return tr, nil
	}
	tr.TargetTopic, tr.SyncSource, tr.SyncTarget, tr.TargetOffset = best.Target, best.Source, best.TargetOffset, best.TargetOffset
	k, err := countData(ctx, c.sourceOpts(), p, best.Source, g)
	if err != nil || k == 0 {
		return tr, err
	}
	tr.Between = k
	// Skip k data records on the target from the sync's target offset.
	seen := int64(0)
	last := int64(-1)
	err = scan(ctx, c.targetOpts(), best.Target, p.partition, best.TargetOffset, 1<<62, true, func(r *kgo.Record) bool {
		if r.Attrs.IsControl() {
			return true
		}
		seen++
		last = r.Offset
		return seen < k
	})
	if err != nil {
		return tr, err
	}
	if seen < k {
		return tr, fmt.Errorf("%w: target %s/%d holds %d of the %d records after sync (%d, %d)", ErrNotCaughtUp, best.Target, p.partition, seen, k, best.Source, best.TargetOffset)
	}
	tr.TargetOffset = last + 1
	return tr, nil
}

func sortedTPs[V any](m map[tp]V) []tp {
	out := make([]tp, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}
