package broker

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/txn"
)

// ApiVersions: v0-4
//
// Behavior:
// * Lists every served API key with its version range, sorted by key,
//   including the group coordinator's keys.
// * A request above our maximum version is answered with a v0 response
//   carrying UNSUPPORTED_VERSION and the supported key list (Kafka lists
//   only ApiVersions; the full list is a superset every client accepts), so
//   the client retries at a version we serve (KIP-511). Decoding is skipped
//   for it: its body may not be parseable.
// * The response always uses response header v0 (no tagged fields), even
//   when the body is flexible, because the client cannot know yet whether
//   we speak flexible versions.
// * v3+: ClientSoftwareName/Version must match
//   [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? else INVALID_REQUEST, as
//   Kafka validates.
// * v3+: the feature transaction.version is supported 0..2 and finalized
//   at 2 (KIP-890 part 2, what the transaction coordinator implements).
//
// Version notes:
// * v1: ThrottleMillis
// * v3: flexible, client software name and version

var softwareRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func init() {
	regAPI(api{key: kmsg.ApiVersions, min: 0, max: 4, handle: handleApiVersions,
		unsupportedVersion: unsupportedApiVersions, responseHeaderV0: true})
}

func handleApiVersions(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareRE.MatchString(req.ClientSoftwareName) || !softwareRE.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	resp.ApiKeys = apiVersionsKeys()
	if req.Version >= 3 && b.txns != nil {
		// KIP-584 features: the transaction protocol version the
		// coordinator implements (KIP-890 part 2 at level 2), finalized
		// at its maximum: clients choose their transaction mode from it.
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = "transaction.version", 0, txn.TransactionVersion
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "transaction.version", txn.TransactionVersion, txn.TransactionVersion
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp, nil
}

// unsupportedApiVersions is the KIP-511 answer to an ApiVersions request of
// a version we do not serve.
func unsupportedApiVersions(b *Broker) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiVersionsKeys()
	return resp
}
