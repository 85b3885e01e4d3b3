package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASLHandshake: v0-1
//
// Behavior:
// * weir's listener is PLAINTEXT: every mechanism is answered
//   UNSUPPORTED_SASL_MECHANISM with an empty mechanism list, so a client
//   configured for SASL fails with a clear error instead of a closed
//   connection.

func init() { regAPI(api{key: kmsg.SASLHandshake, min: 0, max: 1, handle: handleSASLHandshake}) }

func handleSASLHandshake(_ *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	resp.SupportedMechanisms = []string{}
	return resp, nil
}
