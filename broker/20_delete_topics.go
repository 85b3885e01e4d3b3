package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behavior:
// * Deletes by name, or by ID (v6+, when the name is null).
// * Unknown name: UNKNOWN_TOPIC_OR_PARTITION; unknown ID: UNKNOWN_TOPIC_ID.
// * Internal topics (__consumer_offsets) cannot be deleted: INVALID_REQUEST
//   with a message.
// * The deletion is durable (meta.json fsynced) before the partitions are
//   removed and before the response; readers of the removed logs get
//   UNKNOWN_TOPIC_OR_PARTITION.
// * TimeoutMillis, as Kafka: unknown and internal topics are answered at
//   once; a deletion runs in the background and the response waits for it
//   at most TimeoutMillis (<= 0: not at all); one still running then is
//   REQUEST_TIMED_OUT and completes anyway.
//
// Version notes:
// * v1: ThrottleMillis
// * v4: flexible
// * v5: ErrorMessage
// * v6: topics by name or ID

func init() { regAPI(api{key: kmsg.DeleteTopics, min: 0, max: 6, handle: handleDeleteTopics}) }

func handleDeleteTopics(b *Broker, ctx context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)

	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: kmsg.StringPtr(n)})
		}
	}
	type deletion struct {
		i  int // index in resp.Topics
		op *adminOp
	}
	var deletions []deletion
	for i, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var (
			t  *topic
			ok bool
		)
		if tg.name == nil {
			if t, ok = b.topics.getByID(tg.id); !ok {
				st.ErrorCode = kerr.UnknownTopicID.Code
			}
		} else if t, ok = b.topics.get(*tg.name); !ok {
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		if ok && t.internal {
			err := kerrMsg(kerr.InvalidRequest, fmt.Sprintf("internal topic %s cannot be deleted", t.name))
			st.ErrorCode, st.ErrorMessage = errorCode(err), errMessage(err)
		} else if ok {
			st.Topic, st.TopicID = kmsg.StringPtr(t.name), t.id
			name, id := t.name, t.id
			deletions = append(deletions, deletion{i: i, op: b.startAdmin(func() error {
				_, err := b.topics.remove(name, id)
				return err
			})})
		}
		resp.Topics = append(resp.Topics, st)
	}
	ops := make([]*adminOp, len(deletions))
	for j, d := range deletions {
		ops[j] = d.op
	}
	awaitAdmin(ctx, req.TimeoutMillis, ops)
	for _, d := range deletions {
		st := &resp.Topics[d.i]
		done, err := d.op.result()
		if !done {
			err = kerrMsg(kerr.RequestTimedOut, fmt.Sprintf("topic '%s' is still being deleted", *st.Topic))
		}
		st.ErrorCode, st.ErrorMessage = errorCode(err), errMessage(err)
	}
	for _, st := range resp.Topics {
		b.metrics.partitionError("DeleteTopics", st.ErrorCode)
	}
	return resp, nil
}
