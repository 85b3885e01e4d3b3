package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/quota"
)

// AlterClientQuotas: v0-1
//
// Behavior:
// * Each entry sets or removes quota keys (producer_byte_rate,
//   consumer_byte_rate, request_percentage) of one entity (user and/or
//   client-id, a nil name being the default). Entries apply one by one; an
//   entry applies wholly or not at all, and is answered once quotas.json is
//   durable. A change takes effect on the next request charged.
// * An unknown entity type (ip) or key (controller_mutation_rate, which
//   weir does not enforce), a type given twice, a non-positive value or a
//   fractional byte rate is INVALID_REQUEST for that entry; a persistence
//   failure is UNKNOWN_SERVER_ERROR.
// * ValidateOnly checks and changes nothing.
// * Requires ALTER_CONFIGS on the cluster with an authorizer.
//
// Version notes:
// * v1: flexible

func init() {
	regAPI(api{key: kmsg.AlterClientQuotas, min: 0, max: 1, handle: handleAlterClientQuotas})
}

func handleAlterClientQuotas(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		ent := make(quota.Entity, len(e.Entity))
		for i, c := range e.Entity {
			ent[i] = quota.Component{Type: c.Type, Name: c.Name}
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			re.Entity = append(re.Entity, rc)
		}
		ops := make([]quota.Op, len(e.Ops))
		for i, o := range e.Ops {
			ops[i] = quota.Op{Key: o.Key, Value: o.Value, Remove: o.Remove}
		}
		if err := b.quotas.Alter(ent, ops, req.ValidateOnly); err != nil {
			re.ErrorCode = kerr.InvalidRequest.Code
			if !errors.Is(err, quota.ErrInvalid) {
				b.logger.Error("persist quotas", "err", err)
				re.ErrorCode = kerr.UnknownServerError.Code
			}
			re.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}
