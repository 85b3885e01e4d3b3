package txn

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-5
//
// Behavior (Kafka's TransactionCoordinator.handleInitProducerId):
//   - No transactional id (idempotent producer): a fresh producer id, epoch
//     0, always (also for a KIP-360 re-init with ProducerID/Epoch).
//   - Empty transactional id: INVALID_REQUEST. Timeout <= 0 or above
//     TransactionMaxTimeout: INVALID_TRANSACTION_TIMEOUT.
//   - New transactional id: a fresh producer id, epoch 0, state Empty.
//   - Existing id, no transaction open: the epoch is bumped (fencing
//     every older producer); at epoch MaxInt16-1 a new producer id is
//     rotated in with epoch 0.
//   - Existing id with an Ongoing transaction: it is aborted with a bumped
//     epoch and CONCURRENT_TRANSACTIONS is answered; the retry bumps again.
//   - PrepareCommit/PrepareAbort or a transition in flight:
//     CONCURRENT_TRANSACTIONS.
//   - v3+ with ProducerID/ProducerEpoch (KIP-360): accepted if the id is
//     current (or the previous one and its epoch exhausted, a retry of a
//     rotation); the epoch must be current (bump) or the last one (a retry,
//     or the epoch before a timeout abort, KIP-588: answered without a
//     second bump); anything else is PRODUCER_FENCED.

type pidEpoch struct {
	id    int64
	epoch int16
}

func init() { regAPI(kmsg.InitProducerID, 0, 5, onLoop((*Coordinator).initProducerID)) }

func (c *Coordinator) initProducerID(req *kmsg.InitProducerIDRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	fail := func(code int16) {
		resp.ErrorCode = code
		reply(resp)
	}
	if req.TransactionalID == nil {
		c.allocPID(func(id int64, err error) {
			if err != nil {
				fail(codeFor(err))
				return
			}
			resp.ProducerID, resp.ProducerEpoch = id, 0
			reply(resp)
		})
		return
	}
	id := *req.TransactionalID
	if id == "" {
		fail(kerr.InvalidRequest.Code)
		return
	}
	timeout := req.TransactionTimeoutMillis
	if timeout <= 0 || int64(timeout) > c.opts.TransactionMaxTimeout.Milliseconds() {
		fail(kerr.InvalidTransactionTimeout.Code)
		return
	}
	var expected *pidEpoch
	if req.Version >= 3 && req.ProducerID != noProducerID && req.ProducerEpoch != noProducerEpoch {
		expected = &pidEpoch{req.ProducerID, req.ProducerEpoch}
	}
	if m := c.txns[id]; m != nil {
		c.initExisting(m, timeout, expected, fail, reply, resp)
		return
	}
	c.allocPID(func(pid int64, err error) {
		if err != nil {
			fail(codeFor(err))
			return
		}
		m := c.txns[id]
		if m == nil { // not created meanwhile by a concurrent init
			m = &txnMeta{id: id, txnData: txnData{
				producerID: pid, prevProducerID: noProducerID, nextProducerID: noProducerID,
				epoch: noProducerEpoch, lastEpoch: noProducerEpoch, timeoutMs: timeout,
				state: stateEmpty, parts: map[TopicPartition]struct{}{}, startMs: -1, updateMs: c.nowMs(),
			}}
			c.txns[id] = m
			c.countState(stateEmpty, 1)
		}
		c.initExisting(m, timeout, expected, fail, reply, resp)
	})
}

// validPID is Kafka's isValidProducerId for a KIP-360 re-init.
func validPID(m *txnMeta, exp pidEpoch) bool {
	return m.epoch == noProducerEpoch || exp.id == m.producerID ||
		(exp.id == m.prevProducerID && epochExhausted(exp.epoch))
}

func (c *Coordinator) initExisting(m *txnMeta, timeout int32, expected *pidEpoch, fail func(int16), reply func(kmsg.Response), resp *kmsg.InitProducerIDResponse) {
	if m.pending != nil {
		fail(kerr.ConcurrentTransactions.Code)
		return
	}
	if expected != nil && !validPID(m, *expected) {
		fail(kerr.ProducerFenced.Code)
		return
	}
	switch m.state {
	case statePrepareCommit, statePrepareAbort:
		fail(kerr.ConcurrentTransactions.Code)
	case stateOngoing:
		// Abort first; this epoch is never returned. The client retries
		// and gets a second bump.
		c.fenceAbort(m, noProducerEpoch, "fenced", func(err error) {
			if err != nil {
				fail(codeFor(err))
				return
			}
			fail(kerr.ConcurrentTransactions.Code)
		})
	case stateEmpty, stateCompleteCommit, stateCompleteAbort:
		finish := func(next txnData) {
			c.transition(m, next, func(err error) {
				if err != nil {
					fail(codeFor(err))
					return
				}
				resp.ProducerID, resp.ProducerEpoch = m.producerID, m.epoch
				reply(resp)
			})
		}
		if epochExhausted(m.epoch) && (expected == nil || expected.epoch == m.epoch) {
			c.allocPID(func(pid int64, err error) {
				if err != nil {
					fail(codeFor(err))
					return
				}
				if m.pending != nil || !m.state.isComplete() {
					fail(kerr.ConcurrentTransactions.Code)
					return
				}
				next := m.txnData.clone()
				next.prevProducerID = m.producerID
				next.producerID = pid
				next.epoch = 0
				next.lastEpoch = noProducerEpoch
				if expected != nil {
					next.lastEpoch = m.epoch
				}
				c.resetForEmpty(&next, timeout)
				finish(next)
			})
			return
		}
		next, code := c.incrementEpoch(m, timeout, expected)
		if code != 0 {
			fail(code)
			return
		}
		finish(next)
	default: // Dead and PrepareEpochFence are never current states here
		fail(kerr.InvalidTxnState.Code)
	}
}

func (c *Coordinator) resetForEmpty(next *txnData, timeout int32) {
	next.state = stateEmpty
	next.timeoutMs = timeout
	clear(next.parts)
	next.startMs = -1
	next.updateMs = c.nowMs()
}

// incrementEpoch is Kafka's prepareIncrementProducerEpoch.
func (c *Coordinator) incrementEpoch(m *txnMeta, timeout int32, expected *pidEpoch) (txnData, int16) {
	next := m.txnData.clone()
	if m.epoch >= math.MaxInt16-1 {
		return next, kerr.ProducerFenced.Code
	}
	bumped := m.epoch + 1
	switch {
	case expected == nil:
		next.epoch, next.lastEpoch = bumped, noProducerEpoch
	case m.epoch == noProducerEpoch || expected.epoch == m.epoch:
		next.epoch, next.lastEpoch = bumped, m.epoch
	case expected.epoch == m.lastEpoch:
		// A retry of a bump whose response was lost, or the producer
		// claiming the epoch a timeout abort gave it (KIP-588).
		next.epoch, next.lastEpoch = m.epoch, m.lastEpoch
	default:
		return next, kerr.ProducerFenced.Code
	}
	c.resetForEmpty(&next, timeout)
	return next, 0
}
