package share

import (
	"context"
	"errors"
	"math"
	"reflect"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareFetch: v1-2 (v0 was Kafka 4.0's early access, removed in 4.1)
//
// Behavior:
// * Share sessions (KIP-932): one per (group, member), ending with the
//   connection that opened it (its records are released at once). Epoch 0 opens a
//   session, closing the member's previous one (its acquired records are
//   released); acknowledgements in an epoch-0 request are INVALID_REQUEST.
//   -1 applies the acknowledgements, then closes the session and releases
//   what the member still holds; nothing is fetched. Any other epoch must
//   be the session's next (INVALID_SHARE_SESSION_EPOCH; no session:
//   SHARE_SESSION_NOT_FOUND) and moves it on (MaxInt32 wraps to 1). The
//   partitions a request names join its session until forgotten; a fetch
//   acquires from every partition of the session.
// * Acknowledgements are applied first, per partition all or nothing:
//   a record the member does not hold is INVALID_RECORD_STATE in the
//   partition's AcknowledgeErrorCode. Accept and reject settle a record;
//   release makes it available again, or archives it once its delivery
//   count reached share.delivery.count.limit; gap archives an offset with
//   no record; renew (v2, IsRenewAck) extends the lock, and such a request
//   fetches nothing.
// * Acquisition: released records of the in-flight window first, then new
//   ones up to the high watermark, at most MaxRecords (whole batches in
//   batch-optimised mode, exactly in record-limit mode, v2
//   ShareAcquireMode=1) and about MaxBytes; at most
//   group.share.partition.max.record.locks records in flight per
//   partition. Records are locked for share.record.lock.duration.ms
//   (AcquisitionLockTimeoutMillis). Whole batches are returned, with the
//   acquired offset ranges and their delivery counts.
// * share.isolation.level=read_committed: nothing at or past the last
//   stable offset is acquired, and aborted transactions' records are
//   archived, never delivered (read_uncommitted, the default, delivers
//   them; transaction markers are never delivered).
// * With nothing to acquire the request waits up to MaxWaitMillis for new
//   records or released ones.
// * State changes (acquisitions' delivery counts, acknowledgements) are
//   durable before the response; a failed write is KAFKA_STORAGE_ERROR.
// * Internal topics: UNKNOWN_TOPIC_OR_PARTITION (never delivered).
//
// Version notes:
// * v2: ShareAcquireMode, IsRenewAck (KIP-1206, KIP-1222)

// ShareAcknowledge: v1-2
//
// Behavior:
// * The session rules of ShareFetch; epoch 0 is INVALID_SHARE_SESSION_EPOCH
//   (there is nothing to acknowledge in a new session), -1 closes the
//   session after the acknowledgements.
// * Acknowledgements as in ShareFetch, durable before the response.

func init() {
	regAPI(kmsg.ShareFetch, 1, 2, (*Coordinator).handleShareFetch)
	regAPI(kmsg.ShareAcknowledge, 1, 2, (*Coordinator).handleShareAcknowledge)
}

type sessKey struct{ group, member string }

type tidp struct {
	id   [16]byte
	part int32
}

// session is a share session. Guarded by Coordinator.mu.
type session struct {
	next  int32 // epoch of the next request
	parts []tidp
	in    map[tidp]bool // the members of parts
	rot   int           // where the next fetch starts in parts (fairness)
	stop  func() bool   // stops the watch of the opening connection; nil if none
}

func (s *session) add(tp tidp) {
	if s.in[tp] {
		return
	}
	if s.in == nil {
		s.in = map[tidp]bool{}
	}
	s.in[tp] = true
	s.parts = append(s.parts, tp)
}

func (s *session) forget(tp tidp) {
	if !s.in[tp] {
		return
	}
	delete(s.in, tp)
	for i, p := range s.parts {
		if p == tp {
			s.parts = append(s.parts[:i], s.parts[i+1:]...)
			return
		}
	}
}

// closeSession drops the member's session and releases every record it
// holds in the group. Lock must be held.
func (c *Coordinator) closeSession(k sessKey) {
	if s := c.sessions[k]; s != nil && s.stop != nil {
		s.stop()
	}
	delete(c.sessions, k)
	limit := c.settings(k.group).limit
	dirty := map[*sharePartition]bool{}
	for pk, p := range c.parts {
		if pk.group != k.group {
			continue
		}
		if n := p.releaseMember(k.member, limit); n > 0 {
			dirty[p] = true
			c.met.released.Add(float64(n))
		}
	}
	if len(dirty) > 0 {
		c.wake()
		c.persist(snapshots(dirty))
	}
}

// sessionFor applies the session rules to a request's epoch and returns
// the session (nil for a closing request whose session is gone), or a
// top-level error. Lock must be held.
func (c *Coordinator) sessionFor(ctx context.Context, k sessKey, epoch int32, fetch bool) (*session, *kerr.Error) {
	s := c.sessions[k]
	switch epoch {
	case 0:
		if !fetch {
			return nil, kerr.InvalidShareSessionEpoch
		}
		if s != nil {
			c.closeSession(k)
		}
		if len(c.sessions) >= c.opts.MaxShareSessions {
			return nil, kerr.ShareSessionLimitReached
		}
		s = &session{next: 1}
		c.sessions[k] = s
		if conn, ok := ctx.Value(connKey{}).(context.Context); ok {
			// The session ends with the connection that opened it (as
			// in Kafka): its records are released at once rather than
			// when their locks expire.
			s.stop = context.AfterFunc(conn, func() { c.connectionClosed(k, s) })
		}
		return s, nil
	case -1:
		if s == nil {
			return nil, kerr.ShareSessionNotFound
		}
		return s, nil
	}
	if s == nil {
		return nil, kerr.ShareSessionNotFound
	}
	if epoch != s.next {
		return nil, kerr.InvalidShareSessionEpoch
	}
	if s.next == math.MaxInt32 {
		s.next = 1
	} else {
		s.next++
	}
	return s, nil
}

// connectionClosed closes session s of k if it is still k's session.
func (c *Coordinator) connectionClosed(k sessKey, s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.sessions[k] != s {
		return
	}
	c.met.connClosed.Inc()
	c.closeSession(k)
}

// partResult is one partition's answer.
type partResult struct {
	tp       tidp
	err      *kerr.Error
	errMsg   string
	ackErr   *kerr.Error
	ackMsg   string
	acked    bool
	data     []byte
	acquired []acquiredRange
}

// lookup resolves a topic ID for delivery: its name, or the partition's
// error.
func (c *Coordinator) lookup(tp tidp) (string, PartitionLog, *kerr.Error, string) {
	name, ok := c.opts.Topics.TopicName(tp.id)
	if !ok {
		return "", nil, kerr.UnknownTopicID, ""
	}
	if c.opts.Topics.Internal(name) {
		return name, nil, kerr.UnknownTopicOrPartition, "internal topics are not delivered to share groups"
	}
	l, ok := c.opts.Topics.Log(name, tp.part)
	if !ok {
		return name, nil, kerr.UnknownTopicOrPartition, ""
	}
	return name, l, nil, ""
}

// applyAcks applies one partition's acknowledgements into r. Lock must be
// held.
func (c *Coordinator) applyAcks(group, member string, r *partResult, batches []AckBatch, renewOK bool, set groupSettings, now time.Time, dirty map[*sharePartition]bool) {
	r.acked = true
	if err := validateAcks(batches, renewOK); err != nil {
		r.ackErr, r.ackMsg = kerr.InvalidRequest, err.Error()
		return
	}
	if _, _, kerrv, msg := c.lookup(r.tp); kerrv != nil {
		r.ackErr, r.ackMsg = kerrv, msg
		return
	}
	p := c.parts[partKey{group, r.tp.id, r.tp.part}]
	if p == nil {
		r.ackErr, r.ackMsg = kerr.InvalidRecordState, "the share group holds no records of this partition"
		return
	}
	start := p.start
	counts, err := p.ack(member, batches, set.limit, now.Add(set.lockDuration))
	if err != nil {
		r.ackErr, r.ackMsg = kerr.InvalidRecordState, err.Error()
		c.met.ackErrors.Inc()
		return
	}
	c.met.acked(counts)
	dirty[p] = true
	if counts[AckRelease] > 0 || p.start != start {
		c.wake() // released records, or room in a full in-flight window
	}
}

func toBatches[B any](in []B, conv func(*B) AckBatch) []AckBatch {
	out := make([]AckBatch, len(in))
	for i := range in {
		out[i] = conv(&in[i])
	}
	return out
}

func (c *Coordinator) handleShareFetch(ctx context.Context, req *kmsg.ShareFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	top := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, nil
	}
	if req.GroupID == nil || *req.GroupID == "" || req.MemberID == nil || *req.MemberID == "" {
		return top(kerr.InvalidRequest, "GroupID and MemberID are required")
	}
	group, member := *req.GroupID, *req.MemberID
	hasAcks := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			hasAcks = hasAcks || len(p.AcknowledgementBatches) > 0
		}
	}
	if req.ShareSessionEpoch == 0 && hasAcks {
		return top(kerr.InvalidRequest, "acknowledgements cannot be sent when opening a share session")
	}
	renew := req.Version >= 2 && req.IsRenewAck

	c.mu.Lock()
	set := c.settings(group)
	resp.AcquisitionLockTimeoutMillis = int32(set.lockDuration.Milliseconds())
	sess, kerrv := c.sessionFor(ctx, sessKey{group, member}, req.ShareSessionEpoch, true)
	if kerrv != nil {
		c.mu.Unlock()
		return top(kerrv, "")
	}
	now := c.opts.Now()
	dirty := map[*sharePartition]bool{}
	results := map[tidp]*partResult{}
	res := func(tp tidp) *partResult {
		r := results[tp]
		if r == nil {
			r = &partResult{tp: tp}
			results[tp] = r
		}
		return r
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := tidp{t.TopicID, p.Partition}
			sess.add(tp)
			if len(p.AcknowledgementBatches) > 0 {
				batches := toBatches(p.AcknowledgementBatches, func(b *kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) AckBatch {
					return AckBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes}
				})
				c.applyAcks(group, member, res(tp), batches, renew, set, now, dirty)
			}
		}
	}
	for _, f := range req.ForgottenTopicsData {
		for _, p := range f.Partitions {
			sess.forget(tidp{f.TopicID, p})
		}
	}

	if req.ShareSessionEpoch == -1 {
		c.closeSession(sessKey{group, member})
	} else if !renew && len(sess.parts) > 0 {
		c.fetchLoop(ctx, req, group, member, sess, set, res, dirty)
	}
	w := c.persist(snapshots(dirty))
	c.mu.Unlock()

	if err := w.wait(ctx); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return top(kerr.KafkaStorageError, "share state write failed: "+err.Error())
	}
	fillFetchResponse(resp, results)
	return resp, nil
}

// fetchLoop acquires records from the session's partitions into results,
// waiting up to MaxWaitMillis while there are none. Lock must be held; it
// is released while waiting.
func (c *Coordinator) fetchLoop(ctx context.Context, req *kmsg.ShareFetchRequest, group, member string, sess *session, set groupSettings, res func(tidp) *partResult, dirty map[*sharePartition]bool) {
	maxRecords := int(req.MaxRecords)
	if req.Version < 1 || maxRecords <= 0 {
		maxRecords = 500 // Kafka's max.poll.records default
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	strict := req.Version >= 2 && req.ShareAcquireMode == 1
	var timer <-chan time.Time
	if req.MaxWaitMillis > 0 {
		t := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
		defer t.Stop()
		timer = t.C
	}
	expired := req.MaxWaitMillis <= 0
	for {
		if c.closed {
			return
		}
		now := c.opts.Now()
		took := 0
		budget := maxBytes
		var waitOn []<-chan struct{}
		n := len(sess.parts)
		start := sess.rot % max(n, 1)
		for i := 0; i < n && took < maxRecords; i++ {
			tp := sess.parts[(start+i)%n]
			topic, l, kerrv, msg := c.lookup(tp)
			if kerrv != nil {
				r := res(tp)
				r.err, r.errMsg = kerrv, msg
				continue
			}
			p := c.parts[partKey{group, tp.id, tp.part}]
			if p == nil {
				p = c.initPartition(group, topic, tp.id, tp.part)
				if p == nil {
					res(tp).err = kerr.UnknownTopicOrPartition
					continue
				}
			}
			waitOn = append(waitOn, l.Changed())
			if budget <= 0 {
				continue
			}
			data, ranges, changed, err := p.acquire(l, member, now.Add(set.lockDuration), acquireLimits{
				maxRecords: maxRecords - took, maxBytes: budget, strict: strict,
				window: c.opts.MaxRecordLocks, limit: set.limit, committed: set.committed,
			})
			if changed {
				dirty[p] = true
			}
			if err != nil {
				res(tp).err, res(tp).errMsg = kerr.KafkaStorageError, err.Error()
				continue
			}
			if len(ranges) == 0 {
				continue
			}
			r := res(tp)
			r.data = append(r.data, data...)
			r.acquired = append(r.acquired, ranges...)
			budget -= len(data)
			for _, a := range ranges {
				took += int(a.last - a.first + 1)
				if a.count > 1 {
					c.met.redelivered.Add(float64(a.last - a.first + 1))
				}
			}
		}
		sess.rot++
		c.met.acquired.Add(float64(took))
		if took > 0 || expired || ctx.Err() != nil || len(waitOn) == 0 {
			return
		}
		avail := c.avail
		c.mu.Unlock()
		cases := make([]reflect.SelectCase, 0, len(waitOn)+3)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(avail)})
		for _, ch := range waitOn {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		if chosen, _, _ := reflect.Select(cases); chosen < 2 {
			expired = true // one last look, then answer
		}
		c.mu.Lock()
		if c.sessions[sessKey{group, member}] != sess {
			return // the session was closed or replaced meanwhile
		}
	}
}

func fillFetchResponse(resp *kmsg.ShareFetchResponse, results map[tidp]*partResult) {
	for _, r := range sortedResults(results) {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].TopicID != r.tp.id {
			resp.Topics = append(resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: r.tp.id})
		}
		rt := &resp.Topics[len(resp.Topics)-1]
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = r.tp.part
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if r.err != nil {
			rp.ErrorCode = r.err.Code
			if r.errMsg != "" {
				rp.ErrorMessage = &r.errMsg
			}
		}
		if r.ackErr != nil {
			rp.AcknowledgeErrorCode = r.ackErr.Code
			if r.ackMsg != "" {
				rp.AcknowledgeErrorMessage = &r.ackMsg
			}
		}
		rp.Records = r.data
		for _, a := range r.acquired {
			rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: a.first, LastOffset: a.last, DeliveryCount: a.count})
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
}

func sortedResults(results map[tidp]*partResult) []*partResult {
	out := make([]*partResult, 0, len(results))
	for _, r := range results {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].tp, out[j].tp
		if a.id != b.id {
			return string(a.id[:]) < string(b.id[:])
		}
		return a.part < b.part
	})
	return out
}

func (c *Coordinator) handleShareAcknowledge(ctx context.Context, req *kmsg.ShareAcknowledgeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	top := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, nil
	}
	if req.GroupID == nil || *req.GroupID == "" || req.MemberID == nil || *req.MemberID == "" {
		return top(kerr.InvalidRequest, "GroupID and MemberID are required")
	}
	group, member := *req.GroupID, *req.MemberID
	renew := req.Version >= 2 && req.IsRenewAck
	c.mu.Lock()
	set := c.settings(group)
	if req.Version >= 2 {
		resp.AcquisitionLockTimeoutMillis = int32(set.lockDuration.Milliseconds())
	}
	if _, kerrv := c.sessionFor(ctx, sessKey{group, member}, req.ShareSessionEpoch, false); kerrv != nil {
		c.mu.Unlock()
		return top(kerrv, "")
	}
	now := c.opts.Now()
	dirty := map[*sharePartition]bool{}
	results := map[tidp]*partResult{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := tidp{t.TopicID, p.Partition}
			r := &partResult{tp: tp}
			results[tp] = r
			batches := toBatches(p.AcknowledgementBatches, func(b *kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) AckBatch {
				return AckBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes}
			})
			c.applyAcks(group, member, r, batches, renew, set, now, dirty)
		}
	}
	if req.ShareSessionEpoch == -1 {
		c.closeSession(sessKey{group, member})
	}
	w := c.persist(snapshots(dirty))
	c.mu.Unlock()
	if err := w.wait(ctx); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return top(kerr.KafkaStorageError, "share state write failed: "+err.Error())
	}
	for _, r := range sortedResults(results) {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].TopicID != r.tp.id {
			resp.Topics = append(resp.Topics, kmsg.ShareAcknowledgeResponseTopic{TopicID: r.tp.id})
		}
		rt := &resp.Topics[len(resp.Topics)-1]
		rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		rp.Partition = r.tp.part
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if r.ackErr != nil {
			rp.ErrorCode = r.ackErr.Code
			if r.ackMsg != "" {
				rp.ErrorMessage = &r.ackMsg
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return resp, nil
}
