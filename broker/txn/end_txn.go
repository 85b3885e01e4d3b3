package txn

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-5
//
// Behavior (Kafka's TransactionCoordinator.endTransaction):
//   - Empty transactional id: INVALID_REQUEST; unknown id or another
//     producer id: INVALID_PRODUCER_ID_MAPPING.
//   - Ongoing: PrepareCommit/PrepareAbort is made durable (the outcome is
//     decided), markers are written, then the Complete state. Until then
//     the next transaction's requests get CONCURRENT_TRANSACTIONS. Kafka
//     answers success at the prepare; weir answers when the transaction
//     completed, or after EndTxnCompletionWait at the latest, so a producer
//     does not meet CONCURRENT_TRANSACTIONS on its next transaction.
//   - v0-4 (transaction version 0/1): the epoch must be the current one
//     (PRODUCER_FENCED otherwise); a retry of a completed commit/abort is
//     answered with success, a retry of the one in progress with
//     CONCURRENT_TRANSACTIONS, the opposite outcome with INVALID_TXN_STATE,
//     and EndTxn with no transaction with INVALID_TXN_STATE.
//   - v5 (transaction version 2, KIP-890): every EndTxn bumps the epoch
//     (the markers carry the new epoch, fencing late writes of the old one)
//     and answers the new producer id/epoch; at epoch MaxInt16-1 a new
//     producer id takes over when the transaction completes. A retry is
//     recognised by the epoch being one behind (or by the overflow); an
//     abort with no transaction open is allowed (and bumps the epoch).
//     Deviation: EndTxn with the new epoch while the previous transaction
//     still completes is CONCURRENT_TRANSACTIONS (Kafka: PRODUCER_FENCED).

func init() { regAPI(kmsg.EndTxn, 0, 5, onLoop((*Coordinator).endTxn)) }

func (c *Coordinator) endTxn(req *kmsg.EndTxnRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	fail := func(code int16) {
		resp.ErrorCode = code
		reply(resp)
	}
	if req.TransactionalID == "" {
		fail(kerr.InvalidRequest.Code)
		return
	}
	m := c.txns[req.TransactionalID]
	if m == nil {
		fail(kerr.InvalidProducerIDMapping.Code)
		return
	}
	if req.Version >= 5 {
		c.endTxnV2(m, req, resp, fail, reply)
		return
	}
	switch {
	case m.producerID != req.ProducerID:
		fail(kerr.InvalidProducerIDMapping.Code)
		return
	case m.epoch != req.ProducerEpoch:
		fail(kerr.ProducerFenced.Code)
		return
	case m.pending != nil:
		fail(kerr.ConcurrentTransactions.Code)
		return
	}
	switch m.state {
	case stateOngoing:
		c.prepareEnd(m, req.Commit, 0, false, noProducerID, func(code int16) { fail(code) })
	case stateCompleteCommit:
		fail(sameOrInvalid(req.Commit, 0))
	case stateCompleteAbort:
		fail(sameOrInvalid(!req.Commit, 0))
	case statePrepareCommit:
		fail(sameOrInvalid(req.Commit, kerr.ConcurrentTransactions.Code))
	case statePrepareAbort:
		fail(sameOrInvalid(!req.Commit, kerr.ConcurrentTransactions.Code))
	default:
		fail(kerr.InvalidTxnState.Code)
	}
}

// sameOrInvalid answers code for a retry of the same outcome, else
// INVALID_TXN_STATE.
func sameOrInvalid(same bool, code int16) int16 {
	if same {
		return code
	}
	return kerr.InvalidTxnState.Code
}

func (c *Coordinator) endTxnV2(m *txnMeta, req *kmsg.EndTxnRequest, resp *kmsg.EndTxnResponse, fail func(int16), reply func(kmsg.Response)) {
	pid, epoch := req.ProducerID, req.ProducerEpoch
	retryOnOverflow := m.prevProducerID == pid && epoch == math.MaxInt16-1 && m.epoch == 0
	retryOnBump := m.epoch == epoch+1
	isRetry := retryOnBump || retryOnOverflow
	var validEpoch bool
	switch m.state {
	case statePrepareCommit, statePrepareAbort:
		validEpoch = retryOnBump
		if epoch == m.epoch && m.producerID == pid {
			// The producer already has the epoch this prepare bumped to
			// and is ending its next transaction before the previous one
			// completed. Kafka answers PRODUCER_FENCED here (fatal to a
			// legitimate producer); weir answers CONCURRENT_TRANSACTIONS
			// so it retries once the markers are written. No other
			// producer can hold this epoch, so nothing is unfenced.
			fail(kerr.ConcurrentTransactions.Code)
			return
		}
	case stateCompleteCommit, stateCompleteAbort:
		validEpoch = isRetry || epoch == m.epoch
	default:
		validEpoch = epoch == m.epoch
	}
	switch {
	case m.pending != nil:
		fail(kerr.ConcurrentTransactions.Code)
		return
	case m.producerID != pid && !retryOnOverflow:
		fail(kerr.InvalidProducerIDMapping.Code)
		return
	case !validEpoch:
		fail(kerr.ProducerFenced.Code)
		return
	}
	current := func() {
		resp.ProducerID, resp.ProducerEpoch = m.producerID, m.epoch
		reply(resp)
	}
	prepare := func(noPartitionAdded bool) {
		start := func(nextPID int64) {
			c.prepareEnd(m, req.Commit, TransactionVersion, noPartitionAdded, nextPID, func(code int16) {
				if code != 0 {
					fail(code)
					return
				}
				if nextPID != noProducerID {
					resp.ProducerID, resp.ProducerEpoch = nextPID, 0
				} else {
					resp.ProducerID, resp.ProducerEpoch = m.producerID, m.epoch
				}
				reply(resp)
			})
		}
		if !epochExhausted(m.epoch) {
			start(noProducerID)
			return
		}
		state := m.state
		c.allocPID(func(id int64, err error) {
			if err != nil {
				fail(codeFor(err))
				return
			}
			if m.pending != nil || m.state != state {
				fail(kerr.ConcurrentTransactions.Code)
				return
			}
			start(id)
		})
	}
	switch m.state {
	case stateOngoing:
		prepare(false)
	case stateCompleteCommit:
		switch {
		case req.Commit && isRetry:
			current()
		case req.Commit || isRetry:
			fail(kerr.InvalidTxnState.Code)
		default:
			prepare(true)
		}
	case stateCompleteAbort:
		switch {
		case !req.Commit && isRetry:
			current()
		case req.Commit:
			fail(kerr.InvalidTxnState.Code)
		default:
			prepare(true)
		}
	case statePrepareCommit:
		fail(sameOrInvalid(req.Commit, kerr.ConcurrentTransactions.Code))
	case statePrepareAbort:
		fail(sameOrInvalid(!req.Commit, kerr.ConcurrentTransactions.Code))
	case stateEmpty:
		if req.Commit {
			fail(kerr.InvalidTxnState.Code)
			return
		}
		prepare(true)
	default:
		fail(kerr.InvalidTxnState.Code)
	}
}

// prepareEnd writes PrepareCommit/PrepareAbort (Kafka's
// prepareAbortOrCommit); with tv 2 the epoch is bumped. done gets 0 once
// the state is durable; the markers start then. Loop only.
func (c *Coordinator) prepareEnd(m *txnMeta, commit bool, tv int16, noPartitionAdded bool, nextPID int64, done func(code int16)) {
	next := m.txnData.clone()
	now := c.nowMs()
	if commit {
		next.state = statePrepareCommit
	} else {
		next.state = statePrepareAbort
	}
	if tv >= 2 {
		next.lastEpoch = m.epoch
		if m.epoch < math.MaxInt16 { // at MaxInt16 nextPID takes over on completion
			next.epoch = m.epoch + 1
		}
		next.tv = tv
	}
	next.nextProducerID = nextPID
	if noPartitionAdded {
		next.startMs = now
		clear(next.parts)
	}
	next.updateMs = now
	c.transition(m, next, func(err error) {
		if err != nil {
			done(codeFor(err))
			return
		}
		if !commit {
			c.met.aborts.WithLabelValues("client").Inc()
		}
		c.beginMarkers(m)
		c.afterComplete(m, c.opts.EndTxnCompletionWait, func() { done(0) })
	})
}
