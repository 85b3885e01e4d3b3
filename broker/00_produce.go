package broker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/broker/txn"
)

// Produce: v3-13
//
// Behavior:
// * Appends from one connection reach each partition in the order the
//   requests were sent (idempotent producers pipeline several requests per
//   partition): the append of a partition waits until the same
//   connection's previous append to that partition has returned. Requests
//   touching other partitions, and other requests of the connection, are
//   not held up. The partitions of one request are appended one after
//   another (an append does not wait for its fsync), then waited for
//   together.
// * acks=-1 answers only once an fsync covers the data (group commit:
//   concurrent appenders share one fsync), so the response means "on
//   disk". Append and durability are split: every partition of the request
//   is written first, which releases the connection's next pipelined
//   request to the same partitions, and only then does the handler wait
//   for the fsyncs, so one fsync per partition covers several in-flight
//   requests. acks=1 answers after the write; acks=0 sends no response at
//   all, and closes the connection if a partition failed (Kafka's only way
//   to tell an acks=0 producer to refresh metadata).
// * acks other than -1, 0, 1: INVALID_REQUIRED_ACKS on every partition.
// * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (v13 by ID:
//   UNKNOWN_TOPIC_ID). Produce does not auto-create topics (Metadata does).
// * Internal topics (__consumer_offsets) refuse client writes:
//   INVALID_TOPIC_EXCEPTION, as Kafka does.
// * Record batches are validated by the log; nothing of a partition is
//   appended if one batch is bad: CORRUPT_MESSAGE (bad length, magic, CRC,
//   count), MESSAGE_TOO_LARGE (max.message.bytes), KAFKA_STORAGE_ERROR
//   (I/O failure, e.g. disk full; the log rolls back and stays usable).
// * Control batches (transaction markers) are written by the broker only:
//   INVALID_RECORD.
// * CreateTime topics: a record stamped more than
//   message.timestamp.before.max.ms before the broker's clock or more than
//   message.timestamp.after.max.ms after it (default one hour, Kafka 4's)
//   fails its partition with INVALID_TIMESTAMP, nothing appended; v8+
//   names the first such record in RecordErrors. Records without a
//   timestamp (-1) pass. LogAppendTime topics stamp batches themselves, so
//   nothing is checked (as Kafka).
// * acks=-1 on a topic whose min.insync.replicas is above 1 (the single
//   node is the whole ISR, of size 1): NOT_ENOUGH_REPLICAS, nothing
//   appended, as Kafka answers for an ISR smaller than min.isr; acks=0 and
//   1 are not affected. Kafka accepts the setting itself (it checks it on
//   produce, not when set), and so does weir.
// * The batches are appended straight from the request frame (the log
//   rewrites base offsets in place): no copy. The frame goes back to the
//   broker's frame pool once every partition is appended, before the
//   fsync wait, so requests waiting for the disk hold no frame.
// * TimeoutMillis bounds the acks=-1 wait for the fsync: a partition not
//   durable by then answers REQUEST_TIMED_OUT, and its records stay
//   appended (they become durable and visible with a later fsync), as in
//   Kafka. TimeoutMillis <= 0 means no bound (Kafka completes such a
//   request at once on a single replica; weir still waits for its fsync).
// * Idempotence is checked by the log, atomically with the append: a
//   duplicate of one of a producer's last 5 batches is answered with the
//   original offsets (nothing appended), a sequence gap is
//   OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch INVALID_PRODUCER_EPOCH, a
//   non-transactional batch during the producer's transaction
//   INVALID_TXN_STATE.
// * Transactional batches are verified with the transaction coordinator
//   before the append (KIP-890: the partition must be in the producer's
//   ongoing transaction; v12+ adds it implicitly); refused partitions get
//   the coordinator's code. One producer per request (INVALID_RECORD
//   otherwise), and a transactional batch needs the request's
//   TransactionalID (INVALID_RECORD). While the producer's previous
//   transaction completes the broker retries the verification itself
//   (20 ms backoff doubling to 100 ms, for up to 2 s, as Kafka's
//   add.partitions.to.txn.retry.backoff.*) before answering the retriable
//   NOT_ENOUGH_REPLICAS: clients retry that only after a metadata refresh.
// * Leader discovery (KIP-951, v10+, leader_epoch.go): a partition answered
//   NOT_LEADER_OR_FOLLOWER carries CurrentLeader (this node, epoch 0) and
//   the response's NodeEndpoints list this broker as Metadata does. Every
//   other partition keeps CurrentLeader at -1/-1 and NodeEndpoints stays
//   empty, as in Kafka (Produce has no leader epoch to fence, so Kafka
//   names the leader for NOT_LEADER_OR_FOLLOWER only).
//   NOT_LEADER_OR_FOLLOWER comes only from a partition log closed under a
//   live topic (an append racing the topic's deletion and re-creation), so
//   on this broker the fields are filled in that race only.
//
// Version notes:
// * v3: RecordBatch v2 only (the log's format), TransactionalID
// * v5: LogStartOffset in the response
// * v8: per-record errors and ErrorMessage
// * v9: flexible
// * v10: CurrentLeader and NodeEndpoints (KIP-951)
// * v13: topics by ID

func init() {
	regAPI(api{key: kmsg.Produce, min: 3, max: 13, handle: handleProduce, order: orderProduce, pooledFrame: true})
}

// handleProduce is Produce without ordering; connections run it through
// orderProduce.
func handleProduce(b *Broker, ctx context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	return b.produce(ctx, kreq.(*kmsg.ProduceRequest), nil, s.frameDone)
}

// orderProduce links every partition of the request behind the previous
// append of this connection to it (order.go) and runs the request with
// those links. The links are in request order (topic by topic, partition
// by partition).
func orderProduce(c *conn, s *slot, kreq kmsg.Request, _ handleCall) handleCall {
	req := kreq.(*kmsg.ProduceRequest)
	var links []chainLink
	for i := range req.Topics {
		rt := &req.Topics[i]
		// A partition is named by topic name, or by ID when the request
		// names topics by ID and the ID is unknown.
		k := chainKey{api: kmsg.Produce, name: rt.Topic}
		if req.Version >= 13 {
			if t, ok := c.b.topics.getByID(rt.TopicID); ok {
				k.name = t.name
			} else {
				k.name, k.id = "", rt.TopicID
			}
		}
		for j := range rt.Partitions {
			k.part = rt.Partitions[j].Partition
			links = append(links, c.link(k))
		}
	}
	return func(ctx context.Context) (kmsg.Response, error) {
		return c.b.produce(ctx, req, links, s.frameDone)
	}
}

// produceTarget is one partition of a Produce request that passed the
// topic checks.
type produceTarget struct {
	t    *topic
	l    *wlog.Log
	rp   *kmsg.ProduceRequestTopicPartition
	sp   *kmsg.ProduceResponseTopicPartition
	link int
}

// produce handles a Produce request; links (from orderProduce, or nil for
// no ordering) are all closed when it returns, whatever happens.
// appended, if not nil, is called once every partition is appended (or
// refused): from then on the request's record bytes are not read again, so
// the frame they alias can be reused while the request waits for its
// fsyncs. This keeps the number of live frames near the number of requests
// being appended, not the number waiting for the disk.
func (b *Broker) produce(ctx context.Context, req *kmsg.ProduceRequest, links []chainLink, appended func()) (kmsg.Response, error) {
	once := make([]sync.Once, len(links))
	done := func(i int) {
		if i < len(links) {
			once[i].Do(func() { close(links[i].mine) })
		}
	}
	defer func() {
		for i := range links {
			done(i)
		}
	}()
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var (
		durable = req.Acks == -1
		badAcks = req.Acks != -1 && req.Acks != 0 && req.Acks != 1
		targets []produceTarget
		li      int
	)
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var (
			t       *topic
			ok      bool
			topicEC int16
		)
		if req.Version >= 13 {
			t, ok = b.topics.getByID(rt.TopicID)
			if !ok {
				topicEC = kerr.UnknownTopicID.Code
			}
		} else {
			t, ok = b.topics.get(rt.Topic)
			if !ok {
				topicEC = kerr.UnknownTopicOrPartition.Code
			}
		}
		if ok && t.internal {
			topicEC = kerr.InvalidTopicException.Code
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &resp.Topics[len(resp.Topics)-1].Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogStartOffset = -1
			link := li
			li++
			switch {
			case badAcks:
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
			case topicEC != 0:
				sp.ErrorCode = topicEC
			case durable && t.minInsyncReplicas() > 1:
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				if req.Version >= 8 {
					sp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("The size of the current ISR [%d] is insufficient to satisfy the min.isr requirement of %d for partition %s-%d",
						b.cfg.NodeID, t.minInsyncReplicas(), t.name, rp.Partition))
				}
			}
			var l *wlog.Log
			if sp.ErrorCode == 0 {
				if l, ok = t.partition(rp.Partition); !ok {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
			}
			if sp.ErrorCode != 0 {
				done(link)
				continue
			}
			targets = append(targets, produceTarget{t: t, l: l, rp: rp, sp: sp, link: link})
		}
	}

	// Transactional batches are checked with the transaction coordinator
	// first (KIP-890); release lets it write markers once the verified
	// appends are done.
	release := b.verifyTxn(ctx, req, targets)
	for i := range targets {
		if targets[i].sp.ErrorCode != 0 {
			done(targets[i].link)
		}
	}

	// Append every partition (the link of each is released as soon as
	// its bytes are written), then wait for the fsyncs together.
	results := make([]wlog.AppendResult, len(targets))
	for i := range targets {
		tg := &targets[i]
		if tg.sp.ErrorCode != 0 {
			continue
		}
		func() {
			defer done(tg.link)
			defer func() {
				if r := recover(); r != nil {
					b.panics.Add(1)
					b.logger.Error("panic appending", "topic", tg.t.name, "partition", tg.rp.Partition, "panic", r, "stack", string(debug.Stack()))
					tg.sp.ErrorCode = kerr.UnknownServerError.Code
				}
			}()
			if tg.link < len(links) {
				<-links[tg.link].prev
			}
			results[i] = b.appendPartition(req.Version, tg.t.name, tg.l, tg.rp, tg.sp)
		}()
	}
	if appended != nil {
		// Nothing below reads a partition's Records (they alias the
		// frame); dropping them makes a later use fail loudly instead of
		// reading reused bytes.
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				req.Topics[i].Partitions[j].Records = nil
			}
		}
		appended()
	}
	if durable {
		b.waitDurable(ctx, req, targets, results)
	}
	release()

	failed := false
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			sp := &resp.Topics[i].Partitions[j]
			ec := sp.ErrorCode
			b.metrics.partitionError("Produce", ec)
			failed = failed || ec != 0
			if req.Version >= 10 && produceNamesLeader(ec) {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = b.cfg.NodeID, leaderEpoch
				if len(resp.Brokers) == 0 {
					resp.Brokers = []kmsg.ProduceResponseBroker{b.produceLeaderEndpoint()}
				}
			}
		}
	}
	if req.Acks == 0 {
		if failed {
			// The client reads no response, so the only way to tell it
			// something went wrong (and make it refresh metadata) is to
			// close the connection, as Kafka does.
			return nil, errCloseConn
		}
		return nil, nil
	}
	return resp, nil
}

// verifyTxn sets the error of every target holding a transactional batch
// that the transaction coordinator refuses (or that is malformed for a
// transaction), and returns the release the coordinator needs once the
// appends are done (a no-op if nothing was verified).
func (b *Broker) verifyTxn(ctx context.Context, req *kmsg.ProduceRequest, targets []produceTarget) (release func()) {
	release = func() {}
	var (
		idx        []int
		parts      []txn.TopicPartition
		pid        int64
		epoch      int16
		havePID    bool
		mismatched []int
	)
	for i, tg := range targets {
		p, e, ok := txnBatch(tg.rp.Records)
		if !ok {
			continue
		}
		if !havePID {
			pid, epoch, havePID = p, e, true
		} else if p != pid || e != epoch {
			mismatched = append(mismatched, i) // one producer per request
			continue
		}
		idx = append(idx, i)
		parts = append(parts, txn.TopicPartition{Topic: tg.t.name, Partition: tg.rp.Partition})
	}
	for _, i := range mismatched {
		targets[i].sp.ErrorCode = kerr.InvalidRecord.Code
	}
	if len(idx) == 0 {
		return release
	}
	fail := func(code int16) {
		for _, i := range idx {
			targets[i].sp.ErrorCode = code
		}
	}
	switch {
	case req.TransactionID == nil:
		fail(kerr.InvalidRecord.Code) // transactional batches need a transactional id
		return release
	case b.txns == nil:
		fail(kerr.CoordinatorNotAvailable.Code)
		return release
	}
	codes, rel, err := b.verifyRetrying(ctx, *req.TransactionID, pid, epoch, parts, req.Version >= 12)
	if err != nil {
		code := errorCode(err)
		if code == kerr.UnknownServerError.Code {
			code = kerr.CoordinatorNotAvailable.Code // closed or canceled: retriable
		}
		fail(code)
		if rel != nil {
			rel()
		}
		return release
	}
	for k, i := range idx {
		if k < len(codes) && codes[k] != 0 {
			targets[i].sp.ErrorCode = codes[k]
		}
	}
	if rel != nil {
		release = rel
	}
	return release
}

// Verification retry (Kafka's add.partitions.to.txn.retry.backoff.ms and
// .max.ms): while the previous transaction of the producer completes, the
// coordinator answers NOT_ENOUGH_REPLICAS (CONCURRENT_TRANSACTIONS). The
// broker retries it itself for a short while instead of answering at once:
// clients retry a retriable produce error only after a metadata refresh,
// which franz-go delays by its 5 s metadata min age.
const (
	verifyRetryBackoff    = 20 * time.Millisecond
	verifyRetryBackoffMax = 100 * time.Millisecond
	verifyRetryFor        = 2 * time.Second
)

// verifyRetrying calls Verify, retrying while any partition's code is
// NOT_ENOUGH_REPLICAS, for at most verifyRetryFor (bounded by ctx).
func (b *Broker) verifyRetrying(ctx context.Context, txnID string, pid int64, epoch int16, parts []txn.TopicPartition, implicitAdd bool) ([]int16, func(), error) {
	backoff := verifyRetryBackoff
	deadline := time.Now().Add(verifyRetryFor)
	for {
		codes, rel, err := b.txns.Verify(ctx, txnID, pid, epoch, parts, implicitAdd)
		if err != nil || !slices.Contains(codes, kerr.NotEnoughReplicas.Code) || time.Now().Add(backoff).After(deadline) {
			return codes, rel, err
		}
		if rel != nil {
			rel() // nothing appended: let the markers through
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, verifyRetryBackoffMax)
	}
}

// hasControlBatch reports whether records holds a control batch. Only the
// broker writes control batches (transaction markers); framing errors are
// left to the log's validation (a control bit in a batch whose length is
// wrong still counts).
func hasControlBatch(records []byte) bool {
	for {
		h, ok := wlog.ReadBatchHeader(records)
		if !ok {
			return false
		}
		if h.Control() {
			return true
		}
		n := h.Size()
		if n < wlog.BatchHeaderSize || n > int64(len(records)) {
			return false
		}
		records = records[n:]
	}
}

// waitDurable waits until every appended target of an acks=-1 request is
// durable, for at most the request's TimeoutMillis (if > 0), and sets the
// error of each target that is not: REQUEST_TIMED_OUT past the timeout
// (the records stay appended), the storage error if a failed fsync rolled
// the append back.
func (b *Broker) waitDurable(ctx context.Context, req *kmsg.ProduceRequest, targets []produceTarget, results []wlog.AppendResult) {
	// Not the connection's context: a broker Close cancels it, yet the
	// appended records still become durable (the logs sync on close) and
	// their requests are answered with success. The wait ends with the
	// fsync, a rollback, the log's close or the request's timeout.
	ctx = context.WithoutCancel(ctx)
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	for i := range targets {
		tg := &targets[i]
		if tg.sp.ErrorCode != 0 {
			continue
		}
		err := tg.l.WaitDurable(ctx, &results[i])
		if err == nil {
			continue
		}
		tg.sp.BaseOffset, tg.sp.LogAppendTime, tg.sp.LogStartOffset = -1, -1, -1
		if errors.Is(err, context.DeadlineExceeded) {
			tg.sp.ErrorCode = kerr.RequestTimedOut.Code
		} else {
			_, exists := b.topics.get(tg.t.name)
			tg.sp.ErrorCode = logErrorCode(err, !exists)
			if tg.sp.ErrorCode == kerr.KafkaStorageError.Code {
				b.logger.Error("fsync failed", "topic", tg.t.name, "partition", tg.rp.Partition, "err", err)
			}
		}
		if req.Version >= 8 {
			tg.sp.ErrorMessage = kmsg.StringPtr(err.Error())
		}
	}
}

// appendPartition appends one partition's batches (written, not yet
// durable) and fills its response.
func (b *Broker) appendPartition(version int16, topicName string, l *wlog.Log, rp *kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) wlog.AppendResult {
	if hasControlBatch(rp.Records) {
		// Kafka: a client may not write control records.
		sp.ErrorCode = kerr.InvalidRecord.Code
		if version >= 8 {
			sp.ErrorMessage = kmsg.StringPtr("control batches are written by the broker only")
		}
		return wlog.AppendResult{}
	}
	res, err := l.Append(rp.Records, false)
	if err != nil {
		_, exists := b.topics.get(topicName)
		produceAppendError(version, topicName, rp.Partition, err, !exists, sp)
		if sp.ErrorCode == kerr.UnknownServerError.Code || sp.ErrorCode == kerr.KafkaStorageError.Code {
			b.logger.Error("append failed", "topic", topicName, "partition", rp.Partition, "err", err)
		}
		return wlog.AppendResult{}
	}
	b.metrics.producedBytes.Add(float64(len(rp.Records)))
	b.metrics.producedBatches.Inc()
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = res.LogStartOffset
	return res
}
