package group

import (
	"context"
	"time"
)

// PartitionLag is a group's position on one partition.
type PartitionLag struct {
	Topic     string
	Partition int32
	// Committed is the committed offset, or -1 when the group has none
	// for this partition of a topic it subscribes to (Uncommitted).
	Committed int64
	// Uncommitted: no committed offset; Lag and LagTime count from the
	// log start (what a consumer starting at the earliest offset reads).
	Uncommitted bool
	End         int64 // high watermark (log end visible to consumers)
	Start       int64 // log start offset
	// Lag is End - Committed (records not yet consumed), at least 0. A
	// committed offset below the log start counts from the log start.
	Lag int64
	// LagTime is the age of the oldest unconsumed record: now minus the
	// timestamp of the record at the committed offset; 0 when caught up;
	// -1 when unknown (the Topics does not implement TimestampReader).
	LagTime time.Duration
}

// GroupSnapshot is a consistent copy of one group's offsets.
type GroupSnapshot struct {
	Group   string
	Type    string // "classic" or "consumer"
	State   string
	Members int
	// Generation is the classic generation ID, or the consumer group's
	// epoch (KIP-848).
	Generation int32
	offsets    map[tp]int64
	subscribed []string // topics the members consume, sorted
}

// snapshot copies every group's committed offsets on the loop.
func (c *Coordinator) snapshot(ctx context.Context) ([]GroupSnapshot, error) {
	var out []GroupSnapshot
	err := c.do(ctx, func() {
		for _, id := range sortedKeys(c.groups) {
			g := c.groups[id]
			if g.kind == kindClassic && g.state == stateDead {
				continue
			}
			s := GroupSnapshot{Group: id, Type: g.kind.String(), State: g.stateName(), offsets: map[tp]int64{}}
			if g.kind == kindConsumer {
				s.Members, s.Generation = len(g.cg.members), g.cg.epoch
			} else {
				s.Members, s.Generation = len(g.members), g.generation
			}
			s.subscribed = sortedKeys(g.subscribedTopics())
			for t, cm := range g.offsets {
				s.offsets[t] = cm.offset
			}
			out = append(out, s)
		}
	})
	return out, err
}

// Lag reports per-partition lag of one group (nil if the group does not
// exist), sorted by topic and partition. Safe for concurrent use.
func (c *Coordinator) Lag(ctx context.Context, group string) ([]PartitionLag, error) {
	snap, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range snap {
		if g.Group == group {
			return c.lagOf(g), nil
		}
	}
	return nil, nil
}

// lagOf computes lag outside the loop (it reads partition logs): the
// partitions with a committed offset, then those of the subscribed topics
// without one (Uncommitted, counted from the log start).
func (c *Coordinator) lagOf(g GroupSnapshot) []PartitionLag {
	tr, _ := c.opts.Topics.(TimestampReader)
	now := c.opts.Now()
	var out []PartitionLag
	for _, t := range sortedTPs(g.offsets) {
		end, ok := c.opts.Topics.HighWatermark(t.topic, t.partition)
		if !ok {
			continue // topic deleted
		}
		start, _ := c.opts.Topics.LogStartOffset(t.topic, t.partition)
		committed := g.offsets[t]
		out = append(out, lagFrom(tr, now, PartitionLag{Topic: t.topic, Partition: t.partition, Committed: committed, End: end, Start: start}))
	}
	for _, topic := range g.subscribed {
		n, _ := c.opts.Topics.Partitions(topic)
		for p := range n {
			if _, ok := g.offsets[tp{topic, p}]; ok {
				continue
			}
			end, ok := c.opts.Topics.HighWatermark(topic, p)
			if !ok {
				continue
			}
			start, _ := c.opts.Topics.LogStartOffset(topic, p)
			out = append(out, lagFrom(tr, now, PartitionLag{Topic: topic, Partition: p, Committed: -1, Uncommitted: true, End: end, Start: start}))
		}
	}
	return out
}

// lagFrom fills pl's Lag and LagTime from its offsets: counted from the
// committed offset, or from the log start when that is later (or there is
// no committed offset).
func lagFrom(tr TimestampReader, now time.Time, pl PartitionLag) PartitionLag {
	from := max(pl.Committed, pl.Start)
	pl.Lag = max(pl.End-from, 0)
	pl.LagTime = -1
	if tr != nil {
		pl.LagTime = 0
		if pl.Lag > 0 {
			if ts, ok := tr.TimestampAt(pl.Topic, pl.Partition, from); ok {
				pl.LagTime = max(now.Sub(ts), 0)
			}
		}
	}
	return pl
}
