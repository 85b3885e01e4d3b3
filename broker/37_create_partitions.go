package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behavior:
// * Grows a topic to Count partitions; new partitions are empty logs with
//   the topic's configs. A Count at or below the current count is
//   INVALID_PARTITIONS; an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a topic
//   named twice INVALID_REQUEST.
// * An Assignment may only place each new partition on this node
//   (INVALID_REPLICA_ASSIGNMENT otherwise).
// * ValidateOnly checks and changes nothing, and answers at once. The new
//   count is durable before a successful response.
// * TimeoutMillis, as Kafka: the checks are answered at once; adding the
//   partitions runs in the background and the response waits for it at
//   most TimeoutMillis (<= 0: not at all); one still running then is
//   REQUEST_TIMED_OUT and completes anyway. (The checks are repeated, under
//   the registry's lock, by the change itself.)
// * The new partitions are opened without the registry's admin lock
//   (topics.go), so other admin requests and Metadata go on meanwhile; a
//   second growth or a deletion of the same topic waits for this one. The
//   new partitions become visible together, once the new count is durable;
//   a failed growth leaves the topic as it was and no directory behind.
//
// Version notes:
// * v1: ThrottleMillis semantics
// * v2: flexible

func init() { regAPI(api{key: kmsg.CreatePartitions, min: 0, max: 3, handle: handleCreatePartitions}) }

func handleCreatePartitions(b *Broker, ctx context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	type growth struct {
		i  int // index in resp.Topics
		op *adminOp
	}
	var growths []growth
	for i, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case count[rt.Topic] > 1:
			err = kerrMsg(kerr.InvalidRequest, fmt.Sprintf("duplicate topic %s in request", rt.Topic))
		case !assignmentOnNode(rt.Assignment, b.cfg.NodeID):
			err = kerrMsg(kerr.InvalidReplicaAssignment, fmt.Sprintf("new partitions can only be assigned to node %d", b.cfg.NodeID))
		default:
			if t, ok := b.topics.get(rt.Topic); ok && rt.Assignment != nil && int32(len(t.parts))+int32(len(rt.Assignment)) != rt.Count {
				err = kerrMsg(kerr.InvalidReplicaAssignment, "assignment count does not match the number of new partitions")
			} else if err = b.topics.checkAddPartitions(rt.Topic, rt.Count); err == nil && !req.ValidateOnly {
				name, total := rt.Topic, rt.Count
				growths = append(growths, growth{i: i, op: b.startAdmin(func() error {
					return b.topics.addPartitions(name, total, false)
				})})
			}
		}
		st.ErrorCode, st.ErrorMessage = errorCode(err), errMessage(err)
		resp.Topics = append(resp.Topics, st)
	}
	ops := make([]*adminOp, len(growths))
	for j, g := range growths {
		ops[j] = g.op
	}
	awaitAdmin(ctx, req.TimeoutMillis, ops)
	for _, g := range growths {
		st := &resp.Topics[g.i]
		done, err := g.op.result()
		if !done {
			err = kerrMsg(kerr.RequestTimedOut, fmt.Sprintf("partitions of topic '%s' are still being created", st.Topic))
		}
		st.ErrorCode, st.ErrorMessage = errorCode(err), errMessage(err)
	}
	for _, st := range resp.Topics {
		b.metrics.partitionError("CreatePartitions", st.ErrorCode)
	}
	return resp, nil
}

func assignmentOnNode(as []kmsg.CreatePartitionsRequestTopicAssignment, node int32) bool {
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != node {
			return false
		}
	}
	return true
}
