package broker

import (
	"context"
	"fmt"

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
// * ValidateOnly (v1+) runs every check and creates nothing.
// * The topic, its logs and its configs are durable when the response is
//   sent (meta.json fsynced).
//
// Version notes:
// * v1: ErrorMessage, ValidateOnly
// * v4: NumPartitions/ReplicationFactor -1 for defaults
// * v5: flexible; the response carries the partition count, replication
//   factor and the resulting configs
// * v7: TopicID in the response

func handleCreateTopics(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(err error) {
			st.ErrorCode = errorCode(err)
			st.ErrorMessage = errMessage(err)
			b.metrics.partitionError("CreateTopics", st.ErrorCode)
			resp.Topics = append(resp.Topics, st)
		}
		if isInternalTopic(rt.Topic) {
			if _, exists := b.topics.get(rt.Topic); exists {
				fail(kerrMsg(kerr.TopicAlreadyExists, fmt.Sprintf("topic '%s' already exists", rt.Topic)))
			} else {
				fail(kerrMsg(kerr.InvalidRequest, fmt.Sprintf("'%s' is an internal topic, created by the broker", rt.Topic)))
			}
			continue
		}
		if count[rt.Topic] > 1 {
			fail(kerrMsg(kerr.InvalidRequest, fmt.Sprintf("create topics request contains topic '%s' more than once", rt.Topic)))
			continue
		}
		parts := rt.NumPartitions
		if len(rt.ReplicaAssignment) > 0 {
			if parts != -1 || (rt.ReplicationFactor != -1 && req.Version >= 4) {
				fail(kerrMsg(kerr.InvalidRequest, "both numPartitions or replicationFactor and replicasAssignments were set"))
				continue
			}
			bad := false
			for i, ra := range rt.ReplicaAssignment {
				if ra.Partition != int32(i) || len(ra.Replicas) != 1 || ra.Replicas[0] != b.cfg.NodeID {
					bad = true
				}
			}
			if bad {
				fail(kerrMsg(kerr.InvalidReplicaAssignment, fmt.Sprintf("replica assignment must list partitions 0..n-1 in order, each on node %d only", b.cfg.NodeID)))
				continue
			}
			parts = int32(len(rt.ReplicaAssignment))
		} else {
			if parts == -1 {
				parts = b.cfg.DefaultPartitions
			}
			if parts <= 0 {
				fail(kerrMsg(kerr.InvalidPartitions, "number of partitions must be larger than 0"))
				continue
			}
			if rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 {
				fail(kerrMsg(kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor: %d larger than available brokers: 1", rt.ReplicationFactor)))
				continue
			}
		}
		configs := map[string]string{}
		var cfgErr error
		for _, c := range rt.Configs {
			v, err := validateTopicConfig(c.Name, c.Value)
			if err != nil {
				cfgErr = kerrMsg(kerr.InvalidConfig, err.Error())
				break
			}
			configs[c.Name] = v
		}
		if cfgErr != nil {
			fail(cfgErr)
			continue
		}
		t, err := b.topics.create(rt.Topic, parts, configs, req.ValidateOnly)
		if err != nil {
			fail(err)
			continue
		}
		if !req.ValidateOnly {
			st.TopicID = t.id
		}
		st.NumPartitions, st.ReplicationFactor = parts, 1
		for _, dc := range describeTopicConfigs(configs, nil, false, false) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = dc.Name, dc.Value, dc.ReadOnly, int8(dc.Source), false
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
