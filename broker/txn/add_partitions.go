package txn

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddPartitionsToTxn: v0-5; AddOffsetsToTxn: v0-4
//
// Behavior (Kafka's handleAddPartitionsToTransaction):
//   - A partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION, and the
//     others of the same transaction OPERATION_NOT_ATTEMPTED.
//   - Unknown transactional id or another producer id:
//     INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED; a
//     transition in flight or PrepareCommit/PrepareAbort:
//     CONCURRENT_TRANSACTIONS.
//   - Ongoing with every partition already added: success without a write.
//   - Otherwise the partitions are added and the state (Ongoing, start time
//     set when the transaction begins) is made durable before success.
//   - v4+ (brokers, KIP-890): several transactions per request; VerifyOnly
//     checks membership without adding (TRANSACTION_ABORTABLE when a
//     partition is not in the transaction). v5 marks the transaction as
//     transaction version 2.
//   - AddOffsetsToTxn adds (__consumer_offsets, 0) the same way.

func init() {
	regAPI(kmsg.AddPartitionsToTxn, 0, 5, onLoop((*Coordinator).addPartitions))
	regAPI(kmsg.AddOffsetsToTxn, 0, 4, onLoop((*Coordinator).addOffsets))
}

// addToTxn adds parts to id's transaction (Kafka's
// handleAddPartitionsToTransaction after the request-level checks); done
// gets one code for all of them, as Kafka answers a transaction's
// partitions alike. Loop only.
func (c *Coordinator) addToTxn(id string, pid int64, epoch int16, parts []TopicPartition, tv int16, done func(code int16)) {
	if id == "" {
		done(kerr.InvalidRequest.Code)
		return
	}
	m := c.txns[id]
	switch {
	case m == nil:
		done(kerr.InvalidProducerIDMapping.Code)
		return
	case m.state.isPrepare() && pid == m.nextProducerID && pid != noProducerID:
		// TV2 epoch overflow: the producer already uses the id the
		// prepared transaction rotates to on completion.
		done(kerr.ConcurrentTransactions.Code)
		return
	case m.producerID != pid:
		done(kerr.InvalidProducerIDMapping.Code)
		return
	case m.epoch != epoch:
		done(kerr.ProducerFenced.Code)
		return
	case m.pending != nil, m.state.isPrepare():
		done(kerr.ConcurrentTransactions.Code)
		return
	}
	if m.state == stateOngoing && containsAll(m.parts, parts) {
		done(0)
		return
	}
	if m.state != stateOngoing && !m.state.isComplete() {
		done(kerr.InvalidTxnState.Code)
		return
	}
	next := m.txnData.clone()
	now := c.nowMs()
	if m.state.isComplete() {
		clear(next.parts)
		next.startMs = now
	}
	for _, tp := range parts {
		next.parts[tp] = struct{}{}
	}
	next.state = stateOngoing
	next.updateMs = now
	if tv > next.tv || m.state.isComplete() {
		next.tv = tv
	}
	c.transition(m, next, func(err error) {
		if err != nil {
			done(codeFor(err))
			return
		}
		done(0)
	})
}

func containsAll(set map[TopicPartition]struct{}, parts []TopicPartition) bool {
	for _, tp := range parts {
		if _, ok := set[tp]; !ok {
			return false
		}
	}
	return true
}

// verifyInTxn is Kafka's handleVerifyPartitionsInTransaction: per-partition
// codes without any write. Loop only.
func (c *Coordinator) verifyInTxn(id string, pid int64, epoch int16, parts []TopicPartition) []int16 {
	codes := make([]int16, len(parts))
	all := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	m := c.txns[id]
	switch {
	case id == "":
		return all(kerr.InvalidRequest.Code)
	case m == nil:
		return all(kerr.InvalidProducerIDMapping.Code)
	case m.state.isPrepare() && pid == m.nextProducerID && pid != noProducerID:
		return all(kerr.ConcurrentTransactions.Code)
	case m.producerID != pid:
		return all(kerr.InvalidProducerIDMapping.Code)
	case m.epoch != epoch:
		return all(kerr.ProducerFenced.Code)
	case m.state.isPrepare():
		return all(kerr.ConcurrentTransactions.Code)
	}
	for i, tp := range parts {
		if _, ok := m.parts[tp]; !ok || m.state != stateOngoing {
			codes[i] = kerr.TransactionAbortable.Code
		}
	}
	return codes
}

// unknownParts answers UNKNOWN_TOPIC_OR_PARTITION for the partitions that
// do not exist and OPERATION_NOT_ATTEMPTED for the rest; ok is true when
// all exist.
func (c *Coordinator) unknownParts(parts []TopicPartition) ([]int16, bool) {
	codes := make([]int16, len(parts))
	ok := true
	for i, tp := range parts {
		if tp.Topic == OffsetsTopic && c.opts.Offsets != nil {
			continue
		}
		if !c.opts.Partitions.Exists(tp.Topic, tp.Partition) {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			ok = false
		}
	}
	if !ok {
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = kerr.OperationNotAttempted.Code
			}
		}
	}
	return codes, ok
}

func flattenV3(topics []kmsg.AddPartitionsToTxnRequestTopic) []TopicPartition {
	var ps []TopicPartition
	for _, t := range topics {
		for _, p := range t.Partitions {
			ps = append(ps, TopicPartition{t.Topic, p})
		}
	}
	return ps
}

func flattenV4(topics []kmsg.AddPartitionsToTxnRequestTransactionTopic) []TopicPartition {
	var ps []TopicPartition
	for _, t := range topics {
		for _, p := range t.Partitions {
			ps = append(ps, TopicPartition{t.Topic, p})
		}
	}
	return ps
}

func (c *Coordinator) addPartitions(req *kmsg.AddPartitionsToTxnRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version <= 3 {
		parts := flattenV3(req.Topics)
		fill := func(codes []int16) {
			for i, tp := range parts {
				if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewAddPartitionsToTxnResponseTopic()
					t.Topic = tp.Topic
					resp.Topics = append(resp.Topics, t)
				}
				t := &resp.Topics[len(resp.Topics)-1]
				p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				p.Partition = tp.Partition
				p.ErrorCode = codes[i]
				t.Partitions = append(t.Partitions, p)
			}
			reply(resp)
		}
		if codes, ok := c.unknownParts(parts); !ok {
			fill(codes)
			return
		}
		c.addToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, 0, func(code int16) {
			fill(sameCodes(len(parts), code))
		})
		return
	}
	// v4+: one result per transaction, answered when all are done.
	tv := int16(0)
	if req.Version >= 5 {
		tv = 2
	}
	resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions))
	remaining := len(req.Transactions)
	finish := func() {
		remaining--
		if remaining == 0 {
			reply(resp)
		}
	}
	if remaining == 0 {
		reply(resp)
		return
	}
	for i, rt := range req.Transactions {
		parts := flattenV4(rt.Topics)
		rt := rt
		set := func(codes []int16) {
			out := kmsg.NewAddPartitionsToTxnResponseTransaction()
			out.TransactionalID = rt.TransactionalID
			for j, tp := range parts {
				if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
					t.Topic = tp.Topic
					out.Topics = append(out.Topics, t)
				}
				t := &out.Topics[len(out.Topics)-1]
				p := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				p.Partition = tp.Partition
				p.ErrorCode = codes[j]
				t.Partitions = append(t.Partitions, p)
			}
			resp.Transactions[i] = out
			finish()
		}
		if codes, ok := c.unknownParts(parts); !ok {
			set(codes)
			continue
		}
		if rt.VerifyOnly {
			set(c.verifyInTxn(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts))
			continue
		}
		c.addToTxn(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts, tv, func(code int16) {
			set(sameCodes(len(parts), code))
		})
	}
}

func sameCodes(n int, code int16) []int16 {
	codes := make([]int16, n)
	for i := range codes {
		codes[i] = code
	}
	return codes
}

func (c *Coordinator) addOffsets(req *kmsg.AddOffsetsToTxnRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if c.opts.Offsets == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		reply(resp)
		return
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		reply(resp)
		return
	}
	c.addToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch,
		[]TopicPartition{{OffsetsTopic, 0}}, 0, func(code int16) {
			resp.ErrorCode = code
			reply(resp)
		})
}

// Verify checks, for the Produce path, that a transactional batch of
// (txnID, pid, epoch) may be appended to each of parts (KIP-890 part 1).
// codes[i] is the Produce error code for parts[i]:
//
//   - 0: append it;
//   - INVALID_PRODUCER_ID_MAPPING: unknown transactional id or producer id;
//   - INVALID_PRODUCER_EPOCH: the epoch is not current (a zombie; Kafka's
//     verification turns PRODUCER_FENCED into this for Produce);
//   - INVALID_TXN_STATE: the partition is not in the ongoing transaction
//     (and implicitAdd is false);
//   - NOT_ENOUGH_REPLICAS: retriable, the previous transaction is still
//     completing (CONCURRENT_TRANSACTIONS) or the state log failed;
//   - UNKNOWN_TOPIC_OR_PARTITION: the partition does not exist (never
//     added: the broker must pass resolved topic names, also for Produce
//     v13 which names topics by id);
//   - INVALID_REQUEST: empty transactional id.
//
// implicitAdd (Produce v12+ under transaction.version 2) adds missing
// partitions to the transaction durably instead of failing.
//
// release must be called exactly once after the verified appends finished
// (successfully or not); until then the transaction's markers are not
// written, so a verified batch always lands before its marker. It is safe
// to call after Close. err is non-nil only when ctx ended or the
// coordinator closed; then release is a no-op.
func (c *Coordinator) Verify(ctx context.Context, txnID string, pid int64, epoch int16, parts []TopicPartition, implicitAdd bool) (codes []int16, release func(), err error) {
	exist := func(codes []int16) {
		for i, tp := range parts {
			if codes[i] == 0 || codes[i] == kerr.TransactionAbortable.Code {
				if !c.opts.Partitions.Exists(tp.Topic, tp.Partition) {
					codes[i] = kerr.UnknownTopicOrPartition.Code
				}
			}
		}
	}
	return c.verifyHold(ctx, txnID, pid, epoch, parts, implicitAdd, exist, produceCode)
}

// verifyHold is the check a write inside a transaction makes first, shared
// by a produce's batches (Verify) and a TxnOffsetCommit's offsets: on the
// loop, verifyInTxn gives each partition's code (TRANSACTION_ABORTABLE:
// not in the transaction), adjust (if not nil) amends them, the partitions
// not in the transaction are added durably when addMissing (transaction
// version 2), and convert maps each code to what the caller answers. If
// any code is then 0 the transaction's markers are held until release is
// called (exactly once, safe after Close), so the write lands before the
// marker that ends it. Once the loop took the check it waits for the
// result whatever ctx does (a hold must not be lost); err is non-nil only
// when ctx ended before that or the coordinator closed, and then release
// is a no-op.
func (c *Coordinator) verifyHold(ctx context.Context, txnID string, pid int64, epoch int16, parts []TopicPartition,
	addMissing bool, adjust func(codes []int16), convert func(int16) int16) (codes []int16, release func(), err error) {
	type result struct {
		codes []int16
		held  *txnMeta
	}
	ch := make(chan result, 1)
	ev := func() {
		codes := c.verifyInTxn(txnID, pid, epoch, parts)
		if adjust != nil {
			adjust(codes)
		}
		var missing []TopicPartition
		for i, code := range codes {
			if code == kerr.TransactionAbortable.Code && addMissing {
				missing = append(missing, parts[i])
			}
		}
		finish := func(codes []int16) {
			m := c.txns[txnID]
			var held *txnMeta
			for i, code := range codes {
				codes[i] = convert(code)
				if codes[i] == 0 && held == nil && m != nil {
					held = m
				}
			}
			if held != nil {
				held.holds++
			}
			ch <- result{codes, held}
		}
		if len(missing) == 0 {
			finish(codes)
			return
		}
		c.addToTxn(txnID, pid, epoch, missing, TransactionVersion, func(code int16) {
			for i, cd := range codes {
				if cd == kerr.TransactionAbortable.Code {
					codes[i] = code
				}
			}
			finish(codes)
		})
	}
	noop := func() {}
	if err := c.do(ctx, ev); err != nil {
		return nil, noop, err
	}
	var r result
	select {
	case r = <-ch:
	case <-c.stopping():
		return nil, noop, ErrClosed
	}
	if r.held == nil {
		return r.codes, noop, nil
	}
	m := r.held
	var once sync.Once
	return r.codes, func() {
		once.Do(func() { c.post(func() { c.releaseHold(m) }) })
	}, nil
}

func (c *Coordinator) releaseHold(m *txnMeta) {
	m.holds--
	if m.holds == 0 && m.markers != nil {
		c.driveMarkers(m)
	}
}

// produceCode converts a coordinator code to what Produce answers, as
// Kafka's AddPartitionsToTxnManager does.
func produceCode(code int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.TransactionAbortable.Code:
		return kerr.InvalidTxnState.Code
	case kerr.ConcurrentTransactions.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code:
		return kerr.NotEnoughReplicas.Code
	}
	return code
}
