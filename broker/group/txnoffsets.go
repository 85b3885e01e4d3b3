package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/ilog"
	"github.com/weirhq/weir/broker/internal/recbatch"
	wlog "github.com/weirhq/weir/broker/log"
)

// Transactional offset commits (KIP-98/KIP-447), the group coordinator's
// side of exactly-once: the transaction coordinator (broker/txn) calls
// TxnOffsetCommit after checking the transaction, and WriteMarker when the
// transaction ends. Together they implement txn.OffsetCommitter.
//
// Behavior:
//   - TxnOffsetCommit validates the group like OffsetCommit (except that a
//     commit during CompletingRebalance is allowed, and v0-v2 requests,
//     which carry no member, are not checked against the group), appends
//     the offsets in a transactional batch of the producer, durably, and
//     stages them: OffsetFetch does not return them, and with RequireStable
//     answers UNSTABLE_OFFSET_COMMIT for those partitions.
//   - WriteMarker(commit) appends a COMMIT control batch and makes the
//     staged offsets committed, unless a partition has a commit written
//     after the staged one; WriteMarker(abort) appends ABORT and drops
//     them. A marker for a producer with nothing staged succeeds without
//     writing (idempotent).

// txnOffsets are the offsets staged by one producer ID. Loop only.
type txnOffsets struct {
	epoch    int16
	inflight int // staging writes queued, not yet applied
	groups   map[string]map[tp]committed
}

func (c *Coordinator) stageTxn(pid int64, epoch int16, group string, t tp, cm committed) {
	tx := c.txns[pid]
	if tx == nil {
		tx = &txnOffsets{groups: map[string]map[tp]committed{}}
		c.txns[pid] = tx
	}
	tx.epoch = epoch
	if tx.groups[group] == nil {
		tx.groups[group] = map[tp]committed{}
	}
	tx.groups[group][t] = cm
}

// completeTxn commits or aborts what pid staged.
func (c *Coordinator) completeTxn(pid int64, commit bool) {
	tx := c.txns[pid]
	if tx == nil {
		return
	}
	delete(c.txns, pid)
	if !commit {
		return
	}
	for gid, offs := range tx.groups {
		g := c.groups[gid]
		if g == nil {
			g = c.newGroup(gid, kindClassic)
		}
		for t, cm := range offs {
			if cur, ok := g.offsets[t]; ok && cur.logOffset > cm.logOffset {
				continue // a later non-transactional commit wins
			}
			g.offsets[t] = cm
		}
	}
}

// txnPending reports whether an open transaction staged an offset for
// (group, t).
func (c *Coordinator) txnPending(group string, t tp) bool {
	for _, tx := range c.txns {
		if _, ok := tx.groups[group][t]; ok {
			return true
		}
	}
	return false
}

// validateTxnCommit is OffsetCommit's validation for TxnOffsetCommit.
func (g *group) validateTxnCommit(req *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	gen, member := int32(-1), ""
	if req.Version >= 3 {
		gen, member = req.Generation, req.MemberID
	}
	return g.validateCommitter(gen, member, req.InstanceID, true)
}

// TxnOffsetCommit stages the request's offsets for (ProducerID,
// ProducerEpoch); see the behavior above. The response has the request's
// version.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	in := commitInput{
		group: req.Group,
		byID:  req.Version >= 6,
		what:  "transactional offset commit",
		check: func() (commitTarget, *kerr.Error) {
			if g := c.groups[req.Group]; g != nil {
				if err := g.validateTxnCommit(req); err != nil {
					return nil, err
				}
			} else if req.Version >= 3 && req.Generation >= 0 {
				return nil, kerr.IllegalGeneration
			}
			return &txnCommit{c: c, pid: req.ProducerID, epoch: req.ProducerEpoch, group: req.Group}, nil
		},
	}
	for _, t := range req.Topics {
		ct := commitTopicIn{name: t.Topic, id: t.TopicID}
		for _, p := range t.Partitions {
			cp := commitPartitionIn{partition: p.Partition, offset: p.Offset, leaderEpoch: -1, metadata: p.Metadata}
			if req.Version >= 2 {
				cp.leaderEpoch = p.LeaderEpoch
			}
			ct.partitions = append(ct.partitions, cp)
		}
		in.topics = append(in.topics, ct)
	}
	codes, err := c.commit(ctx, in)
	if err != nil {
		return nil, err
	}
	r := kmsg.NewPtrTxnOffsetCommitResponse()
	r.Version = req.Version
	for ti, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for pi, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[ti][pi]
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, nil
}

// txnCommit stages a TxnOffsetCommit's offsets for its producer. Loop only.
type txnCommit struct {
	c     *Coordinator
	pid   int64
	epoch int16
	group string
	tx    *txnOffsets
}

// batch writes the offsets in a transactional batch of the producer, so
// the producer's COMMIT or ABORT marker in this partition decides them on
// replay.
func (tc *txnCommit) batch(recs []rec, now time.Time) []byte {
	c := tc.c
	tc.tx = c.txns[tc.pid]
	if tc.tx == nil {
		tc.tx = &txnOffsets{epoch: tc.epoch, groups: map[string]map[tp]committed{}}
		c.txns[tc.pid] = tc.tx
	}
	tc.tx.inflight++
	return recbatch.Encode(recs, now.UnixMilli(), tc.pid, tc.epoch, wlog.AttrTransactional)
}

// applied stages the offsets, unless the transaction ended while the write
// was in flight.
func (tc *txnCommit) applied(offs []acceptedOffset, err error) {
	c, tx, pid := tc.c, tc.tx, tc.pid
	tx.inflight--
	if err == nil && c.txns[pid] == tx {
		for _, o := range offs {
			c.stageTxn(pid, tc.epoch, tc.group, o.tp, o.cm)
		}
	}
	c.logger.Debug("transactional offsets staged", "group", tc.group, "producer_id", pid, "partitions", len(offs), "err", err)
	if c.txns[pid] == tx && tx.inflight == 0 && len(tx.groups) == 0 {
		delete(c.txns, pid)
	}
}

// WriteMarker ends pid's transaction in the offsets partition: a COMMIT or
// ABORT control batch is appended durably, then the staged offsets are
// committed or dropped. Nothing staged: nothing written, nil.
func (c *Coordinator) WriteMarker(ctx context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	var applied chan error
	err := c.do(ctx, func() {
		if c.txns[pid] == nil {
			return
		}
		applied = make(chan error, 1)
		c.w.Enqueue(ilog.Write{
			Batch:   recbatch.Marker(pid, epoch, commit, coordinatorEpoch, c.opts.Now().UnixMilli()),
			Records: 1,
			Durable: true,
			Done: func(_ int64, err error) {
				c.logger.Debug("transaction marker written", "producer_id", pid, "commit", commit, "err", err)
				if err == nil {
					c.completeTxn(pid, commit)
				}
				applied <- err
			},
		})
	})
	if err != nil || applied == nil {
		return err
	}
	select {
	case err := <-applied:
		return err
	case <-c.stopping():
		return ErrClosed
	}
}
