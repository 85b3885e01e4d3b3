package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/ilog"
)

// Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, expiry.
//
// Behavior:
//   - OffsetCommit validates the group/member/generation (classic) or
//     member epoch (KIP-848) as Kafka does, then appends one batch with a
//     record per accepted partition, durable (fsynced); the response is
//     sent, and the offsets become visible to OffsetFetch, only after the
//     append returned. A failed append answers NOT_COORDINATOR (retriable:
//     the client finds the coordinator again and retries).
//   - Generation -1 with an empty member ID on an Empty (or absent) group
//     is a "simple" commit: the group only stores offsets.
//   - Metadata longer than 4096 bytes: OFFSET_METADATA_TOO_LARGE; unknown
//     topic or partition: UNKNOWN_TOPIC_OR_PARTITION (v10+: topic IDs,
//     UNKNOWN_TOPIC_ID).
//   - Offsets of a group that has been Empty for offsets.retention.minutes
//     expire (tombstones are written); for groups that never had members
//     ("simple" groups) each offset expires retention after its commit.

// Versions: OffsetCommit v0-10, OffsetFetch v0-10, OffsetDelete v0.
//   - OffsetCommit v1 Generation/MemberID and a per-partition Timestamp
//     (the expiry base, v1 only); v2-v4 RetentionTimeMillis; v6
//     LeaderEpoch; v7 InstanceID; v9 the member epoch of a KIP-848 group in
//     Generation (STALE_MEMBER_EPOCH); v10 topics by ID.
//   - OffsetFetch v2 top-level ErrorCode (v0/v1: on every partition); v5
//     LeaderEpoch; v7 RequireStable; v8 batched groups; v9 MemberID and
//     MemberEpoch (STALE_MEMBER_EPOCH); v10 topics by ID.

func init() {
	regAPI(kmsg.OffsetCommit, 0, 10, (*Coordinator).offsetCommit)
	regAPI(kmsg.OffsetFetch, 0, 10, (*Coordinator).offsetFetch)
	regAPI(kmsg.OffsetDelete, 0, 0, (*Coordinator).offsetDelete)
}

const maxMetadataBytes = 4096

func (g *group) validateCommit(req *kmsg.OffsetCommitRequest) *kerr.Error {
	gen := req.Generation
	if req.Version < 1 {
		gen = -1
	}
	return g.validateCommitter(gen, req.MemberID, req.InstanceID, false)
}

func (c *Coordinator) offsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	gen := req.Generation
	if req.Version < 1 {
		gen = -1
	}
	in := commitInput{
		group: req.Group,
		byID:  req.Version >= 10,
		what:  "offset commit",
		check: func() (commitTarget, *kerr.Error) {
			g := c.groups[req.Group]
			if g == nil {
				if gen >= 0 {
					return nil, kerr.IllegalGeneration
				}
				g = c.newGroup(req.Group, kindClassic)
			}
			if err := g.validateCommit(req); err != nil {
				return nil, err
			}
			return &groupCommit{c: c, g: g}, nil
		},
	}
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis > 0 {
		in.retention = time.Duration(req.RetentionTimeMillis) * time.Millisecond
	}
	for _, t := range req.Topics {
		ct := commitTopicIn{name: t.Topic, id: t.TopicID}
		for _, p := range t.Partitions {
			cp := commitPartitionIn{partition: p.Partition, offset: p.Offset, leaderEpoch: -1, metadata: p.Metadata}
			if req.Version >= 6 {
				cp.leaderEpoch = p.LeaderEpoch
			}
			if req.Version == 1 {
				cp.timestamp = p.Timestamp
			}
			ct.partitions = append(ct.partitions, cp)
		}
		in.topics = append(in.topics, ct)
	}
	codes, err := c.commit(ctx, in)
	if err != nil {
		return nil, err
	}
	r := kmsg.NewPtrOffsetCommitResponse()
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for pi, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[ti][pi]
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, nil
}

// groupCommit applies an OffsetCommit's offsets to its group. Loop only.
type groupCommit struct {
	c   *Coordinator
	g   *group
	inc uint64 // the group's incarnation when the write was queued
}

func (gc *groupCommit) batch(recs []rec, now time.Time) []byte {
	gc.inc = gc.g.incarnation
	gc.g.pendingWrites++
	return encodeBatch(recs, now)
}

// applied makes the offsets committed, unless the group was deleted (or
// deleted and recreated) while the write was in flight.
func (gc *groupCommit) applied(offs []acceptedOffset, err error) {
	g := gc.g
	g.pendingWrites--
	if err == nil && gc.c.groups[g.id] == g && g.incarnation == gc.inc {
		for _, o := range offs {
			g.offsets[o.tp] = o.cm
		}
	}
}

// ---- OffsetFetch ----

func (c *Coordinator) offsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	r := kmsg.NewPtrOffsetFetchResponse()
	err := c.do(ctx, func() {
		if req.Version < 8 {
			topics := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
			if req.Topics == nil {
				topics = nil
			}
			rg := c.fetchGroup(req.Version, req.Group, nil, -1, topics, req.RequireStable)
			r.ErrorCode = rg.ErrorCode
			for _, t := range rg.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				r.Topics = append(r.Topics, rt)
			}
			if req.Version < 2 && r.ErrorCode != 0 {
				// v0/v1 have no top-level error: put it on every partition.
				for i := range r.Topics {
					for j := range r.Topics[i].Partitions {
						r.Topics[i].Partitions[j].ErrorCode = r.ErrorCode
					}
				}
			}
			return
		}
		for _, gq := range req.Groups {
			r.Groups = append(r.Groups, c.fetchGroup(req.Version, gq.Group, gq.MemberID, gq.MemberEpoch, gq.Topics, req.RequireStable))
		}
	})
	return r, err
}

// fetchGroup answers one group of an OffsetFetch. topics nil means all.
// With requireStable (v7+), a partition with an offset staged by an open
// transaction answers UNSTABLE_OFFSET_COMMIT (retriable: the client asks
// again once the transaction ended).
func (c *Coordinator) fetchGroup(version int16, groupID string, memberID *string, memberEpoch int32, topics []kmsg.OffsetFetchRequestGroupTopic, requireStable bool) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group = groupID
	if groupID == "" && version >= 8 {
		rg.ErrorCode = kerr.InvalidGroupID.Code
		return rg
	}
	g := c.groups[groupID]
	if g != nil && memberID != nil && *memberID != "" && g.kind == kindConsumer {
		m := g.cg.members[*memberID]
		switch {
		case m == nil:
			rg.ErrorCode = kerr.UnknownMemberID.Code
			return rg
		case memberEpoch != m.epoch && memberEpoch != m.prevEpoch:
			rg.ErrorCode = kerr.StaleMemberEpoch.Code
			return rg
		}
	}
	part := func(t string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition = p
		rp.Offset, rp.LeaderEpoch = -1, -1
		empty := ""
		rp.Metadata = &empty
		if g != nil {
			if cm, ok := g.offsets[tp{t, p}]; ok {
				rp.Offset, rp.LeaderEpoch = cm.offset, cm.leaderEpoch
				md := cm.metadata
				rp.Metadata = &md
			}
		}
		if requireStable && version >= 7 && c.txnPending(groupID, tp{t, p}) {
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
		}
		return rp
	}
	if topics == nil {
		if g == nil {
			return rg
		}
		byTopic := map[string][]int32{}
		for t := range g.offsets {
			byTopic[t.topic] = append(byTopic[t.topic], t.partition)
		}
		for _, name := range sortedKeys(byTopic) {
			ps := byTopic[name]
			sortInt32s(ps)
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = name
			if version >= 10 {
				rt.TopicID, _ = c.opts.Topics.TopicID(name)
			}
			for _, p := range ps {
				rt.Partitions = append(rt.Partitions, part(name, p))
			}
			rg.Topics = append(rg.Topics, rt)
		}
		return rg
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name := t.Topic
		if version >= 10 {
			n, ok := c.opts.Topics.TopicName(t.TopicID)
			if !ok {
				for _, p := range t.Partitions {
					rp := part("", p)
					rp.ErrorCode = kerr.UnknownTopicID.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
				continue
			}
			name = n
		}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, part(name, p))
		}
		rg.Topics = append(rg.Topics, rt)
	}
	return rg
}

// ---- OffsetDelete ----

func (c *Coordinator) offsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	r := kmsg.NewPtrOffsetDeleteResponse()
	var applied chan error
	err := c.do(ctx, func() {
		if req.Group == "" {
			r.ErrorCode = kerr.InvalidGroupID.Code
			return
		}
		g := c.groups[req.Group]
		if g == nil || (g.kind == kindClassic && g.state == stateDead) {
			r.ErrorCode = kerr.GroupIDNotFound.Code
			return
		}
		if g.kind == kindClassic && !g.isEmpty() && g.protocolType != "consumer" {
			r.ErrorCode = kerr.NonEmptyGroup.Code
			return
		}
		subscribed := map[string]bool{}
		if !g.isEmpty() {
			subscribed = g.subscribedTopics()
		}
		var recs []rec
		var del []tp
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			_, known := c.opts.Topics.Partitions(t.Topic)
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				switch {
				case subscribed[t.Topic]:
					rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
				case !known:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					if _, ok := g.offsets[tp{t.Topic, p.Partition}]; ok {
						recs = append(recs, rec{Key: offsetKey(g.id, t.Topic, p.Partition)})
						del = append(del, tp{t.Topic, p.Partition})
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		if len(recs) == 0 {
			return
		}
		// Deleted from memory now; the tombstones are durable before the
		// response.
		for _, t := range del {
			delete(g.offsets, t)
		}
		applied = make(chan error, 1)
		c.writeRecords(g, recs, true, func(err error) { applied <- err })
	})
	if err != nil {
		return nil, err
	}
	if applied != nil {
		select {
		case werr := <-applied:
			if werr != nil {
				r.ErrorCode = kerr.NotCoordinator.Code
			}
		case <-c.stopping():
			return nil, ErrClosed
		}
	}
	return r, nil
}

// writeRecords queues recs for group g; done (may be nil) runs on the loop.
// Loop only.
func (c *Coordinator) writeRecords(g *group, recs []rec, durable bool, done func(error)) {
	g.pendingWrites++
	c.w.Enqueue(ilog.Write{
		Batch:   encodeBatch(recs, c.opts.Now()),
		Records: len(recs),
		Durable: durable,
		Done: func(_ int64, err error) {
			g.pendingWrites--
			if err != nil {
				c.logger.Error("offsets log append failed", "group", g.id, "err", err)
			}
			if done != nil {
				done(err)
			}
		},
	})
}

// persistGroup records a classic group's metadata (after a generation
// completes or the group becomes Empty). Not waited for: membership is
// soft state, clients rejoin if it is lost.
func (c *Coordinator) persistGroup(g *group) {
	c.writeRecords(g, []rec{{Key: groupKey(g.id), Value: groupValue(g)}}, false, nil)
}

// expireOffsets removes offsets past retention (see the package behavior
// above) and writes their tombstones. Loop only.
func (c *Coordinator) expireOffsets(now time.Time) {
	for _, g := range c.groups {
		if !g.isEmpty() || len(g.offsets) == 0 {
			continue
		}
		simple := g.kind == kindClassic && g.protocolType == ""
		var recs []rec
		for t, cm := range g.offsets {
			var expired bool
			switch {
			case !cm.expireTime.IsZero():
				expired = !now.Before(cm.expireTime)
			case simple:
				expired = !now.Before(cm.commitTime.Add(c.opts.OffsetsRetention))
			default:
				expired = !now.Before(g.stateSince.Add(c.opts.OffsetsRetention))
			}
			if expired {
				delete(g.offsets, t)
				recs = append(recs, rec{Key: offsetKey(g.id, t.topic, t.partition)})
			}
		}
		if len(g.offsets) == 0 && g.kind == kindClassic && g.state == stateEmpty {
			recs = append(recs, rec{Key: groupKey(g.id)})
			g.state = stateDead
		}
		if len(recs) > 0 {
			c.logger.Info("offsets expired", "group", g.id, "records", len(recs))
			c.writeRecords(g, recs, false, nil)
		}
	}
}
