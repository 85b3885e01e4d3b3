package txn

import (
	"context"

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
	codes, release, err := c.verifyHold(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch,
		[]TopicPartition{{OffsetsTopic, 0}}, req.Version >= 5, nil, txnOffsetCommitCode)
	if err != nil {
		return nil, err
	}
	defer release()
	if codes[0] != 0 {
		return errResp(codes[0]), nil
	}
	resp, err := c.opts.Offsets.TxnOffsetCommit(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// txnOffsetCommitCode converts a verification code to what TxnOffsetCommit
// answers: a fenced producer is INVALID_PRODUCER_EPOCH (as Kafka's
// verification does), the offsets partition not in the transaction
// INVALID_TXN_STATE.
func txnOffsetCommitCode(code int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.TransactionAbortable.Code:
		return kerr.InvalidTxnState.Code
	}
	return code
}
