package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeACLs, CreateACLs, DeleteACLs: v0-3
//
// Behavior:
// * weir has no authorizer. As Kafka without authorizer.class.name, every
//   ACL request is answered SECURITY_DISABLED ("No Authorizer is
//   configured"), per creation and per filter for Create/Delete. Admin
//   tools that list ACLs then show none instead of failing on a closed
//   connection.
//
// Version notes:
// * v1: resource pattern types (KIP-290)
// * v2: flexible

const noAuthorizer = "No Authorizer is configured on the broker"

func init() {
	regAPI(api{key: kmsg.DescribeACLs, min: 0, max: 3, handle: handleDescribeACLs})
	regAPI(api{key: kmsg.CreateACLs, min: 0, max: 3, handle: handleCreateACLs})
	regAPI(api{key: kmsg.DeleteACLs, min: 0, max: 3, handle: handleDeleteACLs})
}

func handleDescribeACLs(_ *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = kerr.SecurityDisabled.Code
	resp.ErrorMessage = kmsg.StringPtr(noAuthorizer)
	return resp, nil
}

func handleCreateACLs(_ *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = kerr.SecurityDisabled.Code
		r.ErrorMessage = kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func handleDeleteACLs(_ *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = kerr.SecurityDisabled.Code
		r.ErrorMessage = kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
