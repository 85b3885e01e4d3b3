package broker

import (
	"context"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID: v0-5
//
// Behavior:
// * Non-transactional (idempotent) producers get a fresh producer ID with
//   epoch 0. IDs start at the broker's start time in milliseconds times
//   1024 and increase, so they do not repeat across restarts unless more
//   than 1024 are handed out per millisecond of downtime.
// * A producer re-initialising with its ProducerID/Epoch (v3+, KIP-360)
//   gets a new ID, which is always a valid answer.
// * Transactional IDs: TRANSACTIONAL_ID_AUTHORIZATION_FAILED until the
//   transaction coordinator exists (issue 5); a non-retriable error, so
//   the client fails fast instead of retrying forever.
// * Sequence numbers are not yet checked on Produce (no duplicate window).
//
// Version notes:
// * v2: flexible
// * v3: ProducerID/Epoch for epoch bumps
// * v5: TransactionVersion (KIP-890), unused

type producerIDs struct {
	next atomic.Int64
}

func (p *producerIDs) init(nowMs int64) { p.next.Store(nowMs << 10) }

func handleInitProducerID(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil
	}
	resp.ProducerID = b.producers.next.Add(1)
	resp.ProducerEpoch = 0
	return resp, nil
}
