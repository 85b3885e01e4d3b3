package mirror

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// targetOffsets returns group's committed offsets of topic on c (none if
// the group does not exist).
func targetOffsets(t *testing.T, c *cluster, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.adm.FetchOffsetsForTopics(ctx, group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// waitSynced waits until group's committed offsets on the target are the
// translation of its source offsets (what a dry-run Cutover computes) and
// returns them (the partitions the group has source offsets for).
func waitSynced(t *testing.T, cfg Config, kf *cluster, group, target string) map[int32]int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		trs, err := Cutover(ctx, cfg, group, CutoverOptions{DryRun: true, Wait: time.Second})
		cancel()
		if err == nil && len(trs) > 0 {
			got := targetOffsets(t, kf, group, target)
			synced := map[int32]int64{}
			for _, tr := range trs {
				if o, ok := got[tr.Partition]; ok && o == tr.TargetOffset {
					synced[tr.Partition] = o
				}
			}
			if len(synced) == len(trs) {
				return synced
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: target offsets %v not the translation of its source offsets within 60s (cutover: %+v, %v)",
				group, targetOffsets(t, kf, group, target), trs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMirrorGroupOffsetSyncResumesWithoutGap: a group reads part of a topic on
// the source in two steps (its offsets inside the mirror's batches) and
// stops; records keep arriving. Without any cutover, the mirror's group
// offset sync moves its offsets on the target forward after each step; a
// consumer of the group started on the target reads every remaining record
// exactly once, starting with the copy of its next source record. A group
// the regex does not select is not synced. Under both guarantees.
func TestMirrorGroupOffsetSyncResumesWithoutGap(t *testing.T) {
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprint("exactly-once=", eos), func(t *testing.T) {
			weir, kf := startWeir(t), startKfake(t)
			weir.createTopic(t, "clicks", 3, nil)
			weir.produce(t, "clicks", 3, 0, 300)
			weir.produceTxn(t, "clicks", 3, 300, 30)
			cfg := Config{Source: weir.seeds, Target: kf.seeds, Topics: []string{"clicks"}, Prefix: "dc1.",
				ExactlyOnce: eos, MaxPollRecords: 23, SyncGroups: "read.*", SyncGroupsInterval: 50 * time.Millisecond}
			runMirror(t, cfg)

			before := consumeGroup(t, weir, "readers", "clicks", 70, 11)
			first := waitSynced(t, cfg, kf, "readers", "dc1.clicks")
			weir.produce(t, "clicks", 3, 330, 100)
			before = append(before, consumeGroup(t, weir, "readers", "clicks", 67, 13)...)
			consumeGroup(t, weir, "ignored", "clicks", 50, 50)
			weir.produce(t, "clicks", 3, 430, 100)
			second := waitSynced(t, cfg, kf, "readers", "dc1.clicks")
			moved := false
			for p, o := range second {
				if o < first[p] {
					t.Errorf("partition %d: target offset moved back from %d to %d", p, first[p], o)
				}
				moved = moved || o > first[p]
			}
			if !moved {
				t.Errorf("target offsets %v did not follow the group's second commit (first %v)", second, first)
			}

			all := weir.readAll(t, "clicks")
			total := 0
			for _, rs := range all {
				total += len(rs)
			}
			after := consumeGroup(t, kf, "readers", "dc1.clicks", total-len(before), 50)
			seen := map[string]int{}
			for _, r := range append(before, after...) {
				seen[string(r.Value)+"/"+string(r.Headers[0].Value)]++
			}
			for p, rs := range all {
				for _, r := range rs {
					if n := seen[string(r.Value)+"/"+string(r.Headers[0].Value)]; n != 1 {
						t.Errorf("clicks/%d offset %d (%s) read %d times", p, r.Offset, r.Value, n)
					}
				}
			}
			// Per partition, the target picks up right after the source.
			lastBefore, firstAfter := map[int32]*kgo.Record{}, map[int32]*kgo.Record{}
			for _, r := range before {
				lastBefore[r.Partition] = r
			}
			for _, r := range after {
				if firstAfter[r.Partition] == nil {
					firstAfter[r.Partition] = r
				}
			}
			for p, rs := range all {
				next := 0
				for i, r := range rs {
					if lb := lastBefore[p]; lb != nil && r.Offset == lb.Offset {
						next = i + 1
					}
				}
				if next < len(rs) && (firstAfter[p] == nil || !sameRecord(rs[next], firstAfter[p])) {
					t.Errorf("partition %d: first record on the target is not the source's next (%s)", p, rs[next].Value)
				}
			}
			if got := targetOffsets(t, kf, "ignored", "dc1.clicks"); len(got) != 0 {
				t.Errorf("group ignored (not selected) has offsets on the target: %v", got)
			}
		})
	}
}

// TestMirrorGroupOffsetSyncLeavesTargetGroupsAlone: the sync never writes to a
// group with members on the target (its own commits stay), and never moves
// a target group's offsets backwards; once the active group's members
// leave, its offsets are synced. A selected group synced in the same
// rounds shows that the rounds ran.
func TestMirrorGroupOffsetSyncLeavesTargetGroupsAlone(t *testing.T) {
	weir, kf := startWeir(t), startKfake(t)
	weir.createTopic(t, "clicks", 3, nil)
	weir.produce(t, "clicks", 3, 0, 300)
	cfg := Config{Source: weir.seeds, Target: kf.seeds, Topics: []string{"clicks"}, Prefix: "dc1.",
		MaxPollRecords: 23, SyncGroups: "g-.*", SyncGroupsInterval: 50 * time.Millisecond}
	runMirror(t, cfg)
	waitCaughtUp(t, cfg, map[string]int32{"clicks": 3})

	// g-live: a member on the target that committed its own offsets.
	live, err := kgo.NewClient(kgo.SeedBrokers(kf.seeds...), kgo.ConsumerGroup("g-live"), kgo.ConsumeTopics("dc1.clicks"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var liveRead []*kgo.Record
	for len(liveRead) < 5 {
		live.PollRecords(ctx, 5-len(liveRead)).EachRecord(func(r *kgo.Record) { liveRead = append(liveRead, r) })
		if ctx.Err() != nil {
			t.Fatal("target consumer read nothing")
		}
	}
	if err := live.CommitRecords(ctx, liveRead...); err != nil {
		t.Fatal(err)
	}
	liveOffsets := targetOffsets(t, kf, "g-live", "dc1.clicks")

	// g-ahead: no member on the target, offsets at the end of the copies.
	ends, err := endOffsets(ctx, kf.adm, true, "dc1.clicks")
	if err != nil {
		t.Fatal(err)
	}
	ahead := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		ahead.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	if resp, err := kf.adm.CommitOffsets(ctx, "g-ahead", ahead); err != nil || resp.Error() != nil {
		t.Fatalf("commit g-ahead on the target: %v %v", err, resp.Error())
	}
	aheadOffsets := targetOffsets(t, kf, "g-ahead", "dc1.clicks")

	// On the source, both groups are further along than g-live and behind
	// g-ahead; g-witness is synced in the same rounds.
	consumeGroup(t, weir, "g-live", "clicks", 150, 50)
	consumeGroup(t, weir, "g-ahead", "clicks", 150, 50)
	consumeGroup(t, weir, "g-witness", "clicks", 90, 30)
	waitSynced(t, cfg, kf, "g-witness", "dc1.clicks")
	consumeGroup(t, weir, "g-witness", "clicks", 30, 30)
	waitSynced(t, cfg, kf, "g-witness", "dc1.clicks") // a round that started after every commit above

	if got := targetOffsets(t, kf, "g-live", "dc1.clicks"); fmt.Sprint(got) != fmt.Sprint(liveOffsets) {
		t.Errorf("active target group g-live: offsets %v, its own commits were %v", got, liveOffsets)
	}
	if got := targetOffsets(t, kf, "g-ahead", "dc1.clicks"); fmt.Sprint(got) != fmt.Sprint(aheadOffsets) {
		t.Errorf("target group g-ahead: offsets moved from %v to %v", aheadOffsets, got)
	}

	// GroupStatus shows each group's state: g-witness synced, g-ahead
	// ahead of its translation, g-live behind with its member on the target.
	sts, err := GroupStatus(ctx, cfg, "g-.*")
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]map[string]int{}
	for _, s := range sts {
		if states[s.Group] == nil {
			states[s.Group] = map[string]int{}
		}
		states[s.Group][s.State]++
		if s.TargetTopic != "dc1.clicks" || s.Translated < 0 && s.State != GroupCopying {
			t.Errorf("status row %+v", s)
		}
		if want := map[bool]int{true: 1, false: 0}[s.Group == "g-live"]; s.TargetMembers != want {
			t.Errorf("group %s: %d members on the target, want %d", s.Group, s.TargetMembers, want)
		}
	}
	if w := states["g-witness"]; w[GroupSynced] == 0 || len(w) != 1 {
		t.Errorf("g-witness states %v, want all synced", w)
	}
	if a := states["g-ahead"]; a[GroupAhead] == 0 || a[GroupBehind] != 0 || a[GroupCopying] != 0 {
		t.Errorf("g-ahead states %v, want ahead (or synced where the source read a whole partition)", a)
	}
	if l := states["g-live"]; l[GroupBehind] == 0 || l[GroupAhead] != 0 {
		t.Errorf("g-live states %v, want behind", l)
	}
	if len(states) != 3 {
		t.Errorf("status of groups %v, want g-live, g-ahead, g-witness", states)
	}

	// Once g-live's member leaves, the sync moves it to its translation.
	live.Close()
	synced := waitSynced(t, cfg, kf, "g-live", "dc1.clicks")
	for p, o := range synced {
		if o <= liveOffsets[p] {
			t.Errorf("g-live partition %d: synced to %d, not past its target commit %d", p, o, liveOffsets[p])
		}
	}
}
