package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weirhq/weir/broker/internal/ilog"
)

// The path OffsetCommit (offsets.go) and TxnOffsetCommit (txnoffsets.go)
// share: check the group and member, resolve every topic and partition,
// write one durable batch of the accepted offsets, and answer once the
// append returned (NOT_COORDINATOR for the accepted partitions if it
// failed). The two differ only in their request's versions, their member
// check and where the offsets go once durable (commitTarget).

// commitInput is an OffsetCommit or a TxnOffsetCommit reduced to what the
// shared path needs.
type commitInput struct {
	group     string
	byID      bool          // topics are named by ID (OffsetCommit v10+, TxnOffsetCommit v6+)
	retention time.Duration // explicit retention of every offset (OffsetCommit v2-v4); 0 none
	topics    []commitTopicIn
	what      string // for the log
	// check runs on the loop for a non-empty group ID: the group and
	// member check (as Kafka's validateOffsetCommit), and where accepted
	// offsets go. The target is only used when the error is nil.
	check func() (commitTarget, *kerr.Error)
}

type commitTopicIn struct {
	name       string
	id         [16]byte
	partitions []commitPartitionIn
}

type commitPartitionIn struct {
	partition   int32
	offset      int64
	leaderEpoch int32 // -1 when the request version has none
	metadata    *string
	timestamp   int64 // OffsetCommit v1's commit timestamp (ms): expiry is retention after it; 0 none
}

// acceptedOffset is an offset that passed the checks; cm.logOffset is set
// once its record is appended.
type acceptedOffset struct {
	tp tp
	cm committed
}

// commitTarget is where a commit's accepted offsets go. Its methods run on
// the loop.
type commitTarget interface {
	// batch encodes recs (one per accepted offset, in order) as the
	// commit's batch; it is called once, when the write is queued.
	batch(recs []rec, now time.Time) []byte
	// applied is called with the append's result, offs carrying their log
	// offsets.
	applied(offs []acceptedOffset, err error)
}

// commit runs the shared path and returns each partition's error code, by
// request topic and partition index.
func (c *Coordinator) commit(ctx context.Context, in commitInput) ([][]int16, error) {
	codes := make([][]int16, len(in.topics))
	var accepted [][2]int // (topic, partition) indexes of accepted offsets
	var applied chan error
	err := c.do(ctx, func() {
		now := c.opts.Now()
		var target commitTarget
		groupErr := kerr.InvalidGroupID
		if in.group != "" {
			target, groupErr = in.check()
		}
		var recs []rec
		var offs []acceptedOffset
		for ti, t := range in.topics {
			name, nparts, known, topicErr := c.commitTopic(t.name, t.id, in.byID, groupErr)
			codes[ti] = make([]int16, len(t.partitions))
			for pi, p := range t.partitions {
				perr := commitPartitionErr(topicErr, known, nparts, p.partition, p.metadata)
				codes[ti][pi] = errCode(perr)
				if perr != nil {
					continue
				}
				cm := committed{offset: p.offset, leaderEpoch: p.leaderEpoch, commitTime: now}
				if p.metadata != nil {
					cm.metadata = *p.metadata
				}
				switch {
				case p.timestamp > 0:
					cm.expireTime = time.UnixMilli(p.timestamp).Add(c.opts.OffsetsRetention)
				case in.retention > 0:
					cm.expireTime = now.Add(in.retention)
				}
				recs = append(recs, rec{Key: offsetKey(in.group, name, p.partition), Value: offsetValue(cm)})
				offs = append(offs, acceptedOffset{tp{name, p.partition}, cm})
				accepted = append(accepted, [2]int{ti, pi})
			}
		}
		if len(recs) == 0 {
			return
		}
		applied = make(chan error, 1)
		c.w.Enqueue(ilog.Write{
			Batch:   target.batch(recs, now),
			Records: len(recs),
			Durable: true,
			Done: func(base int64, err error) {
				for i := range offs {
					offs[i].cm.logOffset = base + int64(i)
				}
				target.applied(offs, err)
				applied <- err
			},
		})
	})
	if err != nil || applied == nil {
		return codes, err
	}
	select {
	case werr := <-applied:
		if werr != nil {
			c.logger.Error(in.what+" append failed", "group", in.group, "err", werr)
			for _, a := range accepted {
				codes[a[0]][a[1]] = kerr.NotCoordinator.Code
			}
		}
		return codes, nil
	case <-c.stopping():
		return nil, ErrClosed
	}
}

// validateCommitter checks the member of an OffsetCommit, or of a
// TxnOffsetCommit when txn (as Kafka's validateOffsetCommit with
// isTransactional): a transactional commit without member information is
// accepted, and one is not refused while the group completes a rebalance.
func (g *group) validateCommitter(gen int32, member string, instanceID *string, txn bool) *kerr.Error {
	if txn && gen < 0 && member == "" {
		return nil // no member information (v0-v2, or a producer outside the group)
	}
	if g.kind == kindConsumer {
		if gen < 0 && member == "" && len(g.cg.members) == 0 {
			return nil
		}
		m := g.cg.members[member]
		if m == nil {
			return kerr.UnknownMemberID
		}
		if gen > m.epoch {
			return kerr.StaleMemberEpoch
		}
		// An older epoch is accepted: a member commits what it consumed
		// while revoking (Kafka 4.3 relaxed this check the same way).
		return nil
	}
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable
	}
	if gen < 0 && g.state == stateEmpty {
		return nil
	}
	if instanceID != nil && *instanceID != "" {
		if cur, ok := g.instances[*instanceID]; !ok {
			return kerr.UnknownMemberID
		} else if cur != member {
			return kerr.FencedInstanceID
		}
	}
	if !txn && g.state == stateCompletingRebalance {
		return kerr.RebalanceInProgress
	}
	if g.members[member] == nil {
		return kerr.UnknownMemberID
	}
	if gen != g.generation {
		return kerr.IllegalGeneration
	}
	return nil
}

// commitTopic resolves a topic of an OffsetCommit or TxnOffsetCommit: its
// name (looked up by id when byID), its partition count (known false for
// an unknown topic) and the error of every partition of it (groupErr
// first, then UNKNOWN_TOPIC_ID).
func (c *Coordinator) commitTopic(name string, id [16]byte, byID bool, groupErr *kerr.Error) (string, int32, bool, *kerr.Error) {
	topicErr := groupErr
	if topicErr == nil && byID {
		n, ok := c.opts.Topics.TopicName(id)
		if !ok {
			topicErr = kerr.UnknownTopicID
		}
		name = n
	}
	nparts, known := c.opts.Topics.Partitions(name)
	return name, nparts, known, topicErr
}

// commitPartitionErr is the error of one committed partition: the topic's
// error, else UNKNOWN_TOPIC_OR_PARTITION or OFFSET_METADATA_TOO_LARGE.
func commitPartitionErr(topicErr *kerr.Error, known bool, nparts, partition int32, metadata *string) *kerr.Error {
	switch {
	case topicErr != nil:
		return topicErr
	case !known || partition < 0 || partition >= nparts:
		return kerr.UnknownTopicOrPartition
	case metadata != nil && len(*metadata) > maxMetadataBytes:
		return kerr.OffsetMetadataTooLarge
	}
	return nil
}
