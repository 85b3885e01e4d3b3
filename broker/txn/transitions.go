package txn

import (
	"math"
	"time"

	"github.com/weirhq/weir/broker/internal/ilog"
)

func (c *Coordinator) nowMs() int64 { return c.opts.Now().UnixMilli() }

func (c *Coordinator) countState(s txnState, d int) {
	c.stateCounts[s] += d
	c.met.states.WithLabelValues(s.String()).Set(float64(c.stateCounts[s]))
}

// transition appends next as m's new state. Once the append is durable,
// m.txnData becomes next and done(nil) runs; on failure m is unchanged and
// done gets the error. Loop only; m.pending must be nil.
func (c *Coordinator) transition(m *txnMeta, next txnData, done func(err error)) {
	m.pending = &next
	batch := buildBatch([]kv{{Key: txnKey(m.id), Value: txnValue(&next)}}, c.nowMs())
	c.w.Enqueue(ilog.Write{Batch: batch, Durable: true, Done: func(_ int64, err error) {
		m.pending = nil
		if err == nil {
			c.countState(m.state, -1)
			m.txnData = next
			c.countState(next.state, 1)
		}
		done(err)
	}})
}

// allocPID hands out the next producer id, reserving a new block durably
// first when the current one is used up. cb runs on the loop.
func (c *Coordinator) allocPID(cb func(int64, error)) {
	if c.pidNext < c.pidEnd {
		id := c.pidNext
		c.pidNext++
		c.met.pids.Inc()
		cb(id, nil)
		return
	}
	c.pidWaiters = append(c.pidWaiters, cb)
	if c.pidWriting {
		return
	}
	if c.pidEnd > math.MaxInt64-c.opts.ProducerIDBlockSize {
		ws := c.pidWaiters
		c.pidWaiters = nil
		for _, w := range ws {
			w(-1, errPIDsExhausted)
		}
		return
	}
	c.pidWriting = true
	end := c.pidEnd + c.opts.ProducerIDBlockSize
	batch := buildBatch([]kv{{Key: pidBlockKey(), Value: pidBlockValue(end)}}, c.nowMs())
	c.w.Enqueue(ilog.Write{Batch: batch, Durable: true, Done: func(_ int64, err error) {
		c.pidWriting = false
		ws := c.pidWaiters
		c.pidWaiters = nil
		if err != nil {
			for _, w := range ws {
				w(-1, err)
			}
			return
		}
		c.pidNext = c.pidEnd
		c.pidEnd = end
		c.logger.Debug("reserved producer id block", "start", c.pidNext, "end", end)
		for _, w := range ws {
			c.allocPID(w)
		}
	}})
}

type pidError string

func (e pidError) Error() string { return string(e) }

const errPIDsExhausted = pidError("txn: producer ids exhausted")

// fenceAbort aborts m's Ongoing transaction on the coordinator's own
// initiative (timeout, or a new producer's InitProducerId): the epoch is
// bumped so the old producer is fenced, and the markers carry the bumped
// epoch. lastEpoch is what a KIP-360 InitProducerId retry may present to
// claim the bumped epoch: the old epoch after a timeout (KIP-588), -1 when
// another producer fenced it. Loop only; m must be Ongoing, not pending.
func (c *Coordinator) fenceAbort(m *txnMeta, lastEpoch int16, reason string, done func(err error)) {
	next := m.txnData.clone()
	if next.epoch < math.MaxInt16 {
		next.epoch++
	}
	next.lastEpoch = lastEpoch
	next.state = statePrepareAbort
	next.updateMs = c.nowMs()
	c.logger.Info("aborting transaction", "transactional_id", m.id, "reason", reason,
		"producer_id", m.producerID, "epoch", m.epoch, "new_epoch", next.epoch)
	c.transition(m, next, func(err error) {
		if err == nil {
			c.met.aborts.WithLabelValues(reason).Inc()
			c.beginMarkers(m)
		}
		done(err)
	})
}

// abortTimedOut aborts every Ongoing transaction whose timeout passed
// (Kafka's abortTimedOutTransactions).
func (c *Coordinator) abortTimedOut(now time.Time) {
	nowMs := now.UnixMilli()
	for _, m := range c.txns {
		if m.state != stateOngoing || m.pending != nil || m.startMs < 0 {
			continue
		}
		if m.startMs+int64(m.timeoutMs) > nowMs {
			continue
		}
		c.met.timeouts.Inc()
		c.fenceAbort(m, m.epoch, "timeout", func(err error) {
			if err != nil {
				c.logger.Warn("timeout abort not written; retrying at the next scan", "transactional_id", m.id, "err", err)
			}
		})
	}
}

// expireIDs removes transactional ids idle longer than
// TransactionalIDExpiration (Kafka's transactional.id.expiration.ms):
// a tombstone is written, then the id is forgotten.
func (c *Coordinator) expireIDs(now time.Time) {
	nowMs := now.UnixMilli()
	exp := c.opts.TransactionalIDExpiration.Milliseconds()
	for id, m := range c.txns {
		if !m.state.isComplete() || m.pending != nil || m.markers != nil || m.holds > 0 {
			continue
		}
		if m.updateMs+exp > nowMs {
			continue
		}
		dead := m.txnData.clone()
		dead.state = stateDead
		m.pending = &dead
		batch := buildBatch([]kv{{Key: txnKey(id), Value: nil}}, nowMs)
		c.w.Enqueue(ilog.Write{Batch: batch, Durable: true, Done: func(_ int64, err error) {
			m.pending = nil
			if err != nil {
				return
			}
			if c.txns[id] == m {
				c.countState(m.state, -1)
				delete(c.txns, id)
				c.met.expired.Inc()
				c.logger.Info("transactional id expired", "transactional_id", id)
			}
		}})
	}
}
