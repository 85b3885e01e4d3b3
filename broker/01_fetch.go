package broker

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
)

// Fetch: v4-18
//
// Behavior:
// * Record bytes are the log's stored RecordBatch v2 bytes, never decoded
//   or re-encoded: the pooled read buffer goes into the response and is
//   released after the response has been written to the socket.
// * Long poll: if fewer than MinBytes are available the request waits, up
//   to MaxWaitMs, on the Changed() channels of all its partitions (woken the
//   moment any high watermark advances, including that of a partition that
//   already returned records but too few), then reads again; as Kafka's
//   DelayedFetch, a response below MinBytes is sent only at MaxWaitMs. An error on any partition
//   (unknown topic, OFFSET_OUT_OF_RANGE) answers immediately. Broker
//   shutdown or the client going away ends the wait early.
// * read_uncommitted serves offsets below the high watermark;
//   read_committed (IsolationLevel 1, v4+) below the last stable offset,
//   with the aborted transactions of the range read, so the client drops
//   aborted records. LastStableOffset is the partition's LSO either way.
// * A fetch offset below the log start offset or beyond the log end
//   is OFFSET_OUT_OF_RANGE; at or past the readable end (high watermark, or
//   LSO for read_committed) within the log it waits for data.
// * Size limits (KIP-74, as Kafka's ReplicaManager): partitions are read in
//   order; each gets min(PartitionMaxBytes, what remains of MaxBytes), whole
//   batches only. The first partition that returns records returns at least
//   one whole batch even if it is larger than both limits; after it the
//   limits hold strictly. A later partition whose next batch does not fit
//   returns no records this time. (Kafka sends the prefix of that batch,
//   which clients drop as a partial batch; sending nothing is what a client
//   makes of it, without the wasted bytes.) MaxBytes <= 0 means no response
//   limit (lenient: Kafka would answer one batch).
// * No partition starves: within a session the partitions that returned
//   records move to the end of the session's order, so the next fetch reads
//   the others first (Kafka's fetch session rotation); without a session the
//   order is the client's (the Java client and franz-go rotate themselves).
// * Sessions (KIP-227, v7+): see fetchsession.go. Incremental responses
//   list only partitions with records, errors or a changed high watermark,
//   last stable offset or log start offset.
// * v13+: topics are named by ID (UNKNOWN_TOPIC_ID if unknown); before,
//   by name (UNKNOWN_TOPIC_OR_PARTITION).
// * One broker: PreferredReadReplica is always -1, rack and replica state
//   ignored.
// * CurrentLeaderEpoch (v9+) is checked per partition named in the request
//   (leader_epoch.go): any negative epoch passes (Kafka reads it as "no
//   epoch" in Fetch), 0 (every partition's epoch) passes, newer is
//   UNKNOWN_LEADER_EPOCH; unknown topics and partitions are reported first.
//   An older epoch cannot be sent, so FENCED_LEADER_EPOCH is never answered.
// * Leader discovery (KIP-951, v16+, leader_epoch.go): a partition answered
//   NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries CurrentLeader
//   (this node, epoch 0) and the response's NodeEndpoints list this broker
//   as Metadata does. Every other partition keeps CurrentLeader at -1/-1
//   and NodeEndpoints stays empty, as in Kafka; UNKNOWN_LEADER_EPOCH names
//   no leader. NOT_LEADER_OR_FOLLOWER comes only from a partition log
//   closed under a live topic (a read racing the topic's deletion and
//   re-creation), so on this broker the fields are filled in that race
//   only.
//
// Version notes:
// * v4: RecordBatch, IsolationLevel, LastStableOffset
// * v5: LogStartOffset
// * v7: fetch sessions
// * v9: CurrentLeaderEpoch
// * v11: rack, PreferredReadReplica
// * v12: flexible
// * v13: topic IDs
// * v15-18: replica-only fields, ignored
// * v16: CurrentLeader and NodeEndpoints filled (KIP-951); the tagged
//   CurrentLeader exists from v12 but Kafka fills it from v16 only

// fetchPart is one partition of a fetch: its request and its answer.
type fetchPart struct {
	key      sessionKey
	name     string
	id       [16]byte
	t        *topic // nil: unknown topic
	part     int32
	offset   int64
	maxBytes int32
	sp       *sessionPart // non-nil within a session
	epochErr int16        // the CurrentLeaderEpoch check's error (leader_epoch.go); 0: passed

	// answer
	ec      int16
	hw      int64
	lso     int64
	start   int64
	aborted []wlog.AbortedTxn
	records []byte
	release func()
}

func init() {
	regAPI(api{key: kmsg.Fetch, min: 4, max: 18, handle: handleFetch, vectored: spliceFetch})
}

func handleFetch(b *Broker, ctx context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	sess, incremental, err := b.fetchSessionFor(req, b.cfg.Now())
	if err != nil {
		resp.ErrorCode = errorCode(err)
		b.metrics.partitionError("Fetch", resp.ErrorCode)
		return resp, nil
	}
	byID := req.Version >= 13
	keyOf := func(name string, id [16]byte, p int32) sessionKey {
		if byID {
			return sessionKey{id: id, partition: p}
		}
		return sessionKey{topic: name, partition: p}
	}
	parts := b.fetchParts(req, sess, keyOf)
	setFetchEpochErrors(req, parts, keyOf)
	b.awaitFetch(ctx, req, parts, byID)
	b.fillFetchResponse(req, resp, s, sess, incremental, parts)
	return resp, nil
}

// fetchSessionFor applies the request's session fields (KIP-227, v7+): epoch
// 0 opens a new session (closing the named one), -1 closes the named one and
// fetches sessionless, any other epoch continues a session incrementally.
// An error is the response's top-level error.
func (b *Broker) fetchSessionFor(req *kmsg.FetchRequest, now time.Time) (sess *fetchSession, incremental bool, err error) {
	if req.Version < 7 {
		return nil, false, nil
	}
	switch req.SessionEpoch {
	case 0:
		if req.SessionID != 0 {
			b.sessions.close(req.SessionID)
		}
		return b.sessions.open(now), false, nil
	case -1:
		if req.SessionID != 0 {
			b.sessions.close(req.SessionID)
		}
		return nil, false, nil
	}
	sess, err = b.sessions.next(req.SessionID, req.SessionEpoch, now)
	if err != nil {
		return nil, false, err
	}
	return sess, true, nil
}

// fetchParts returns the partitions to fetch, in order: the request's, or
// the session's after applying the request (forgotten topics removed,
// requested partitions upserted), each with its topic resolved.
func (b *Broker) fetchParts(req *kmsg.FetchRequest, sess *fetchSession, keyOf func(string, [16]byte, int32) sessionKey) []*fetchPart {
	var parts []*fetchPart
	if sess != nil {
		sess.mu.Lock()
		for _, ft := range req.ForgottenTopics {
			for _, p := range ft.Partitions {
				sess.forget(keyOf(ft.Topic, ft.TopicID, p))
			}
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				sess.upsert(keyOf(rt.Topic, rt.TopicID, rp.Partition), rp.FetchOffset, rp.PartitionMaxBytes)
			}
		}
		for _, k := range sess.order {
			sp := sess.parts[k]
			parts = append(parts, &fetchPart{key: k, name: k.topic, id: k.id, part: k.partition,
				offset: sp.fetchOffset, maxBytes: sp.maxBytes, sp: sp})
		}
		sess.mu.Unlock()
	} else {
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				parts = append(parts, &fetchPart{key: keyOf(rt.Topic, rt.TopicID, rp.Partition), name: rt.Topic, id: rt.TopicID,
					part: rp.Partition, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes})
			}
		}
	}
	byID := req.Version >= 13
	for _, fp := range parts {
		if byID {
			fp.t, _ = b.topics.getByID(fp.id)
		} else {
			fp.t, _ = b.topics.get(fp.name)
		}
	}
	return parts
}

// awaitFetch reads the partitions until the response holds MinBytes, a
// partition has an error, MaxWaitMillis passed, or ctx ended (long poll:
// between reads it waits for any partition's next append). The parts hold
// the last read.
func (b *Broker) awaitFetch(ctx context.Context, req *kmsg.FetchRequest, parts []*fetchPart, byID bool) {
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	var deadline <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		deadline = t.C
	}
	responseMax := int64(req.MaxBytes)
	if req.Version < 3 || responseMax <= 0 {
		responseMax = 1<<31 - 1
	}
	expired := maxWait <= 0
	for {
		total, anyErr, waitOn := b.fetchOnce(parts, responseMax, byID, req.IsolationLevel == 1)
		if anyErr || total >= int64(req.MinBytes) || expired || len(waitOn) == 0 || ctx.Err() != nil {
			return
		}
		for _, fp := range parts {
			fp.drop()
		}
		cases := make([]reflect.SelectCase, 0, len(waitOn)+2)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
		for _, ch := range waitOn {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		// After the deadline (or shutdown) read once more and answer.
		if chosen, _, _ := reflect.Select(cases); chosen < 2 {
			expired = true
		}
	}
}

// fillFetchResponse builds the response from the parts' reads in partition
// order, grouping consecutive partitions of one topic. An incremental
// session response leaves out partitions with nothing new; the session
// records what each partition was last sent. A read's buffer is released
// once the response is written (s.onWritten).
func (b *Broker) fillFetchResponse(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, s *slot, sess *fetchSession, incremental bool, parts []*fetchPart) {
	namedLeader := false
	if sess != nil {
		resp.SessionID = sess.id
		sess.mu.Lock()
		defer sess.mu.Unlock()
	}
	for _, fp := range parts {
		if fp.release != nil {
			s.onWritten(fp.release)
		}
		if incremental && len(fp.records) == 0 && fp.ec == 0 && fp.sp.sentHW == fp.hw && fp.sp.sentStart == fp.start && fp.sp.sentLSO == fp.lso {
			continue
		}
		if fp.sp != nil {
			fp.sp.sentHW, fp.sp.sentStart, fp.sp.sentLSO = fp.hw, fp.start, fp.lso
			if len(fp.records) > 0 {
				sess.moveToEnd(fp.key)
			}
		}
		n := len(resp.Topics)
		if n == 0 || resp.Topics[n-1].Topic != fp.name || resp.Topics[n-1].TopicID != fp.id {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = fp.name, fp.id
			resp.Topics = append(resp.Topics, rt)
			n++
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = fp.part
		rp.ErrorCode = fp.ec
		if req.Version >= 16 && fetchNamesLeader(fp.ec) {
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = b.cfg.NodeID, leaderEpoch
			namedLeader = true
		}
		rp.HighWatermark = fp.hw
		rp.LastStableOffset = fp.lso
		rp.LogStartOffset = fp.start
		for _, a := range fp.aborted {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			rp.AbortedTransactions = append(rp.AbortedTransactions, at)
		}
		rp.PreferredReadReplica = -1
		rp.RecordBatches = fp.records
		if rp.RecordBatches == nil {
			// Empty, not null: librdkafka rejects a null record set
			// ("invalid MessageSetSize -1"), as Kafka never sends one.
			rp.RecordBatches = []byte{}
		}
		b.metrics.fetchedBytes.Add(float64(len(fp.records)))
		b.metrics.partitionError("Fetch", fp.ec)
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, rp)
	}
	if namedLeader {
		resp.Brokers = []kmsg.FetchResponseBroker{b.fetchLeaderEndpoint()}
	}
}

// drop releases a read that will not be sent.
func (fp *fetchPart) drop() {
	if fp.release != nil {
		fp.release()
	}
	fp.records, fp.release = nil, nil
}

// fetchOnce reads every partition once. It returns the record bytes read,
// whether a partition has an error, and the Changed channels of the
// partitions read without an error, with or without records (taken before
// their high watermark was read, so no advance is missed): while the
// response holds fewer than MinBytes, an append to any of them may
// complete it.
func (b *Broker) fetchOnce(parts []*fetchPart, responseMax int64, byID, committed bool) (total int64, anyErr bool, waitOn []<-chan struct{}) {
	budget := responseMax
	for _, fp := range parts {
		fp.ec, fp.hw, fp.lso, fp.start, fp.aborted = 0, -1, -1, -1, nil
		if fp.t == nil {
			fp.ec = kerr.UnknownTopicOrPartition.Code
			if byID {
				fp.ec = kerr.UnknownTopicID.Code
			}
			anyErr = true
			continue
		}
		if byID {
			fp.name = fp.t.name // not encoded in v13+; used for logging
		}
		l, ok := fp.t.partition(fp.part)
		if !ok {
			fp.ec = kerr.UnknownTopicOrPartition.Code
			anyErr = true
			continue
		}
		if fp.epochErr != 0 {
			fp.ec = fp.epochErr
			anyErr = true
			continue
		}
		// Every partition read can complete the response: an empty one
		// by getting its first records, one with records by getting
		// more towards MinBytes. The channel is taken before the high
		// watermark is read, so no advance after the read is missed.
		waitOn = append(waitOn, l.Changed())
		lso := l.LastStableOffset()
		hw, start := l.HighWatermark(), l.LogStartOffset()
		fp.hw, fp.lso, fp.start = hw, min(lso, hw), start
		upTo := hw
		if committed {
			upTo = fp.lso
		}
		switch {
		case fp.offset < start || fp.offset > max(hw, l.LogEndOffset()):
			// Kafka errors only outside [log start, log end]; an offset
			// between the high watermark and the log end (appended, not
			// yet durable) waits below like one at the high watermark.
			fp.ec = kerr.OffsetOutOfRange.Code
			anyErr = true
			continue
		case fp.offset >= upTo:
			// Nothing (stable) yet. A transaction's marker advances the
			// high watermark when synced, which wakes the wait.
			continue
		}
		limit := min(int64(fp.maxBytes), budget)
		if total > 0 && limit <= 0 {
			continue
		}
		if limit <= 0 {
			limit = 1 // KIP-74: still one batch for the first partition with data
		}
		rr, err := l.Read(fp.offset, int(limit), upTo)
		if err != nil {
			_, exists := b.topics.get(fp.t.name)
			fp.ec = logErrorCode(err, !exists)
			if errors.Is(err, wlog.ErrStorage) {
				b.logger.Error("read failed", "topic", fp.t.name, "partition", fp.part, "offset", fp.offset, "err", err)
			}
			anyErr = true
			continue
		}
		if total > 0 && int64(len(rr.Data)) > limit {
			// Only the first partition with data may exceed the limits.
			if rr.Release != nil {
				rr.Release()
			}
			continue
		}
		if rr.HighWatermark > 0 {
			fp.hw = rr.HighWatermark
		}
		fp.start = rr.LogStartOffset
		fp.records, fp.release = rr.Data, rr.Release
		if committed {
			if end := readEnd(rr.Data); end > fp.offset {
				fp.aborted = l.AbortedTransactions(fp.offset, end)
			}
		}
		total += int64(len(rr.Data))
		budget -= int64(len(rr.Data))
	}
	return total, anyErr, waitOn
}

// readEnd is one past the last offset of the last whole batch in data, or
// -1 if data holds none. It bounds the aborted-transaction lookup of a
// read_committed fetch.
func readEnd(data []byte) int64 {
	end := int64(-1)
	for {
		h, ok := wlog.ReadBatchHeader(data)
		if !ok || h.Size() < wlog.BatchHeaderSize || h.Size() > int64(len(data)) {
			return end
		}
		end = h.NextOffset()
		data = data[h.Size():]
	}
}
