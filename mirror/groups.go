package mirror

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Continuous group offset sync (MirrorMaker 2's sync.group.offsets): while
// the mirror runs, every Config.SyncGroupsInterval, the committed source
// offsets of the selected groups are translated as Cutover translates them
// and committed for the same group on the target.
//
// Invariants:
//   - a partition is translated only once the mirror has copied up to the
//     group's offset (the latest sync's source offset is at or past it), so
//     the translation is the copy of the group's next source record, exact
//     as Cutover's (the same one window: records of the sync's batch the
//     source lost before the translation are read twice);
//   - a target group's committed offset never moves backwards: a
//     translation at or below it is not committed;
//   - a group with members on the target is never written to: it is
//     checked before each commit, and a broker refuses an offset commit
//     without a member to a group that has members (UNKNOWN_MEMBER_ID), so a
//     consumer that joins in between is not overwritten either.

// groupSyncHistory bounds the offset syncs kept in memory per partition
// for translating; a group behind all of them has older syncs read from
// the offset-syncs topic.
const groupSyncHistory = 256

// defaultSyncGroupsInterval is Config.SyncGroupsInterval's default.
const defaultSyncGroupsInterval = 10 * time.Second

// groupSyncer is the state of the group offset sync of one Run. Used by
// one goroutine.
type groupSyncer struct {
	cfg      *Config
	re       *regexp.Regexp
	met      *metrics
	src, tgt *kadm.Client

	// syncsNext is the offset-syncs offset read up to (-1: not read yet).
	syncsNext int64
	// latest is each mirrored partition's newest sync, history its recent
	// syncs in the order written (at most groupSyncHistory).
	latest  map[tp]offsetSync
	history map[tp][]offsetSync
	// done records, per group and partition, the source offset whose
	// translation is committed on the target (or found at or below the
	// target's): it is not translated again.
	done map[string]map[tp]int64
}

// syncGroupsLoop runs group offset sync rounds until ctx ends.
func (m *Mirror) syncGroupsLoop(ctx context.Context) {
	src, tgt, err := m.cfg.adminClients()
	if err != nil {
		m.cfg.Logger.Error("group offset sync", "err", err)
		return
	}
	defer src.Close()
	defer tgt.Close()
	s := &groupSyncer{cfg: &m.cfg, re: m.groupRe, met: m.met, src: src, tgt: tgt,
		syncsNext: -1, latest: map[tp]offsetSync{}, history: map[tp][]offsetSync{}, done: map[string]map[tp]int64{}}
	t := time.NewTicker(m.cfg.SyncGroupsInterval)
	defer t.Stop()
	for {
		if err := s.round(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("group offset sync round failed; retried at the next", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round reads the offset syncs written since the last round and syncs
// every selected group.
func (s *groupSyncer) round(ctx context.Context) error {
	if err := s.readSyncs(ctx); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil // the mirror has not created its topics yet
		}
		return fmt.Errorf("read offset syncs: %w", err)
	}
	listed, err := s.src.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list source groups: %w", err)
	}
	var errs []error
	for _, g := range listed.Sorted() {
		if g.GroupType == "share" || !s.re.MatchString(g.Group) {
			continue
		}
		if err := s.syncGroup(ctx, g.Group); err != nil {
			errs = append(errs, fmt.Errorf("group %s: %w", g.Group, err))
		}
	}
	return errors.Join(errs...)
}

// readSyncs folds the offset syncs written since the last round into
// latest and history. The first round takes latest from the progress topic
// (it holds every partition's newest sync, whatever the offset-syncs
// topic's retention removed) and history from the offset-syncs topic's
// tail.
func (s *groupSyncer) readSyncs(ctx context.Context) error {
	start, end, err := syncsBounds(ctx, s.tgt, s.cfg.syncsTopic())
	if err != nil {
		return err
	}
	from := max(s.syncsNext, start)
	if s.syncsNext < 0 {
		prog, err := readSyncs(ctx, s.cfg, s.tgt, s.cfg.progressTopic())
		if err != nil {
			return err
		}
		s.latest = latestSyncs(prog)
		from = max(start, end-syncsChunk)
	}
	syncs, err := readSyncsRange(ctx, s.cfg, s.cfg.syncsTopic(), from, end)
	if err != nil {
		return err
	}
	for _, sy := range syncs {
		p := tp{sy.Topic, sy.Partition}
		s.latest[p] = sy
		h := append(s.history[p], sy)
		if len(h) > groupSyncHistory {
			h = slices.Delete(h, 0, len(h)-groupSyncHistory)
		}
		s.history[p] = h
	}
	s.syncsNext = end
	return nil
}

// candidates returns the syncs to translate offset g of p from, newest
// first, reading older ones from the offset-syncs topic when none kept in
// memory is at or below g.
func (s *groupSyncer) candidates(ctx context.Context, p tp, g int64) ([]offsetSync, error) {
	h := s.history[p]
	out := make([]offsetSync, 0, len(h)+1)
	out = append(out, s.latest[p])
	for i := len(h) - 1; i >= 0; i-- {
		out = append(out, h[i])
	}
	for _, c := range out {
		if c.Source <= g {
			return out, nil
		}
	}
	older, err := syncsFor(ctx, s.cfg, s.tgt, map[tp]int64{p: g})
	if err != nil {
		return nil, err
	}
	return append(out, older[p]...), nil
}

// syncGroup translates group's committed source offsets and commits those
// that move the target group forward, unless the group has members on the
// target.
func (s *groupSyncer) syncGroup(ctx context.Context, group string) error {
	committed, err := s.src.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return fmt.Errorf("offsets on the source: %w", err)
	}
	done := s.done[group]
	if done == nil {
		done = map[tp]int64{}
		s.done[group] = done
	}
	// The partitions whose offset changed since it was last synced and
	// that the mirror has copied up to the group's offset.
	todo := map[tp]int64{}
	committed.Each(func(o kadm.OffsetResponse) {
		p := tp{o.Topic, o.Partition}
		last, synced := done[p]
		prog, mirrored := s.latest[p]
		if o.At >= 0 && mirrored && prog.Source >= o.At && (!synced || last != o.At) {
			todo[p] = o.At
		}
	})
	if len(todo) == 0 {
		return nil
	}
	if err := checkStopped(ctx, s.tgt, group, "target"); err != nil {
		if errors.Is(err, ErrGroupActive) {
			s.met.groupSkips.WithLabelValues(group).Inc()
			s.cfg.Logger.Debug("group active on the target: offsets not synced", "group", group)
			return nil
		}
		return err
	}
	current, err := s.tgt.FetchOffsets(ctx, group)
	if err == nil {
		err = current.Error()
	}
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("offsets on the target: %w", err)
	}
	commit := kadm.Offsets{}
	type move struct {
		p tp    // the source partition
		g int64 // its offset translated
	}
	moves := map[tp]move{} // by target partition
	for _, p := range sortedTPs(todo) {
		g := todo[p]
		cands, err := s.candidates(ctx, p, g)
		if err != nil {
			return fmt.Errorf("offset syncs of %s: %w", p, err)
		}
		tr, err := translate(ctx, s.cfg, p, g, cands)
		if errors.Is(err, ErrNotCaughtUp) {
			continue // the target does not show the copies yet: next round
		}
		if err != nil {
			return fmt.Errorf("translate %s offset %d: %w", p, g, err)
		}
		if cur, ok := current.Lookup(tr.TargetTopic, tr.Partition); ok && cur.Err == nil && cur.At >= tr.TargetOffset {
			done[p] = g // never backwards: the target group is at or past it
			continue
		}
		commit.Add(kadm.Offset{Topic: tr.TargetTopic, Partition: tr.Partition, At: tr.TargetOffset, LeaderEpoch: -1})
		moves[tp{tr.TargetTopic, tr.Partition}] = move{p, g}
	}
	if len(commit) == 0 {
		return nil
	}
	resp, err := s.tgt.CommitOffsets(ctx, group, commit)
	if err != nil {
		return fmt.Errorf("commit on the target: %w", err)
	}
	n := 0
	var errs []error
	resp.Each(func(o kadm.OffsetResponse) {
		switch {
		case o.Err == nil:
			n++
			if mv, ok := moves[tp{o.Topic, o.Partition}]; ok {
				done[mv.p] = mv.g
			}
		case errors.Is(o.Err, kerr.UnknownMemberID):
			// A consumer joined the target group since the check: the
			// broker refused; the group is left to its members.
			s.met.groupSkips.WithLabelValues(group).Inc()
		default:
			errs = append(errs, fmt.Errorf("commit %s/%d: %w", o.Topic, o.Partition, o.Err))
		}
	})
	if n > 0 {
		s.met.groupSynced.WithLabelValues(group).Add(float64(n))
		s.cfg.Logger.Debug("group offsets synced to the target", "group", group, "partitions", n)
	}
	return errors.Join(errs...)
}
