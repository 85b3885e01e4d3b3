package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASLHandshake: v0-1
//
// Behavior:
// * On SASL_PLAINTEXT and SASL_SSL listeners the handshake is handled by
//   the connection's SASL state machine (sasl.go), not by this handler.
// * On PLAINTEXT and SSL listeners every mechanism is answered
//   UNSUPPORTED_SASL_MECHANISM with an empty mechanism list, so a client
//   configured for SASL fails with a clear error instead of a closed
//   connection.
//
// Version notes:
// * v1: the exchange continues with SaslAuthenticate requests (v0 raw
//   tokens are not supported)

func init() { regAPI(api{key: kmsg.SASLHandshake, min: 0, max: 1, handle: handleSASLHandshake}) }

func handleSASLHandshake(_ *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	resp.SupportedMechanisms = []string{}
	return resp, nil
}
