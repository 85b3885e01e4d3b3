package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
	"github.com/weirhq/weir/broker/group"
	wlog "github.com/weirhq/weir/broker/log"
)

// Group coordinator wiring. The coordinator (broker/group) stores committed
// offsets in the single partition of the compacted internal topic
// "__consumer_offsets", which the broker creates on first start. The topic
// is hidden from Metadata unless asked for by name (as Kafka hides it from
// clients that exclude internal topics).

const offsetsTopic = "__consumer_offsets"

// groupHandler is the part of *group.Coordinator the broker uses.
type groupHandler interface {
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close() error
}

// The group coordinator's APIs, at the versions broker/group registers
// next to their handlers. FindCoordinator is among them: it answers
// transaction coordinator lookups (key type 1) too. OffsetCommit is
// ordered per group within a connection (commit_order.go).
func init() {
	for _, v := range group.APIVersions() {
		a := api{key: kmsg.Key(v.ApiKey), min: v.MinVersion, max: v.MaxVersion, handle: handleGroup}
		switch a.key {
		case kmsg.OffsetCommit:
			a.order = orderCommits
		case kmsg.ListGroups: // both coordinators' groups (shares.go)
			a.handle = listGroupsAll
		case kmsg.DeleteGroups:
			a.handle = deleteGroupsAll
		case kmsg.DescribeGroups:
			a.handle = describeGroupsAll
		case kmsg.ConsumerGroupHeartbeat, kmsg.JoinGroup: // not under a share group's ID (shares.go)
			a.handle = handleGroupNotShare
		}
		regAPI(a)
	}
}

// startGroups opens (creating on first start) __consumer_offsets and
// builds the coordinator. The listener must be up: FindCoordinator answers
// with the advertised address.
func (b *Broker) startGroups() error {
	t, ok := b.topics.get(offsetsTopic)
	if !ok {
		var err error
		t, err = b.topics.create(offsetsTopic, 1, map[string]string{
			"cleanup.policy":  "compact",
			"segment.bytes":   "104857600",
			"retention.ms":    "-1",
			"retention.bytes": "-1",
		}, false)
		if err != nil {
			return fmt.Errorf("create %s: %w", offsetsTopic, err)
		}
	}
	coord, err := group.NewCoordinator(group.Options{
		NodeID:  b.cfg.NodeID,
		Host:    b.host,
		Port:    b.port,
		Offsets: t.parts[0],
		Topics:  brokerTopics{b},
		// A regex subscription resolves to the topics the member's
		// principal may describe (authz.go), as Kafka's coordinator.
		TopicDescribable: func(principal, host, topic string) bool {
			return b.authz == nil || b.authz.Allowed(principal, host, authz.OpDescribe, authz.ResourceTopic, topic)
		},
		Now:        b.cfg.Now,
		Logger:     b.cfg.Logger.With("component", "group"),
		Registerer: b.cfg.Registerer,

		InitialRebalanceDelay: b.cfg.GroupInitialRebalanceDelay,
	})
	if err != nil {
		return fmt.Errorf("start group coordinator: %w", err)
	}
	b.groups = coord
	return nil
}

// handleGroup routes a group API request to the coordinator.
// FindCoordinator answers with the advertised address of the listener the
// request came in on (the coordinator knows only the first listener's).
func handleGroup(b *Broker, ctx context.Context, s *slot, req kmsg.Request) (kmsg.Response, error) {
	resp, err := b.groups.Handle(group.WithPrincipal(group.WithClient(ctx, s.clientID, s.host), s.principal), req)
	if fc, ok := resp.(*kmsg.FindCoordinatorResponse); ok && err == nil {
		host, port := b.endpoint(s)
		if fc.NodeID == b.cfg.NodeID && fc.ErrorCode == 0 {
			fc.Host, fc.Port = host, port
		}
		for i := range fc.Coordinators {
			if c := &fc.Coordinators[i]; c.NodeID == b.cfg.NodeID && c.ErrorCode == 0 {
				c.Host, c.Port = host, port
			}
		}
	}
	return resp, err
}

// brokerTopics implements group.Topics over the registry.
type brokerTopics struct{ b *Broker }

var _ group.Topics = brokerTopics{}

func (bt brokerTopics) Partitions(topic string) (int32, bool) {
	t, ok := bt.b.topics.get(topic)
	if !ok {
		return 0, false
	}
	return int32(len(t.parts)), true
}

func (bt brokerTopics) TopicID(topic string) ([16]byte, bool) {
	t, ok := bt.b.topics.get(topic)
	if !ok {
		return [16]byte{}, false
	}
	return t.id, true
}

func (bt brokerTopics) TopicName(id [16]byte) (string, bool) {
	t, ok := bt.b.topics.getByID(id)
	if !ok {
		return "", false
	}
	return t.name, true
}

func (bt brokerTopics) HighWatermark(topic string, partition int32) (int64, bool) {
	t, ok := bt.b.topics.get(topic)
	if !ok {
		return 0, false
	}
	l, ok := t.partition(partition)
	if !ok {
		return 0, false
	}
	return l.HighWatermark(), true
}

func (bt brokerTopics) LogStartOffset(topic string, partition int32) (int64, bool) {
	t, ok := bt.b.topics.get(topic)
	if !ok {
		return 0, false
	}
	l, ok := t.partition(partition)
	if !ok {
		return 0, false
	}
	return l.LogStartOffset(), true
}

var _ group.TopicLister = brokerTopics{}

// TopicNames lists every topic, internal ones included, sorted (KIP-848
// regular-expression subscriptions).
func (bt brokerTopics) TopicNames() []string {
	ts := bt.b.topics.all()
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.name
	}
	return names
}

var _ group.TimestampReader = brokerTopics{}

// TimestampAt is the timestamp of the first record at or after offset
// (lag in time). For uncompressed batches it is the record's own
// timestamp; for compressed ones the batch's first timestamp (a lower
// bound: records are not decompressed for this).
func (bt brokerTopics) TimestampAt(topic string, partition int32, offset int64) (time.Time, bool) {
	t, ok := bt.b.topics.get(topic)
	if !ok {
		return time.Time{}, false
	}
	l, ok := t.partition(partition)
	if !ok {
		return time.Time{}, false
	}
	hw := l.HighWatermark()
	if offset >= hw || offset < l.LogStartOffset() {
		return time.Time{}, false
	}
	rr, err := l.Read(offset, 1, hw)
	if err != nil {
		return time.Time{}, false
	}
	if rr.Release != nil {
		defer rr.Release()
	}
	ts, ok := recordTimestamp(rr.Data, offset)
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(ts), true
}

// recordTimestamp finds the timestamp of the first record at or after
// offset in data (whole RecordBatch v2 batches).
func recordTimestamp(data []byte, offset int64) (int64, bool) {
	for {
		h, ok := wlog.ReadBatchHeader(data)
		if !ok {
			return 0, false
		}
		n := h.Size()
		if n < wlog.BatchHeaderSize || n > int64(len(data)) {
			return 0, false
		}
		recs := data[wlog.BatchHeaderSize:n]
		data = data[n:]
		if h.LastOffset() < offset {
			continue
		}
		switch {
		case h.LogAppendTime():
			return h.MaxTimestamp, true // every record has the batch's max timestamp
		case h.Compressed():
			return h.FirstTimestamp, true // records are not decompressed for this
		}
		for range h.NumRecords {
			l, sz := binary.Varint(recs)
			if sz <= 0 || l < 0 || int64(len(recs)-sz) < l {
				break
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:sz+int(l)]); err != nil {
				break
			}
			if h.BaseOffset+int64(r.OffsetDelta) >= offset {
				return h.FirstTimestamp + r.TimestampDelta64, true
			}
			recs = recs[sz+int(l):]
		}
		return h.FirstTimestamp, true
	}
}
