package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/ilog"
	"github.com/weirhq/weir/broker/internal/recbatch"
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
	r := kmsg.NewPtrTxnOffsetCommitResponse()
	r.Version = req.Version
	type ref struct{ t, p int }
	var accepted []ref
	var applied chan error
	err := c.do(ctx, func() {
		now := c.opts.Now()
		groupErr := (*kerr.Error)(nil)
		if req.Group == "" {
			groupErr = kerr.InvalidGroupID
		}
		g := c.groups[req.Group]
		if groupErr == nil && g != nil {
			groupErr = g.validateTxnCommit(req)
		} else if groupErr == nil && req.Version >= 3 && req.Generation >= 0 {
			groupErr = kerr.IllegalGeneration
		}
		var recs []rec
		var vals []committed
		var tps []tp
		for ti, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			name, nparts, known, topicErr := c.commitTopic(t.Topic, t.TopicID, req.Version >= 6, groupErr)
			for pi, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				perr := commitPartitionErr(topicErr, known, nparts, p.Partition, p.Metadata)
				rp.ErrorCode = errCode(perr)
				rt.Partitions = append(rt.Partitions, rp)
				if perr != nil {
					continue
				}
				cm := newCommitted(now, p.Offset, p.LeaderEpoch, req.Version >= 2, p.Metadata)
				recs = append(recs, rec{Key: offsetKey(req.Group, name, p.Partition), Value: offsetValue(cm)})
				vals = append(vals, cm)
				tps = append(tps, tp{name, p.Partition})
				accepted = append(accepted, ref{ti, pi})
			}
			r.Topics = append(r.Topics, rt)
		}
		if len(recs) == 0 {
			return
		}
		pid, epoch := req.ProducerID, req.ProducerEpoch
		tx := c.txns[pid]
		if tx == nil {
			tx = &txnOffsets{epoch: epoch, groups: map[string]map[tp]committed{}}
			c.txns[pid] = tx
		}
		tx.inflight++
		applied = make(chan error, 1)
		c.w.Enqueue(ilog.Write{
			Batch:   recbatch.Encode(recs, now.UnixMilli(), pid, epoch, recbatch.AttrTransactional),
			Records: len(recs),
			Durable: true,
			Done: func(base int64, err error) {
				tx.inflight--
				if err == nil && c.txns[pid] == tx {
					for i, t := range tps {
						v := vals[i]
						v.logOffset = base + int64(i)
						c.stageTxn(pid, epoch, req.Group, t, v)
					}
				}
				c.logger.Debug("transactional offsets staged", "group", req.Group, "producer_id", pid, "partitions", len(tps), "err", err)
				if c.txns[pid] == tx && tx.inflight == 0 && len(tx.groups) == 0 {
					delete(c.txns, pid)
				}
				applied <- err
			},
		})
	})
	if err != nil {
		return nil, err
	}
	werr, err := c.awaitAppend(applied)
	if err != nil {
		return nil, err
	}
	if werr != nil {
		c.logger.Error("transactional offset commit append failed", "group", req.Group, "err", werr)
		for _, a := range accepted {
			r.Topics[a.t].Partitions[a.p].ErrorCode = kerr.NotCoordinator.Code
		}
	}
	return r, nil
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
