package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7
//
// Behavior:
// * NumPartitions -1 (v4+) means Config.DefaultPartitions; 0 or < -1 is
//   INVALID_PARTITIONS. ReplicationFactor -1 means 1; anything but 1 or -1
//   is INVALID_REPLICATION_FACTOR (one node).
// * A ReplicaAssignment fixes the partition count (NumPartitions must be
//   -1, else INVALID_REQUEST) and may only name this node
//   (INVALID_REPLICA_ASSIGNMENT).
// * Configs are validated (unknown name, bad type or range: INVALID_CONFIG
//   with a message); they become the topic's overrides.
// * Invalid names: INVALID_TOPIC_EXCEPTION; existing topic:
//   TOPIC_ALREADY_EXISTS; a topic named twice in one request:
//   INVALID_REQUEST for each.
// * Internal topics (__consumer_offsets, __transaction_state) are created
//   by the broker only: TOPIC_ALREADY_EXISTS if present, else
//   INVALID_REQUEST.
// * ValidateOnly (v1+) runs every check and creates nothing, and answers
//   at once.
// * TimeoutMillis, as Kafka (KIP-4): the checks above are answered at once;
//   a creation that passed them runs in the background, and the response
//   waits for it at most TimeoutMillis. One still running then (always, for
//   TimeoutMillis <= 0: "don't wait") is REQUEST_TIMED_OUT, and the topic
//   appears when its creation completes. Topics of one request are created
//   concurrently; partitions are opened by a bounded pool.
// * A successful topic, its logs and its configs are durable when the
//   response is sent (meta.json fsynced).
//
// Version notes:
// * v1: ErrorMessage, ValidateOnly
// * v4: NumPartitions/ReplicationFactor -1 for defaults
// * v5: flexible; the response carries the partition count, replication
//   factor and the resulting configs
// * v7: TopicID in the response

func init() { regAPI(api{key: kmsg.CreateTopics, min: 0, max: 7, handle: handleCreateTopics}) }

func handleCreateTopics(b *Broker, ctx context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	type creation struct {
		i       int // index in resp.Topics
		t       *topic
		parts   int32
		configs map[string]string
		op      *adminOp
	}
	var creations []creation
	// succeed fills the success fields of resp.Topics[i].
	succeed := func(i int, t *topic, parts int32, configs map[string]string) {
		st := &resp.Topics[i]
		if !req.ValidateOnly {
			st.TopicID = t.id
		}
		st.NumPartitions, st.ReplicationFactor = parts, 1
		for _, dc := range describeTopicConfigs(configs, nil, false, false) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = dc.Name, dc.Value, dc.ReadOnly, int8(dc.Source), false
			st.Configs = append(st.Configs, c)
		}
	}
	for i, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		resp.Topics = append(resp.Topics, st)
		parts, configs, err := b.checkCreatableTopic(req, rt, count[rt.Topic])
		if err != nil {
			setTopicError(&resp.Topics[i], err)
			continue
		}
		t, err := b.topics.beginCreate(rt.Topic, parts, configs, req.ValidateOnly, false)
		if err != nil {
			setTopicError(&resp.Topics[i], err)
			continue
		}
		if req.ValidateOnly {
			succeed(i, t, parts, configs)
			continue
		}
		creations = append(creations, creation{i: i, t: t, parts: parts, configs: configs,
			op: b.startAdmin(func() error { return b.topics.finishCreate(t, parts) })})
	}
	ops := make([]*adminOp, len(creations))
	for j, c := range creations {
		ops[j] = c.op
	}
	awaitAdmin(ctx, req.TimeoutMillis, ops)
	for _, c := range creations {
		switch done, err := c.op.result(); {
		case !done:
			setTopicError(&resp.Topics[c.i], kerrMsg(kerr.RequestTimedOut, fmt.Sprintf("topic '%s' is still being created", c.t.name)))
		case err != nil:
			setTopicError(&resp.Topics[c.i], err)
		default:
			succeed(c.i, c.t, c.parts, c.configs)
		}
	}
	for _, st := range resp.Topics {
		b.metrics.partitionError("CreateTopics", st.ErrorCode)
	}
	return resp, nil
}

func setTopicError(st *kmsg.CreateTopicsResponseTopic, err error) {
	st.ErrorCode, st.ErrorMessage = errorCode(err), errMessage(err)
}

// checkCreatableTopic runs the request-level checks of one topic (before
// the registry's: name, existence) and returns its partition count and
// config overrides. named is how often the request names the topic.
func (b *Broker) checkCreatableTopic(req *kmsg.CreateTopicsRequest, rt kmsg.CreateTopicsRequestTopic, named int) (int32, map[string]string, error) {
	if isInternalTopic(rt.Topic) {
		if _, exists := b.topics.get(rt.Topic); exists {
			return 0, nil, kerrMsg(kerr.TopicAlreadyExists, fmt.Sprintf("topic '%s' already exists", rt.Topic))
		}
		return 0, nil, kerrMsg(kerr.InvalidRequest, fmt.Sprintf("'%s' is an internal topic, created by the broker", rt.Topic))
	}
	if named > 1 {
		return 0, nil, kerrMsg(kerr.InvalidRequest, fmt.Sprintf("create topics request contains topic '%s' more than once", rt.Topic))
	}
	parts := rt.NumPartitions
	if len(rt.ReplicaAssignment) > 0 {
		if parts != -1 || (rt.ReplicationFactor != -1 && req.Version >= 4) {
			return 0, nil, kerrMsg(kerr.InvalidRequest, "both numPartitions or replicationFactor and replicasAssignments were set")
		}
		for i, ra := range rt.ReplicaAssignment {
			if ra.Partition != int32(i) || len(ra.Replicas) != 1 || ra.Replicas[0] != b.cfg.NodeID {
				return 0, nil, kerrMsg(kerr.InvalidReplicaAssignment, fmt.Sprintf("replica assignment must list partitions 0..n-1 in order, each on node %d only", b.cfg.NodeID))
			}
		}
		parts = int32(len(rt.ReplicaAssignment))
	} else {
		if parts == -1 {
			parts = b.cfg.DefaultPartitions
		}
		if parts <= 0 {
			return 0, nil, kerrMsg(kerr.InvalidPartitions, "number of partitions must be larger than 0")
		}
		if rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 {
			return 0, nil, kerrMsg(kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor: %d larger than available brokers: 1", rt.ReplicationFactor))
		}
	}
	configs := map[string]string{}
	for _, c := range rt.Configs {
		v, err := validateTopicConfig(c.Name, c.Value)
		if err != nil {
			return 0, nil, kerrMsg(kerr.InvalidConfig, err.Error())
		}
		configs[c.Name] = v
	}
	return parts, configs, nil
}

// adminOp is an admin change (topic creation, deletion, new partitions)
// running in the background, so that a request can answer
// REQUEST_TIMED_OUT while the change completes, as Kafka does.
type adminOp struct {
	done chan struct{}
	err  error // set before done is closed
}

// startAdmin runs fn in a goroutine that Broker.Close waits for (the
// caller is a request handler, so Close has not finished waiting yet).
func (b *Broker) startAdmin(fn func() error) *adminOp {
	op := &adminOp{done: make(chan struct{})}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer close(op.done)
		op.err = fn()
	}()
	return op
}

// result reports whether the op has finished, and its error if so.
func (op *adminOp) result() (bool, error) {
	select {
	case <-op.done:
		return true, op.err
	default:
		return false, nil
	}
}

// awaitAdmin waits until every op has finished, timeoutMillis has passed
// (<= 0: not at all), or ctx is done.
func awaitAdmin(ctx context.Context, timeoutMillis int32, ops []*adminOp) {
	if timeoutMillis <= 0 || len(ops) == 0 {
		return
	}
	timer := time.NewTimer(time.Duration(timeoutMillis) * time.Millisecond)
	defer timer.Stop()
	for _, op := range ops {
		select {
		case <-op.done:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
