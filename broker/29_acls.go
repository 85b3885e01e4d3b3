package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
)

// DescribeACLs, CreateACLs, DeleteACLs: v0-3
//
// Behavior:
// * Without an authorizer (Config.Authorizer empty), as Kafka without
//   authorizer.class.name, every ACL request is answered SECURITY_DISABLED
//   ("No Authorizer is configured"), per creation and per filter for
//   Create/Delete.
// * With one, the ACLs live in <data dir>/acls.json (broker/authz): a
//   creation or deletion is answered once the file is durable, and applies
//   to every request authorized after it. Describe requires DESCRIBE on the
//   cluster, Create and Delete ALTER on the cluster (authz_rules.go).
// * A creation Kafka would refuse (an operation the resource type lacks,
//   a principal not "Type:name", ANY/MATCH/UNKNOWN values, a cluster not
//   named kafka-cluster) gets INVALID_REQUEST; the others are created. A
//   filter with UNKNOWN values gets INVALID_REQUEST.
// * A persistence failure answers UNKNOWN_SERVER_ERROR for every creation /
//   filter of the request, and nothing of it applies.
//
// Version notes:
// * v0: no pattern type; bindings and filters are LITERAL
// * v1: resource pattern types (KIP-290)
// * v2: flexible

const noAuthorizer = "No Authorizer is configured on the broker"

func init() {
	regAPI(api{key: kmsg.DescribeACLs, min: 0, max: 3, handle: handleDescribeACLs})
	regAPI(api{key: kmsg.CreateACLs, min: 0, max: 3, handle: handleCreateACLs})
	regAPI(api{key: kmsg.DeleteACLs, min: 0, max: 3, handle: handleDeleteACLs})
}

// v0Pattern is the pattern type of a v0 binding or filter, which has none.
func v0Pattern(version int16, pt kmsg.ACLResourcePatternType) authz.PatternType {
	if version == 0 || pt == 0 {
		return authz.PatternLiteral
	}
	return authz.PatternType(pt)
}

func handleDescribeACLs(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if b.authz == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		resp.ErrorMessage = kmsg.StringPtr(noAuthorizer)
		return resp, nil
	}
	f := authz.Filter{ResourceType: authz.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: v0Pattern(req.Version, req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: authz.Operation(req.Operation), Permission: authz.Permission(req.PermissionType)}
	if err := f.Validate(); err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return resp, nil
	}
	// One resource entry per pattern, in first-seen order.
	type key struct {
		rt   authz.ResourceType
		name string
		pt   authz.PatternType
	}
	idx := map[key]int{}
	for _, a := range b.authz.ACLs(f) {
		k := key{a.ResourceType, a.ResourceName, a.PatternType}
		i, ok := idx[k]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType = kmsg.ACLResourceType(a.ResourceType)
			r.ResourceName = a.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			i = len(resp.Resources)
			idx[k] = i
			resp.Resources = append(resp.Resources, r)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, e)
	}
	return resp, nil
}

func handleCreateACLs(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	if b.authz == nil {
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode = kerr.SecurityDisabled.Code
			r.ErrorMessage = kmsg.StringPtr(noAuthorizer)
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	bindings := make([]authz.Binding, len(req.Creations))
	for i, c := range req.Creations {
		bindings[i] = authz.Binding{ResourceType: authz.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: v0Pattern(req.Version, c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: authz.Operation(c.Operation), Permission: authz.Permission(c.PermissionType)}
	}
	errs, err := b.authz.Create(bindings)
	for i := range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		switch {
		case err != nil:
			b.logger.Error("persist acls", "err", err)
			r.ErrorCode = kerr.UnknownServerError.Code
			r.ErrorMessage = kmsg.StringPtr("persisting the ACLs failed")
		case errs[i] != nil:
			r.ErrorCode = kerr.InvalidRequest.Code
			r.ErrorMessage = kmsg.StringPtr(errs[i].Error())
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func handleDeleteACLs(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	if b.authz == nil {
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode = kerr.SecurityDisabled.Code
			r.ErrorMessage = kmsg.StringPtr(noAuthorizer)
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	// Invalid filters are answered alone; the valid ones delete together.
	var (
		valid []authz.Filter
		at    []int
	)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i, rf := range req.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		f := authz.Filter{ResourceType: authz.ResourceType(rf.ResourceType), ResourceName: rf.ResourceName,
			PatternType: v0Pattern(req.Version, rf.ResourcePatternType), Principal: rf.Principal, Host: rf.Host,
			Operation: authz.Operation(rf.Operation), Permission: authz.Permission(rf.PermissionType)}
		if err := f.Validate(); err != nil {
			resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
			resp.Results[i].ErrorMessage = kmsg.StringPtr(err.Error())
			continue
		}
		valid = append(valid, f)
		at = append(at, i)
	}
	deleted, err := b.authz.Delete(valid)
	for j, i := range at {
		r := &resp.Results[i]
		if err != nil {
			b.logger.Error("persist acls", "err", err)
			r.ErrorCode = kerr.UnknownServerError.Code
			r.ErrorMessage = kmsg.StringPtr("persisting the ACLs failed")
			continue
		}
		for _, a := range deleted[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
	}
	return resp, nil
}
