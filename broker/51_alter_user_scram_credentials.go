package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/auth"
)

// AlterUserSCRAMCredentials: v0
//
// Behavior:
// * Upsertions carry salt and salted password (the client salts; the
//   password never crosses the wire); the broker keeps only salt,
//   iterations, StoredKey and ServerKey (scram_store.go).
// * Per user, Kafka's checks: empty name UNACCEPTABLE_CREDENTIAL; unknown
//   mechanism UNSUPPORTED_SASL_MECHANISM; iterations outside
//   [4096, 16384], an empty salt or a salted password of the wrong size
//   UNACCEPTABLE_CREDENTIAL; the same user and mechanism twice in the
//   request DUPLICATE_RESOURCE; deleting a credential that does not exist
//   RESOURCE_NOT_FOUND. A user with any error has none of its changes
//   applied.
// * The valid changes are written durably (one atomic file replace) before
//   the response; one result per user, in first-appearance order.

func init() {
	regAPI(api{key: kmsg.AlterUserSCRAMCredentials, min: 0, max: 0, handle: handleAlterUserSCRAMCredentials})
}

func handleAlterUserSCRAMCredentials(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)

	type userState struct {
		code    int16
		msg     string
		changes []scramChange
	}
	var order []string
	users := map[string]*userState{}
	seen := map[[2]string]bool{}
	get := func(name string) *userState {
		u, ok := users[name]
		if !ok {
			u = &userState{}
			users[name] = u
			order = append(order, name)
		}
		return u
	}
	fail := func(u *userState, code *kerr.Error, msg string) {
		if u.code == 0 {
			u.code, u.msg = code.Code, msg
		}
	}
	check := func(u *userState, name string, mechCode int8) (string, bool) {
		mech := scramMechanismName(mechCode)
		switch {
		case name == "":
			fail(u, kerr.UnacceptableCredential, "Username must not be empty")
		case mech == "":
			fail(u, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case seen[[2]string{name, mech}]:
			fail(u, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		default:
			seen[[2]string{name, mech}] = true
			return mech, true
		}
		return "", false
	}
	for _, d := range req.Deletions {
		u := get(d.Name)
		mech, ok := check(u, d.Name, d.Mechanism)
		if !ok {
			continue
		}
		if _, exists := b.scram.ScramCredential(d.Name, mech); !exists {
			fail(u, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			continue
		}
		u.changes = append(u.changes, scramChange{User: d.Name, Mechanism: mech})
	}
	for _, up := range req.Upsertions {
		u := get(up.Name)
		mech, ok := check(u, up.Name, up.Mechanism)
		if !ok {
			continue
		}
		cred, err := auth.NewScramCredential(mech, up.Salt, up.SaltedPassword, int(up.Iterations))
		if err != nil {
			fail(u, kerr.UnacceptableCredential, err.Error())
			continue
		}
		u.changes = append(u.changes, scramChange{User: up.Name, Mechanism: mech, Cred: &cred})
	}
	var changes []scramChange
	for _, name := range order {
		if u := users[name]; u.code == 0 {
			changes = append(changes, u.changes...)
		}
	}
	var writeErr error
	if len(changes) > 0 {
		writeErr = b.scram.apply(changes)
		if writeErr != nil {
			b.logger.Error("storing SCRAM credentials failed", "err", writeErr)
		}
	}
	for _, name := range order {
		u := users[name]
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = name
		switch {
		case u.code != 0:
			r.ErrorCode, r.ErrorMessage = u.code, kmsg.StringPtr(u.msg)
		case writeErr != nil:
			r.ErrorCode = kerr.KafkaStorageError.Code
		}
		b.metrics.partitionError("AlterUserSCRAMCredentials", r.ErrorCode)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
