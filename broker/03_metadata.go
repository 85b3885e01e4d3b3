package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-13
//
// Behavior:
// * One broker (this node) is the leader, sole replica and ISR of every
//   partition; leader epoch is always 0.
// * All topics (v0: empty list; v1+: null list) lists every topic, the
//   internal __consumer_offsets and __transaction_state included with
//   IsInternal set (v1+), as Kafka does: clients skip internal topics in
//   regex subscriptions by that flag (exclude.internal.topics).
// * An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, unless auto-create is
//   on (Config.AutoCreateTopics) and the client allows it (v4+:
//   AllowAutoTopicCreation; before v4 always), in which case it is created
//   with DefaultPartitions and returned normally. Internal topic names are
//   never auto-created (the broker creates them with their own configs).
// * An invalid name is INVALID_TOPIC_EXCEPTION; a topic asked by ID that
//   does not exist is UNKNOWN_TOPIC_ID.
// * Authorized operations (v8+, KIP-430) are answered when asked, as Kafka
//   without an authorizer answers them: every operation the resource type
//   supports (topicAuthorizedOps, clusterAuthorizedOps); when not asked,
//   INT32_MIN ("not provided").
//
// Version notes:
// * v1: controller ID, rack, IsInternal; null topics means all
// * v2: ClusterID
// * v4: AllowAutoTopicCreation
// * v5: OfflineReplicas
// * v7: LeaderEpoch
// * v9: flexible
// * v10: topic IDs
// * v13: top-level ErrorCode

func init() { regAPI(api{key: kmsg.Metadata, min: 0, max: 13, handle: handleMetadata}) }

func handleMetadata(b *Broker, _ context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	rb := kmsg.NewMetadataResponseBroker()
	rb.NodeID = b.cfg.NodeID
	rb.Host, rb.Port = b.endpoint(s)
	resp.Brokers = []kmsg.MetadataResponseBroker{rb}
	resp.ClusterID = kmsg.StringPtr(b.clusterID)
	resp.ControllerID = b.cfg.NodeID
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAuthorizedOps
	}
	topicOps := req.Version >= 8 && req.IncludeTopicAuthorizedOperations
	metadataTopic := func(t *topic) kmsg.MetadataResponseTopic {
		mt := b.metadataTopic(t)
		if topicOps {
			mt.AuthorizedOperations = topicAuthorizedOps
		}
		return mt
	}

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.topics.all() {
			resp.Topics = append(resp.Topics, metadataTopic(t))
		}
		return resp, nil
	}

	allowCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var (
			t  *topic
			ok bool
		)
		if rt.Topic == nil || (req.Version >= 10 && rt.TopicID != [16]byte{}) {
			t, ok = b.topics.getByID(rt.TopicID)
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		} else {
			name := *rt.Topic
			t, ok = b.topics.get(name)
			if !ok {
				var err error
				if err = validateTopicName(name); err == nil {
					if allowCreate && !isInternalTopic(name) {
						t, err = b.autoCreate(name)
					} else {
						err = kerr.UnknownTopicOrPartition
					}
				}
				if err != nil {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic = kmsg.StringPtr(name)
					mt.ErrorCode = errorCode(err)
					if topicOps && mt.ErrorCode == kerr.UnknownTopicOrPartition.Code {
						// As Kafka: a valid name's operations are known
						// before its topic exists.
						mt.AuthorizedOperations = topicAuthorizedOps
					}
					resp.Topics = append(resp.Topics, mt)
					continue
				}
			}
		}
		resp.Topics = append(resp.Topics, metadataTopic(t))
	}
	return resp, nil
}

// Kafka's ACL operation codes (AclOperation) as KIP-430 bitfields: bit n
// set = operation n allowed. Without an authorizer Kafka allows every
// operation a resource type supports (AclEntry.supportedOperations).
const (
	aclRead, aclWrite, aclCreate, aclDelete, aclAlter, aclDescribe = 3, 4, 5, 6, 7, 8
	aclClusterAction, aclDescribeConfigs, aclAlterConfigs          = 9, 10, 11
	aclIdempotentWrite                                             = 12

	topicAuthorizedOps int32 = 1<<aclRead | 1<<aclWrite | 1<<aclCreate | 1<<aclDelete | 1<<aclAlter |
		1<<aclDescribe | 1<<aclDescribeConfigs | 1<<aclAlterConfigs
	clusterAuthorizedOps int32 = 1<<aclCreate | 1<<aclClusterAction | 1<<aclDescribeConfigs |
		1<<aclAlterConfigs | 1<<aclIdempotentWrite | 1<<aclAlter | 1<<aclDescribe
)

func (b *Broker) metadataTopic(t *topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.name)
	mt.TopicID = t.id
	mt.IsInternal = t.internal
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(t.parts))
	for p := range t.parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(p)
		mp.Leader = b.cfg.NodeID
		mp.LeaderEpoch = leaderEpoch
		mp.Replicas = []int32{b.cfg.NodeID}
		mp.ISR = []int32{b.cfg.NodeID}
		mp.OfflineReplicas = []int32{}
		mt.Partitions[p] = mp
	}
	return mt
}

// autoCreate creates a topic with the default partition count; a concurrent
// creation of the same topic is not an error.
func (b *Broker) autoCreate(name string) (*topic, error) {
	t, err := b.topics.create(name, b.cfg.DefaultPartitions, nil, false)
	if err != nil {
		if existing, ok := b.topics.get(name); ok {
			return existing, nil
		}
		return nil, err
	}
	b.metrics.topicsAutoCreated.Inc()
	return t, nil
}
