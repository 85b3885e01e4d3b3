package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/quota"
)

// DescribeClientQuotas: v0-1
//
// Behavior:
// * Lists the stored client quotas (quotas.json) whose entity the filter
//   selects: each component matches a component of the entity (exact name,
//   the default, or any named one); Strict also excludes entities with
//   components of other types. An empty filter selects every entity.
// * Entity types are user and client-id; a filter on another type (ip) or
//   naming a type twice, or an exact match without a name, is
//   INVALID_REQUEST.
// * Requires DESCRIBE_CONFIGS on the cluster with an authorizer.
//
// Version notes:
// * v1: flexible

func init() {
	regAPI(api{key: kmsg.DescribeClientQuotas, min: 0, max: 1, handle: handleDescribeClientQuotas})
}

func handleDescribeClientQuotas(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	filter := make([]quota.FilterComponent, len(req.Components))
	for i, c := range req.Components {
		filter[i] = quota.FilterComponent{Type: c.EntityType, Match: quota.MatchType(c.MatchType), Name: c.Match}
	}
	found, err := b.quotas.Describe(filter, req.Strict)
	if err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return resp, nil
	}
	for _, d := range found {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, c := range d.Entity {
			ec := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ec.Type, ec.Name = c.Type, c.Name
			e.Entity = append(e.Entity, ec)
		}
		keys := make([]string, 0, len(d.Values))
		for k := range d.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, d.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}
