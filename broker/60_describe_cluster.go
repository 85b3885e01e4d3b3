package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-1
//
// Behavior:
// * Answers the cluster ID and this node as the only broker and the
//   controller. IncludeClusterAuthorizedOperations answers every cluster
//   operation (Kafka without an authorizer; see 03_metadata.go), else
//   INT32_MIN.
// * v1: EndpointType 2 (controllers) is UNSUPPORTED_ENDPOINT_TYPE: weir has
//   no separate controller endpoint.
//
// Version notes:
// * v0: flexible from the start
// * v1: EndpointType

func init() { regAPI(api{key: kmsg.DescribeCluster, min: 0, max: 1, handle: handleDescribeCluster}) }

func handleDescribeCluster(b *Broker, _ context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType == 2 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp, nil
	}
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.cfg.NodeID
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterAuthorizedOps
	}
	rb := kmsg.NewDescribeClusterResponseBroker()
	rb.NodeID = b.cfg.NodeID
	rb.Host, rb.Port = b.endpoint(s)
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{rb}
	return resp, nil
}
