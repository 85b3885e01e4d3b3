package mirror

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeGroup consumes topic in group on c (read_committed) until want
// records are read, commits exactly what it read, and leaves the group.
// It returns the records read.
func consumeGroup(t *testing.T, c *cluster, group, topic string, want, perPoll int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollRecords(ctx, min(perPoll, want-len(got)))
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d records of %s", group, len(got), want, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	if err := cl.CommitRecords(ctx, got...); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCutoverResumesWithoutGap: a group reads part of a topic on the
// source (its offsets fall inside the mirror's batches), stops; records
// keep arriving and being copied; Cutover moves the group, which on the
// target reads every remaining record exactly once, starting with the
// copy of its next source record. Under both guarantees (the target of an
// exactly-once mirror holds transaction markers, so offsets differ).
func TestCutoverResumesWithoutGap(t *testing.T) {
	defer func(n int64) { syncsChunk = n }(syncsChunk)
	syncsChunk = 3 // offset syncs read from the end in several chunks
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprint("exactly-once=", eos), func(t *testing.T) {
			weir, kf := startWeir(t), startKfake(t)
			weir.createTopic(t, "clicks", 3, nil)
			weir.produce(t, "clicks", 3, 0, 300)
			weir.produceTxn(t, "clicks", 3, 300, 30) // markers and aborted records on the source too
			cfg := Config{Source: weir.seeds, Target: kf.seeds, Topics: []string{"clicks"}, Prefix: "dc1.",
				ExactlyOnce: eos, MaxPollRecords: 23}
			runMirror(t, cfg)

			before := consumeGroup(t, weir, "readers", "clicks", 137, 11)
			weir.produce(t, "clicks", 3, 330, 200)

			// Refused while the group is active on the source.
			active, err := kgo.NewClient(kgo.SeedBrokers(weir.seeds...), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("clicks"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			for i := 0; ; i++ {
				_, err := Cutover(ctx, cfg, "readers", CutoverOptions{DryRun: true})
				if errors.Is(err, ErrGroupActive) {
					break
				}
				if i == 100 {
					t.Fatalf("Cutover with an active group = %v, want ErrGroupActive", err)
				}
				active.PollRecords(ctx, 1) // joins the group
			}
			active.Close()

			trs, err := Cutover(ctx, cfg, "readers", CutoverOptions{})
			if err != nil {
				t.Fatal(err)
			}
			readParts := map[int32]bool{}
			for _, r := range before {
				readParts[r.Partition] = true
			}
			if len(trs) != len(readParts) {
				t.Fatalf("translated %d partitions, want the %d the group read: %+v", len(trs), len(readParts), trs)
			}
			inside := 0
			for _, tr := range trs {
				if tr.Between > 0 {
					inside++
				}
			}
			t.Logf("translations: %+v (%d inside a batch)", trs, inside)

			all := weir.readAll(t, "clicks")
			total := 0
			for _, rs := range all {
				total += len(rs)
			}
			after := consumeGroup(t, kf, "readers", "dc1.clicks", total-len(before), 50)

			// Every source record read exactly once, across both sides.
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
			lastBefore := map[int32]*kgo.Record{}
			for _, r := range before {
				lastBefore[r.Partition] = r
			}
			firstAfter := map[int32]*kgo.Record{}
			for _, r := range after {
				if firstAfter[r.Partition] == nil {
					firstAfter[r.Partition] = r
				}
			}
			for p, rs := range all {
				next := 0
				if lb := lastBefore[p]; lb != nil {
					for i, r := range rs {
						if r.Offset == lb.Offset {
							next = i + 1
						}
					}
				}
				if next < len(rs) && (firstAfter[p] == nil || !sameRecord(rs[next], firstAfter[p])) {
					t.Errorf("partition %d: first record on the target is not the source's next (%s)", p, rs[next].Value)
				}
			}
			// Nothing more to read on the target.
			extra := 0
			cl, _ := kgo.NewClient(kgo.SeedBrokers(kf.seeds...), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("dc1.clicks"),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			cl.PollFetches(pctx).EachRecord(func(*kgo.Record) { extra++ })
			pcancel()
			cl.Close()
			if extra != 0 {
				t.Errorf("%d records read twice on the target", extra)
			}
		})
	}
}
