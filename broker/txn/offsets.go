package txn

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit: v0-5
//
// Behavior: the transaction is checked here (Kafka does it through the
// KIP-890 verification the group coordinator asks for), then the request
// is delegated to Options.Offsets, which stages the offsets and checks the
// group, member and generation.
//   - Unknown transactional id or another producer id:
//     INVALID_PRODUCER_ID_MAPPING; another epoch: INVALID_PRODUCER_EPOCH
//     (Kafka's verification converts PRODUCER_FENCED); the previous
//     transaction completing: CONCURRENT_TRANSACTIONS.
//   - The group's offsets partition not in the transaction:
//     INVALID_TXN_STATE before v5; v5+ (transaction version 2) adds it.
//   - Until the staged commit returned, the transaction's markers wait, so
//     the offsets are always staged before the marker that commits them.

func init() { regAPI(kmsg.TxnOffsetCommit, 0, 5, (*Coordinator).txnOffsetCommit) }

func (c *Coordinator) txnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, error) {
	errResp := func(code int16) *kmsg.TxnOffsetCommitResponse {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if c.opts.Offsets == nil {
		return errResp(kerr.CoordinatorNotAvailable.Code), nil
	}
	if req.Group == "" {
		return errResp(kerr.InvalidGroupID.Code), nil
	}
	type result struct {
		code int16
		held *txnMeta
	}
	ch := make(chan result, 1)
	parts := []TopicPartition{{OffsetsTopic, 0}}
	ev := func() {
		finish := func(code int16) {
			var held *txnMeta
			if code == 0 {
				held = c.txns[req.TransactionalID]
				held.holds++
			}
			ch <- result{code, held}
		}
		codes := c.verifyInTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts)
		switch code := codes[0]; {
		case code == kerr.TransactionAbortable.Code && req.Version >= 5:
			c.addToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, TransactionVersion, func(code int16) {
				if code == kerr.ProducerFenced.Code {
					code = kerr.InvalidProducerEpoch.Code
				}
				finish(code)
			})
		case code == kerr.TransactionAbortable.Code:
			finish(kerr.InvalidTxnState.Code)
		case code == kerr.ProducerFenced.Code:
			finish(kerr.InvalidProducerEpoch.Code)
		default:
			finish(code)
		}
	}
	select {
	case c.events <- ev:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.quit:
		return nil, ErrClosed
	}
	var r result
	select {
	case r = <-ch:
	case <-c.quit:
		return nil, ErrClosed
	}
	if r.code != 0 {
		return errResp(r.code), nil
	}
	var once sync.Once
	release := func() { once.Do(func() { c.post(func() { c.releaseHold(r.held) }) }) }
	defer release()
	resp, err := c.opts.Offsets.TxnOffsetCommit(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}
