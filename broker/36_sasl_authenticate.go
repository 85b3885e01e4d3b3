package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASLAuthenticate: v0-2
//
// Behavior:
// * On SASL_PLAINTEXT and SASL_SSL listeners the exchange is handled by
//   the connection's SASL state machine (sasl.go), not by this handler.
// * On PLAINTEXT and SSL listeners there is no SASL exchange to continue:
//   ILLEGAL_SASL_STATE, as Kafka answers a SaslAuthenticate it does not
//   expect.
//
// Version notes:
// * v1: SessionLifetimeMs (KIP-368 re-authentication)
// * v2: flexible

func init() { regAPI(api{key: kmsg.SASLAuthenticate, min: 0, max: 2, handle: handleSASLAuthenticate}) }

func handleSASLAuthenticate(_ *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	resp.ErrorMessage = kmsg.StringPtr("this listener does not use SASL")
	return resp, nil
}
