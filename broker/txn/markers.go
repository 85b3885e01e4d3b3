package txn

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// markerJob writes the markers of one PrepareCommit/PrepareAbort
// transaction. Loop-owned; attempts run on their own goroutines and report
// back through the loop.
//
// Invariant: the job starts writing only when the transaction has no
// holds (verified appends in flight), and the Complete state is written
// only after every partition acknowledged its marker durably (or is gone).
type markerJob struct {
	pid    int64
	epoch  int16
	commit bool

	pending  map[TopicPartition]struct{}  // partitions still without a marker
	inFlight map[TopicPartition]struct{}  // attempts running
	retryAt  map[TopicPartition]time.Time // failed attempts wait until then

	completing    bool      // the Complete state is being written
	completeRetry time.Time // non-zero: the Complete write failed; retry then

	// waiters run once the Complete state is durable (EndTxn replies).
	waiters []func()
}

// nextRetry is the earliest time a retry is due (zero if none).
func (j *markerJob) nextRetry() time.Time {
	var at time.Time
	for _, t := range j.retryAt {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	if !j.completeRetry.IsZero() && (at.IsZero() || j.completeRetry.Before(at)) {
		at = j.completeRetry
	}
	return at
}

// beginMarkers starts the marker job of m, which is durably in
// PrepareCommit or PrepareAbort. Loop only.
func (c *Coordinator) beginMarkers(m *txnMeta) {
	j := &markerJob{
		pid:      m.producerID,
		epoch:    m.epoch,
		commit:   m.state == statePrepareCommit,
		pending:  make(map[TopicPartition]struct{}, len(m.parts)),
		inFlight: make(map[TopicPartition]struct{}),
		retryAt:  make(map[TopicPartition]time.Time),
	}
	for tp := range m.parts {
		j.pending[tp] = struct{}{}
	}
	m.markers = j
	c.markerTxns[m.id] = m
	c.driveMarkers(m)
}

// driveMarkers launches the attempts that may run now, or writes the
// Complete state when no partition is left. Loop only.
func (c *Coordinator) driveMarkers(m *txnMeta) {
	j := m.markers
	if j == nil || m.holds > 0 {
		return
	}
	now := c.opts.Now()
	if len(j.pending) == 0 {
		if !j.completing && (j.completeRetry.IsZero() || !now.Before(j.completeRetry)) {
			c.completeTxn(m)
		}
		return
	}
	for tp := range j.pending {
		if _, ok := j.inFlight[tp]; ok {
			continue
		}
		if at, ok := j.retryAt[tp]; ok && now.Before(at) {
			continue
		}
		delete(j.retryAt, tp)
		j.inFlight[tp] = struct{}{}
		c.launchMarker(m.id, j, tp)
	}
}

// launchMarker writes one marker on its own goroutine.
func (c *Coordinator) launchMarker(id string, j *markerJob, tp TopicPartition) {
	c.markerWG.Add(1)
	go func() {
		defer c.markerWG.Done()
		ctx := c.markerCtx
		select {
		case c.markerSem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		var err error
		if tp.Topic == OffsetsTopic && c.opts.Offsets != nil {
			err = c.opts.Offsets.WriteMarker(ctx, j.pid, j.epoch, j.commit, CoordinatorEpoch)
		} else if !c.opts.Partitions.Exists(tp.Topic, tp.Partition) {
			err = kerr.UnknownTopicOrPartition
		} else {
			err = c.opts.Partitions.WriteMarker(ctx, tp.Topic, tp.Partition, j.pid, j.epoch, j.commit, CoordinatorEpoch)
		}
		<-c.markerSem
		c.post(func() { c.markerDone(id, j, tp, err) })
	}()
}

// markerDone records one attempt's result. Loop only.
func (c *Coordinator) markerDone(id string, j *markerJob, tp TopicPartition, err error) {
	m := c.txns[id]
	if m == nil || m.markers != j {
		return // stale: the job was replaced (cannot happen while pending) or the id is gone
	}
	delete(j.inFlight, tp)
	switch {
	case err == nil:
		c.met.markers.Inc()
		delete(j.pending, tp)
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		c.logger.Warn("transaction marker skipped: partition no longer exists", "transactional_id", id,
			"topic", tp.Topic, "partition", tp.Partition)
		delete(j.pending, tp)
	default:
		c.met.markerErrors.Inc()
		c.logger.Warn("transaction marker write failed; will retry", "transactional_id", id,
			"topic", tp.Topic, "partition", tp.Partition, "err", err)
		j.retryAt[tp] = c.opts.Now().Add(c.opts.MarkerRetryBackoff)
		return
	}
	c.driveMarkers(m)
}

// completeTxn writes CompleteCommit/CompleteAbort once every marker is
// written. With a TV2 epoch overflow the next producer id takes over here.
// Loop only.
func (c *Coordinator) completeTxn(m *txnMeta) {
	j := m.markers
	if m.pending != nil {
		// Cannot happen (no other transition runs in Prepare*); retry later.
		j.completeRetry = c.opts.Now().Add(c.opts.MarkerRetryBackoff)
		return
	}
	next := m.txnData.clone()
	if j.commit {
		next.state = stateCompleteCommit
	} else {
		next.state = stateCompleteAbort
	}
	clear(next.parts)
	next.updateMs = c.nowMs()
	if next.nextProducerID != noProducerID {
		next.prevProducerID = next.producerID
		next.producerID = next.nextProducerID
		next.nextProducerID = noProducerID
		next.epoch = 0
		next.lastEpoch = noProducerEpoch
	}
	j.completing = true
	j.completeRetry = time.Time{}
	c.transition(m, next, func(err error) {
		j.completing = false
		if err != nil {
			j.completeRetry = c.opts.Now().Add(c.opts.MarkerRetryBackoff)
			return
		}
		m.markers = nil
		delete(c.markerTxns, m.id)
		if j.commit {
			c.met.commits.Inc()
		}
		ws := j.waiters
		j.waiters = nil
		for _, w := range ws {
			w()
		}
	})
}

// afterComplete runs reply once m's current marker job completed, or after
// wait (real time) at the latest, whichever is first. Loop only.
func (c *Coordinator) afterComplete(m *txnMeta, wait time.Duration, reply func()) {
	j := m.markers
	if j == nil || wait < 0 {
		reply()
		return
	}
	fired := false
	fire := func() {
		if !fired {
			fired = true
			reply()
		}
	}
	j.waiters = append(j.waiters, fire)
	t := time.AfterFunc(wait, func() { c.post(fire) })
	j.waiters = append(j.waiters, func() { t.Stop() })
}
