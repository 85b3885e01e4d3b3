package share

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/recbatch"
)

// DescribeShareGroupOffsets: v0-1
//
// Behavior:
// * Per partition, the share-partition start offset and (v1) the lag:
//   records from the start to the high watermark not yet acknowledged or
//   archived. A partition the group never consumed: start offset -1.
//   Topics null: every partition with share state.
// * An unknown group answers GROUP_ID_NOT_FOUND.
//
// Version notes:
// * v1: Lag

// AlterShareGroupOffsets: v0
//
// Behavior:
// * Only while the group has no members (NON_EMPTY_GROUP): each named
//   partition restarts at the given start offset (within the log's start
//   and high watermark, else INVALID_REQUEST), its in-flight state cleared.
//   A group that does not exist yet is created with that state. Durable
//   before the response.

// DeleteShareGroupOffsets: v0
//
// Behavior:
// * Only while the group has no members (NON_EMPTY_GROUP): the named
//   topics' share state is deleted; the next assignment starts them anew
//   per share.auto.offset.reset. Durable before the response.

func init() {
	regAPI(kmsg.DescribeShareGroupOffsets, 0, 1, (*Coordinator).handleDescribeOffsets)
	regAPI(kmsg.AlterShareGroupOffsets, 0, 0, (*Coordinator).handleAlterOffsets)
	regAPI(kmsg.DeleteShareGroupOffsets, 0, 0, (*Coordinator).handleDeleteOffsets)
}

func (c *Coordinator) handleDescribeOffsets(_ context.Context, req *kmsg.DescribeShareGroupOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		if !c.knownGroup(rg.GroupID) {
			g.ErrorCode = kerr.GroupIDNotFound.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		part := func(topic string, id [16]byte, p int32) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
			rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, 0, -1
			if n, ok := c.opts.Topics.Partitions(topic); !ok || p < 0 || p >= n {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				return rp
			}
			if sp := c.parts[partKey{rg.GroupID, id, p}]; sp != nil {
				rp.StartOffset = sp.start
				if lag, ok := c.lagOf(sp); ok {
					rp.Lag = lag
				}
			}
			return rp
		}
		if rg.Topics == nil {
			byTopic := map[string][]*sharePartition{}
			for k, sp := range c.parts {
				if k.group == rg.GroupID {
					byTopic[sp.topic] = append(byTopic[sp.topic], sp)
				}
			}
			for _, t := range sortedKeys(byTopic) {
				sps := byTopic[t]
				sort.Slice(sps, func(i, j int) bool { return sps[i].key.part < sps[j].key.part })
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic, rt.TopicID = t, sps[0].key.topicID
				for _, sp := range sps {
					rt.Partitions = append(rt.Partitions, part(t, sp.key.topicID, sp.key.part))
				}
				g.Topics = append(g.Topics, rt)
			}
		}
		for _, t := range rg.Topics {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = t.Topic
			id, _ := c.opts.Topics.TopicID(t.Topic)
			rt.TopicID = id
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, part(t.Topic, id, p))
			}
			g.Topics = append(g.Topics, rt)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func (c *Coordinator) handleAlterOffsets(ctx context.Context, req *kmsg.AlterShareGroupOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if req.GroupID == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	c.mu.Lock()
	if g := c.groups[req.GroupID]; g != nil && len(g.members) > 0 {
		c.mu.Unlock()
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		msg := "share group offsets can be altered only while the group has no members"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	if c.groups[req.GroupID] == nil { // the group exists from now on
		c.groups[req.GroupID] = &group{id: req.GroupID, members: map[string]*member{}, shapes: map[string]int32{}}
	}
	dirty := map[*sharePartition]bool{}
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		id, idOK := c.opts.Topics.TopicID(t.Topic)
		rt.TopicID = id
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			err, msg := func() (*kerr.Error, string) {
				if !idOK || c.opts.Topics.Internal(t.Topic) {
					return kerr.UnknownTopicOrPartition, ""
				}
				l, ok := c.opts.Topics.Log(t.Topic, p.Partition)
				if !ok {
					return kerr.UnknownTopicOrPartition, ""
				}
				if lo, hi := l.LogStartOffset(), l.HighWatermark(); p.StartOffset < lo || p.StartOffset > hi {
					return kerr.InvalidRequest, fmt.Sprintf("start offset %d is outside the log (%d-%d)", p.StartOffset, lo, hi)
				}
				k := partKey{req.GroupID, id, p.Partition}
				sp := &sharePartition{key: k, topic: t.Topic, start: p.StartOffset}
				c.parts[k] = sp
				dirty[sp] = true
				return nil, ""
			}()
			if err != nil {
				rp.ErrorCode = err.Code
				if msg != "" {
					rp.ErrorMessage = &msg
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	w := c.persist(snapshots(dirty))
	c.mu.Unlock()
	if err := w.wait(ctx); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *Coordinator) handleDeleteOffsets(ctx context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	c.mu.Lock()
	if !c.knownGroup(req.GroupID) {
		c.mu.Unlock()
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp, nil
	}
	if g := c.groups[req.GroupID]; g != nil && len(g.members) > 0 {
		c.mu.Unlock()
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return resp, nil
	}
	var recs []recbatch.Record
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		id, ok := c.opts.Topics.TopicID(t.Topic)
		rt.TopicID = id
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		for k := range c.parts {
			if ok && k.group == req.GroupID && k.topicID == id {
				delete(c.parts, k)
				recs = append(recs, recbatch.Record{Key: partitionKey(k)})
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	w := c.persist(recs)
	c.mu.Unlock()
	if err := w.wait(ctx); err != nil {
		return nil, err
	}
	return resp, nil
}

// GroupListing is one share group as ListGroups shows it.
type GroupListing struct {
	ID, State string
}

// ListGroups lists the share groups: those with members and those with
// share state, sorted by ID.
func (c *Coordinator) ListGroups() []GroupListing {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]string{}
	for id, g := range c.groups {
		seen[id] = g.state()
	}
	for k := range c.parts {
		if _, ok := seen[k.group]; !ok {
			seen[k.group] = "Empty"
		}
	}
	out := make([]GroupListing, 0, len(seen))
	for _, id := range sortedKeys(seen) {
		out = append(out, GroupListing{id, seen[id]})
	}
	return out
}

// IsGroup reports whether id is a share group.
func (c *Coordinator) IsGroup(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.knownGroup(id)
}

// DeleteGroup deletes the share group id with its share state and
// configs: GROUP_ID_NOT_FOUND if it is not a share group, NON_EMPTY_GROUP
// while it has members. The deletion is durable when it returns nil.
func (c *Coordinator) DeleteGroup(ctx context.Context, id string) error {
	c.mu.Lock()
	if !c.knownGroup(id) {
		c.mu.Unlock()
		return kerr.GroupIDNotFound
	}
	if g := c.groups[id]; g != nil && len(g.members) > 0 {
		c.mu.Unlock()
		return kerr.NonEmptyGroup
	}
	delete(c.groups, id)
	var recs []recbatch.Record
	for k := range c.parts {
		if k.group == id {
			delete(c.parts, k)
			recs = append(recs, recbatch.Record{Key: partitionKey(k)})
		}
	}
	if _, ok := c.confs[id]; ok {
		delete(c.confs, id)
		recs = append(recs, recbatch.Record{Key: groupConfKey(id)})
	}
	w := c.persist(recs)
	c.mu.Unlock()
	return w.wait(ctx)
}

// GroupConfigs returns the group's share.* config overrides.
func (c *Coordinator) GroupConfigs(group string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.confs[group] {
		out[k] = v
	}
	return out
}

// SetGroupConfigs replaces the group's share.* config overrides (each
// checked with ValidateGroupConfig; none is applied if one is bad). The
// change is durable when it returns nil and applies to the group's next
// heartbeat, fetch and acquisition.
func (c *Coordinator) SetGroupConfigs(ctx context.Context, group string, confs map[string]string) error {
	for k, v := range confs {
		if err := ValidateGroupConfig(k, v); err != nil {
			return err
		}
	}
	c.mu.Lock()
	var rec recbatch.Record
	if len(confs) == 0 {
		delete(c.confs, group)
		rec = recbatch.Record{Key: groupConfKey(group)}
	} else {
		m := make(map[string]string, len(confs))
		for k, v := range confs {
			m[k] = v
		}
		c.confs[group] = m
		rec = recbatch.Record{Key: groupConfKey(group), Value: encodeGroupConf(m)}
	}
	w := c.persist([]recbatch.Record{rec})
	c.mu.Unlock()
	return w.wait(ctx)
}

// GroupConfig is one share.* group config as DescribeConfigs shows it.
type GroupConfig struct {
	GroupConfigDoc
	Value      string
	Overridden bool // set on the group, else the broker's setting
}

// DescribeGroupConfigs lists the group's effective share.* configs,
// sorted by name.
func (c *Coordinator) DescribeGroupConfigs(group string) []GroupConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	conf := c.confs[group]
	defaults := map[string]string{
		ConfAutoOffsetReset:    "latest",
		ConfRecordLockDuration: fmt.Sprint(c.opts.RecordLockDuration.Milliseconds()),
		ConfSessionTimeout:     fmt.Sprint(c.opts.SessionTimeout.Milliseconds()),
		ConfHeartbeatInterval:  fmt.Sprint(c.opts.HeartbeatInterval.Milliseconds()),
		ConfIsolationLevel:     "read_uncommitted",
		ConfDeliveryCountLimit: fmt.Sprint(c.opts.DeliveryCountLimit),
	}
	var out []GroupConfig
	for _, d := range GroupConfigDocs() {
		gc := GroupConfig{GroupConfigDoc: d, Value: defaults[d.Name]}
		if v, ok := conf[d.Name]; ok {
			gc.Value, gc.Overridden = v, true
		}
		out = append(out, gc)
	}
	return out
}
