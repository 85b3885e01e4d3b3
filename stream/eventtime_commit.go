package stream

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/stream/internal/watermark"
)

// The watermark travels with the committed offsets.
//
// Every offset a task commits for one of its input partitions carries, as
// its commit metadata, the tracker state of the task's watermark and of that
// input (Kafka Streams keeps its tasks' stream time in the same place). It
// is written by the same request as the offset: the OffsetCommit
// at-least-once, the TxnOffsetCommit of the transaction under ExactlyOnce,
// so a committed transaction's watermark is exactly the one its outputs
// were computed with, and an aborted one's is never seen. A task that
// starts anywhere — another instance, a fresh state directory — reads its
// partitions' committed metadata and resumes each value as the larger of
// that and its local copy: the watermark does not go backwards across
// restarts, rebalances and full restores.
//
// Format: "weir.wm1:" then the unpadded base64url of the tracker state
// (watermark.Tracker.AppendInputState; docs/format/watermark.md). Kafka
// bounds commit metadata by offset.metadata.max.bytes (4096 by default, as
// weir's broker): a state that would not fit leaves out the input's
// upstream writers (each costs ~9 characters; about 430 fit), which
// the reader then hears again.

// commitMetaPrefix starts commit metadata holding a watermark state;
// other metadata (franz-go's default, the member id) is not one.
const commitMetaPrefix = "weir.wm1:"

// maxCommitMetadata is Kafka's default offset.metadata.max.bytes.
const maxCommitMetadata = 4096

// commitMetadata returns the metadata to commit with the offset of the
// task's input partition of topic ("" if the topic is none of its inputs).
func (t *task) commitMetadata(topic string) string {
	in, ok := t.et.inputs[topic]
	if !ok {
		return ""
	}
	enc := func(writers bool) string {
		return commitMetaPrefix + base64.RawURLEncoding.EncodeToString(t.et.tracker.AppendInputState(nil, in, writers))
	}
	if s := enc(true); len(s) <= maxCommitMetadata {
		return s
	}
	return enc(false)
}

// decodeCommitMetadata returns the tracker state commit metadata carries;
// ok is false if it carries none (no prefix), err set if it claims one
// that does not decode.
func decodeCommitMetadata(meta string) (state []byte, ok bool, err error) {
	enc, ok := strings.CutPrefix(meta, commitMetaPrefix)
	if !ok {
		return nil, false, nil
	}
	state, err = base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, true, fmt.Errorf("watermark commit metadata: %w", err)
	}
	return state, true, nil
}

// CommittedWatermark is the event time a stream task committed with the
// offset of one of its input partitions (the offset's commit metadata;
// docs/format/watermark.md), readable by any tool that fetches a group's
// offsets, on weir or another Kafka-compatible cluster.
type CommittedWatermark struct {
	// Watermark is the task's watermark (ms since the Unix epoch;
	// math.MinInt64: none yet): a window closes when it passes the
	// window's end plus its grace.
	Watermark int64
	// MaxEventTime is the largest event time the task had read from the
	// partition (math.MinInt64: none); for a repartition partition, see
	// Writers.
	MaxEventTime int64
	// Writers is the number of upstream tasks whose watermark markers the
	// partition's watermark is the minimum of (0: a source partition, or
	// a repartition partition whose writers were left out to bound the
	// metadata's size).
	Writers int
}

// ParseCommittedWatermark reads a committed offset's metadata: ok false if
// it carries no watermark (not written by a stream task), an error if it
// claims one that does not decode.
func ParseCommittedWatermark(metadata string) (w CommittedWatermark, ok bool, err error) {
	state, ok, err := decodeCommitMetadata(metadata)
	if !ok || err != nil {
		return CommittedWatermark{}, ok, err
	}
	in, err := watermark.DecodeInputState(state)
	if err != nil {
		return CommittedWatermark{}, true, fmt.Errorf("watermark commit metadata: %w", err)
	}
	return CommittedWatermark{Watermark: in.Watermark, MaxEventTime: in.MaxEvent, Writers: in.Writers}, true, nil
}

// commitOffset returns the offset to commit for the task's partition of
// topic when only its metadata changed: its next offset, else the offset
// committed (by it or found at its start; the log start if none was);
// false if it has none.
func (t *task) commitOffset(topic string) (kgo.EpochOffset, bool) {
	if n, ok := t.next[topic]; ok {
		return n, true
	}
	if c, ok := t.committed[topic]; ok {
		return kgo.EpochOffset{Epoch: -1, Offset: c}, true
	}
	if c, ok := t.et.startOffset[topic]; ok {
		return kgo.EpochOffset{Epoch: -1, Offset: c}, true
	}
	return kgo.EpochOffset{}, false
}

// watermarkCommit is what one commit carries for the tasks' watermarks:
// the metadata of each of their input partitions, and the partitions
// whose metadata changed although their offset did not move (they are
// added to the commit at the offset already committed).
type watermarkCommit struct {
	meta  map[topicPartition]string
	extra map[topicPartition]kgo.EpochOffset
	ids   map[string][16]byte // topic ids, for added topics (TxnOffsetCommit v6+)
	owner map[topicPartition]*task
	// sent holds the partitions the commit request carried metadata for
	// (set by the hooks, which run before the request is sent).
	sent map[topicPartition]bool
}

// prepareWatermarkCommit computes, between rounds, the metadata of the
// tasks' partitions for the commit that follows.
func prepareWatermarkCommit(tasks []*task) *watermarkCommit {
	c := &watermarkCommit{meta: map[topicPartition]string{}, extra: map[topicPartition]kgo.EpochOffset{},
		ids: map[string][16]byte{}, owner: map[topicPartition]*task{}, sent: map[topicPartition]bool{}}
	for _, t := range tasks {
		if t.et.tracker == nil {
			continue
		}
		for _, topic := range slices.Sorted(maps.Keys(t.et.inputs)) {
			tp := topicPartition{topic, t.id.partition}
			m := t.commitMetadata(topic)
			c.meta[tp] = m
			c.owner[tp] = t
			if id, ok := t.et.topicIDs[topic]; ok {
				c.ids[topic] = id
			}
			if m == t.et.committedMeta[topic] {
				continue
			}
			if o, ok := t.commitOffset(topic); ok {
				c.extra[tp] = o
			}
		}
	}
	return c
}

// addTo adds the extra partitions to an offsets map not holding them yet.
func (c *watermarkCommit) addTo(offsets map[string]map[int32]kgo.EpochOffset) {
	for tp, o := range c.extra {
		if _, ok := offsets[tp.topic][tp.partition]; ok {
			continue
		}
		if offsets[tp.topic] == nil {
			offsets[tp.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[tp.topic][tp.partition] = o
	}
}

// offsetCommitContext returns ctx carrying the hook that sets the
// metadata of an OffsetCommit (at-least-once).
func (c *watermarkCommit) offsetCommitContext(ctx context.Context) context.Context {
	return kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				tp := topicPartition{rt.Topic, rt.Partitions[j].Partition}
				if m, ok := c.meta[tp]; ok {
					rt.Partitions[j].Metadata = &m
					c.sent[tp] = true
				}
			}
		}
		return nil
	})
}

// txnCommitContext returns ctx carrying the hook that sets the metadata of
// a transaction's TxnOffsetCommit and adds the partitions whose metadata
// alone changed (under ExactlyOnce the client commits the offsets it
// polled; a task whose watermark moved on a tick polled nothing). The hook
// runs inside the client's End, on the loop goroutine.
func (c *watermarkCommit) txnCommitContext(ctx context.Context) context.Context {
	return kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		in := map[topicPartition]bool{}
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				tp := topicPartition{rt.Topic, rt.Partitions[j].Partition}
				in[tp] = true
				if m, ok := c.meta[tp]; ok {
					rt.Partitions[j].Metadata = &m
					c.sent[tp] = true
				}
			}
		}
		for _, tp := range slices.SortedFunc(maps.Keys(c.extra), func(x, y topicPartition) int {
			return cmp.Or(strings.Compare(x.topic, y.topic), cmp.Compare(x.partition, y.partition))
		}) {
			if in[tp] {
				continue
			}
			o, m := c.extra[tp], c.meta[tp]
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = tp.partition, o.Offset, o.Epoch, &m
			k := -1
			for i := range req.Topics {
				if req.Topics[i].Topic == tp.topic {
					k = i
				}
			}
			if k < 0 {
				rt := kmsg.NewTxnOffsetCommitRequestTopic()
				rt.Topic, rt.TopicID = tp.topic, c.ids[tp.topic]
				req.Topics = append(req.Topics, rt)
				k = len(req.Topics) - 1
			}
			req.Topics[k].Partitions = append(req.Topics[k].Partitions, p)
			c.sent[tp] = true
		}
		return nil
	})
}

// committed records that the commit succeeded: the partitions it carried
// metadata for now hold it.
func (c *watermarkCommit) committed() {
	for tp := range c.sent {
		c.owner[tp].et.committedMeta[tp.topic] = c.meta[tp]
	}
}

// resumeCommittedWatermark reads the committed offsets of the task's input
// partitions and resumes the watermark state their metadata carries (the
// larger of it and the local copy, per value). Called once, when the task
// is created in an App (the Driver commits nothing).
func (t *task) resumeCommittedWatermark(ctx context.Context) error {
	a := t.app
	if a.adm == nil {
		return nil // not connected (a test's App): nothing committed to read
	}
	topics := slices.Sorted(maps.Keys(t.et.inputs))
	resp, err := a.adm.FetchOffsetsForTopics(ctx, a.id, topics...)
	if err != nil {
		return fmt.Errorf("task %s: committed offsets: %w", t.id, err)
	}
	now := a.cfg.clock.Now()
	var uncommitted []string
	for _, topic := range topics {
		o, ok := resp.Lookup(topic, t.id.partition)
		if !ok || o.At < 0 {
			uncommitted = append(uncommitted, topic)
		}
		if !ok {
			continue
		}
		if o.Err != nil {
			return fmt.Errorf("task %s: committed offset of %s-%d: %w", t.id, topic, t.id.partition, o.Err)
		}
		if o.At >= 0 {
			t.et.startOffset[topic] = o.At
		}
		t.et.committedMeta[topic] = o.Metadata
		b, ok, err := decodeCommitMetadata(o.Metadata)
		if !ok {
			continue
		}
		if err == nil {
			err = t.et.tracker.Restore(b, now)
		}
		if err != nil {
			a.cfg.logger.Warn("committed watermark state unreadable; ignored", "task", t.id.String(),
				"topic", topic, "partition", t.id.partition, "err", err)
		}
	}
	if len(uncommitted) > 0 {
		// A partition never committed is consumed from its log start (the
		// App's reset policy): committing that offset with a watermark
		// changes nothing else, and lets a partition that never had a
		// record carry its task's watermark (a later OffsetOutOfRange,
		// once retention passed it, resets to the start again).
		starts, err := a.adm.ListStartOffsets(ctx, uncommitted...)
		if err != nil {
			return fmt.Errorf("task %s: start offsets: %w", t.id, err)
		}
		for _, topic := range uncommitted {
			if o, ok := starts.Lookup(topic, t.id.partition); ok && o.Err == nil && o.Offset >= 0 {
				t.et.startOffset[topic] = o.Offset
			}
		}
	}
	t.et.startWM = t.et.tracker.Watermark()
	t.publishWatermark(t.et.tracker.Watermark(), now)
	details, err := a.adm.ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("task %s: topic ids: %w", t.id, err)
	}
	for _, topic := range topics {
		if d, ok := details[topic]; ok && d.Err == nil {
			t.et.topicIDs[topic] = d.ID
		}
	}
	return nil
}
