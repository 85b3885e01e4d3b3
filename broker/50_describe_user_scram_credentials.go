package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/auth"
)

// DescribeUserSCRAMCredentials: v0
//
// Behavior:
// * Users null: every user with a credential, sorted by name; otherwise
//   the users asked for, in request order.
// * Each result lists the user's mechanisms (1 SCRAM-SHA-256,
//   2 SCRAM-SHA-512) and iteration counts; never salts or keys.
// * A user without credentials: RESOURCE_NOT_FOUND; a user named twice:
//   DUPLICATE_RESOURCE for it (Kafka's answers).

func init() {
	regAPI(api{key: kmsg.DescribeUserSCRAMCredentials, min: 0, max: 0, handle: handleDescribeUserSCRAMCredentials})
}

// scramMechanismCode is the wire code of a SCRAM mechanism (Kafka's
// ScramMechanism enum), 0 for unknown.
func scramMechanismCode(mech string) int8 {
	switch mech {
	case auth.ScramSHA256:
		return 1
	case auth.ScramSHA512:
		return 2
	}
	return 0
}

func scramMechanismName(code int8) string {
	switch code {
	case 1:
		return auth.ScramSHA256
	case 2:
		return auth.ScramSHA512
	}
	return ""
}

func handleDescribeUserSCRAMCredentials(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	all := b.scram.list()
	byName := make(map[string]userCreds, len(all))
	for _, u := range all {
		byName[u.User] = u
	}
	result := func(u userCreds) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u.User
		for _, c := range u.Creds {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechanismCode(c.Mechanism), int32(c.Iterations)
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		return r
	}
	if req.Users == nil {
		for _, u := range all {
			resp.Results = append(resp.Results, result(u))
		}
		return resp, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	for _, ru := range req.Users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = ru.Name
		u, ok := byName[ru.Name]
		switch {
		case count[ru.Name] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + ru.Name)
		case !ok:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + ru.Name)
		default:
			r = result(u)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
