package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
)

// The authorization table: for every API key, what Kafka's authorizer
// requires (KafkaApis and the "Operations and Resources on Protocols"
// table of Kafka's documentation) and the code a refusal gets.
// TestAuthzRulesCoverEveryAPI fails when a served API has no entry here;
// TestAuthzMatrix runs every entry with and without its ACL.
//
// A rule's check either returns the answer to a wholly refused request, or
// edits the request in place (removing refused items) and returns a merge
// that adds the refused items to the handler's response.

type authzRule struct {
	needs string // what the rule requires, for readers and test names
	check func(a *azReq, req kmsg.Request) (deny kmsg.Response, merge func(kmsg.Response))
}

const (
	codeTopic   = 29 // TOPIC_AUTHORIZATION_FAILED
	codeGroup   = 30 // GROUP_AUTHORIZATION_FAILED
	codeCluster = 31 // CLUSTER_AUTHORIZATION_FAILED
	codeTxnID   = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
)

var _ = [1]struct{}{}[kerr.TopicAuthorizationFailed.Code-codeTopic+kerr.GroupAuthorizationFailed.Code-codeGroup+
	kerr.ClusterAuthorizationFailed.Code-codeCluster+kerr.TransactionalIDAuthorizationFailed.Code-codeTxnID]

var authzRules = map[kmsg.Key]authzRule{
	kmsg.ApiVersions:      {needs: "nothing"},
	kmsg.SASLHandshake:    {needs: "nothing"},
	kmsg.SASLAuthenticate: {needs: "nothing"},

	kmsg.Produce:                      {"WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, whole request); WRITE on each topic", azProduce},
	kmsg.Fetch:                        {"CLUSTER_ACTION on the cluster for a replica; READ on each topic", azFetch},
	kmsg.ListOffsets:                  {"DESCRIBE on each topic", azListOffsets},
	kmsg.Metadata:                     {"DESCRIBE on each topic (all-topics lists are filtered); CREATE on the cluster or topic to auto-create", azMetadata},
	kmsg.OffsetCommit:                 {"READ on the group; READ on each topic", azOffsetCommit},
	kmsg.OffsetFetch:                  {"DESCRIBE on the group; DESCRIBE on each topic (all-partition answers are filtered)", azOffsetFetch},
	kmsg.FindCoordinator:              {"DESCRIBE on the group or transactional id", azFindCoordinator},
	kmsg.JoinGroup:                    {"READ on the group", azGroupRead},
	kmsg.Heartbeat:                    {"READ on the group", azGroupRead},
	kmsg.LeaveGroup:                   {"READ on the group", azGroupRead},
	kmsg.SyncGroup:                    {"READ on the group", azGroupRead},
	kmsg.DescribeGroups:               {"DESCRIBE on each group", azDescribeGroups},
	kmsg.ListGroups:                   {"DESCRIBE on the cluster, else the groups are filtered by DESCRIBE", azListGroups},
	kmsg.CreateTopics:                 {"CREATE on the cluster or on each topic", azCreateTopics},
	kmsg.DeleteTopics:                 {"DELETE on each topic", azDeleteTopics},
	kmsg.DeleteRecords:                {"DELETE on each topic", azDeleteRecords},
	kmsg.InitProducerID:               {"WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster or WRITE on some topic", azInitProducerID},
	kmsg.OffsetForLeaderEpoch:         {"CLUSTER_ACTION on the cluster for a replica; DESCRIBE on each topic", azOffsetForLeaderEpoch},
	kmsg.AddPartitionsToTxn:           {"WRITE on the transactional id and each topic (v0-3); CLUSTER_ACTION on the cluster (v4+)", azAddPartitionsToTxn},
	kmsg.AddOffsetsToTxn:              {"WRITE on the transactional id; READ on the group", azAddOffsetsToTxn},
	kmsg.EndTxn:                       {"WRITE on the transactional id", azEndTxn},
	kmsg.WriteTxnMarkers:              {"CLUSTER_ACTION on the cluster", azWriteTxnMarkers},
	kmsg.TxnOffsetCommit:              {"WRITE on the transactional id; READ on the group; READ on each topic", azTxnOffsetCommit},
	kmsg.DescribeACLs:                 {"DESCRIBE on the cluster", azDescribeACLs},
	kmsg.CreateACLs:                   {"ALTER on the cluster", azCreateACLs},
	kmsg.DeleteACLs:                   {"ALTER on the cluster", azDeleteACLs},
	kmsg.DescribeConfigs:              {"DESCRIBE_CONFIGS on each topic, or on the cluster for broker resources", azDescribeConfigs},
	kmsg.AlterConfigs:                 {"ALTER_CONFIGS on each topic, or on the cluster for broker resources", azAlterConfigs},
	kmsg.IncrementalAlterConfigs:      {"ALTER_CONFIGS on each topic, or on the cluster for broker resources", azIncrementalAlterConfigs},
	kmsg.DescribeLogDirs:              {"DESCRIBE on the cluster", azDescribeLogDirs},
	kmsg.CreatePartitions:             {"ALTER on each topic", azCreatePartitions},
	kmsg.DeleteGroups:                 {"DELETE on each group", azDeleteGroups},
	kmsg.OffsetDelete:                 {"DELETE on the group; READ on each topic", azOffsetDelete},
	kmsg.DescribeClientQuotas:         {"DESCRIBE_CONFIGS on the cluster", azDescribeClientQuotas},
	kmsg.AlterClientQuotas:            {"ALTER_CONFIGS on the cluster", azAlterClientQuotas},
	kmsg.DescribeUserSCRAMCredentials: {"DESCRIBE on the cluster", azDescribeUserSCRAM},
	kmsg.AlterUserSCRAMCredentials:    {"ALTER on the cluster", azAlterUserSCRAM},
	kmsg.DescribeCluster:              {"DESCRIBE on the cluster", azDescribeCluster},
	kmsg.DescribeProducers:            {"READ on each topic", azDescribeProducers},
	kmsg.DescribeTransactions:         {"DESCRIBE on each transactional id (topics filtered by DESCRIBE)", azDescribeTransactions},
	kmsg.ListTransactions:             {"transactional ids filtered by DESCRIBE", azListTransactions},
	kmsg.ConsumerGroupHeartbeat:       {"READ on the group; DESCRIBE on each subscribed topic", azConsumerGroupHeartbeat},
	kmsg.ConsumerGroupDescribe:        {"DESCRIBE on each group", azConsumerGroupDescribe},
}

// Most rules check each item of a request (a topic, a group, a
// transactional id) on its own: refuseItems takes the refused items out of
// the request before the handler runs, and the rule's completion appends
// their error entries to the handler's response, so a refused item is
// never acted on and always answered.

// refuseItems splits a request's items into those code allows (code 0:
// kept, in order, in items' array) and the response entries of the others,
// made by entry with their error code.
func refuseItems[T, R any](items []T, code func(T) int16, entry func(T, int16) R) (kept []T, refused []R) {
	kept = items[:0]
	for _, it := range items {
		if c := code(it); c != 0 {
			refused = append(refused, entry(it, c))
			continue
		}
		kept = append(kept, it)
	}
	return kept, refused
}

// unless is code when ok is false, else 0 (allowed).
func unless(ok bool, code int16) int16 {
	if ok {
		return 0
	}
	return code
}

// topicCode checks op on a topic named by name or, when id is set, by its
// ID: TOPIC_AUTHORIZATION_FAILED when refused, 0 when allowed or when the
// ID is unknown (the handler answers UNKNOWN_TOPIC_ID, which reveals
// nothing).
func topicCode(a *azReq, op authz.Operation, name string, id [16]byte) int16 {
	if n, ok := a.topicName(name, id); ok && !a.topic(op, n) {
		return codeTopic
	}
	return 0
}

// --- Produce, Fetch, ListOffsets, Metadata ---

func azProduce(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ProduceRequest)
	fail := func(t kmsg.ProduceRequestTopic, code int16) kmsg.ProduceResponseTopic {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	if req.TransactionID != nil && !a.txnID(authz.OpWrite, *req.TransactionID) {
		a.closeAfter = req.Acks == 0
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, fail(t, codeTxnID))
		}
		return resp, nil
	}
	var denied []kmsg.ProduceResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.ProduceRequestTopic) int16 {
		return topicCode(a, authz.OpWrite, t.Topic, t.TopicID)
	}, fail)
	a.closeAfter = req.Acks == 0 && len(denied) > 0
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ProduceResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func fetchReplica(req *kmsg.FetchRequest) bool {
	if req.Version >= 15 {
		return req.ReplicaState.ID >= 0
	}
	return req.ReplicaID >= 0
}

func azFetch(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FetchRequest)
	fail := func(p int32) kmsg.FetchResponseTopicPartition {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p, codeTopic
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		return rp
	}
	failTopic := func(t kmsg.FetchRequestTopic, _ int16) kmsg.FetchResponseTopic {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, fail(p.Partition))
		}
		return rt
	}
	if fetchReplica(req) {
		if a.cluster(authz.OpClusterAction) {
			return nil, nil
		}
		// A follower without CLUSTER_ACTION gets every partition it
		// asked for refused with TOPIC_AUTHORIZATION_FAILED (Kafka).
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, failTopic(t, codeTopic))
		}
		return resp, nil
	}
	var denied []kmsg.FetchResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.FetchRequestTopic) int16 {
		return topicCode(a, authz.OpRead, t.Topic, t.TopicID)
	}, failTopic)
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.FetchResponse)
		// An incremental fetch session answers partitions the request
		// did not name: those are checked here, so an ACL removed since
		// the session began stops the data too.
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if name, ok := a.topicName(t.Topic, t.TopicID); ok && !a.topic(authz.OpRead, name) {
				for j := range t.Partitions {
					t.Partitions[j] = fail(t.Partitions[j].Partition)
				}
			}
		}
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azListOffsets(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	var denied []kmsg.ListOffsetsResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.ListOffsetsRequestTopic) int16 {
		return unless(a.topic(authz.OpDescribe, t.Topic), codeTopic)
	}, func(t kmsg.ListOffsetsRequestTopic, code int16) kmsg.ListOffsetsResponseTopic {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.Timestamp, rp.Offset = p.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListOffsetsResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azMetadata(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.MetadataRequest)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) // as 03_metadata.go
	autoCreate := a.b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	var denied []kmsg.MetadataResponseTopic
	if !all {
		req.Topics, denied = refuseItems(req.Topics, func(t kmsg.MetadataRequestTopic) int16 {
			name, ok := a.topicName(deref(t.Topic), t.TopicID)
			if !ok {
				return 0
			}
			_, exists := a.b.topics.get(name)
			return unless(a.topic(authz.OpDescribe, name) &&
				(exists || !autoCreate || a.cluster(authz.OpCreate) || a.topic(authz.OpCreate, name)), codeTopic)
		}, func(t kmsg.MetadataRequestTopic, code int16) kmsg.MetadataResponseTopic {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			rt.Partitions = []kmsg.MetadataResponseTopicPartition{}
			return rt
		})
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		if all {
			resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool {
				return t.Topic != nil && !a.topic(authz.OpDescribe, *t.Topic)
			})
		}
		if req.IncludeTopicAuthorizedOperations {
			for i := range resp.Topics {
				// A topic that does not exist gets its operations
				// too when the principal may describe the name, as
				// from Kafka: what a name's ACLs allow is known before
				// the topic is (the schema registry asks this of its
				// subjects' topics).
				if t := &resp.Topics[i]; t.Topic != nil && (t.ErrorCode == 0 || t.ErrorCode == kerr.UnknownTopicOrPartition.Code) {
					t.AuthorizedOperations = a.opsBits(authz.ResourceTopic, *t.Topic)
				}
			}
		}
		if req.IncludeClusterAuthorizedOperations {
			resp.AuthorizedOperations = a.clusterOps()
		}
		resp.Topics = append(resp.Topics, denied...)
	}
}

// --- groups ---

func azOffsetCommit(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	fail := func(t kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	if !a.group(authz.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, fail(t, codeGroup))
		}
		return resp, nil
	}
	var denied []kmsg.OffsetCommitResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.OffsetCommitRequestTopic) int16 {
		return topicCode(a, authz.OpRead, t.Topic, t.TopicID)
	}, fail)
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetCommitResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azOffsetFetch(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if req.Version < 8 {
		if !a.group(authz.OpDescribe, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = codeGroup
			if req.Version < 2 {
				// No top-level error before v2: every partition asked
				// for carries it (Kafka's getErrorResponse).
				for _, t := range req.Topics {
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseTopicPartition()
						rp.Partition, rp.ErrorCode, rp.Offset = p, codeGroup, -1
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
			}
			return resp, nil
		}
		all := req.Topics == nil
		var denied []kmsg.OffsetFetchResponseTopic
		if !all {
			req.Topics, denied = refuseItems(req.Topics, func(t kmsg.OffsetFetchRequestTopic) int16 {
				return unless(a.topic(authz.OpDescribe, t.Topic), codeTopic)
			}, func(t kmsg.OffsetFetchRequestTopic, code int16) kmsg.OffsetFetchResponseTopic {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.Offset = p, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				return rt
			})
		}
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.OffsetFetchResponse)
			if all {
				resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
					return !a.topic(authz.OpDescribe, t.Topic)
				})
			}
			resp.Topics = append(resp.Topics, denied...)
		}
	}
	// v8+: several groups, each with its own error.
	var deniedGroups []kmsg.OffsetFetchResponseGroup
	deniedTopics := map[string][]kmsg.OffsetFetchResponseGroupTopic{}
	allTopics := map[string]bool{}
	kept := req.Groups[:0]
	for _, g := range req.Groups {
		if !a.group(authz.OpDescribe, g.Group) {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, codeGroup
			deniedGroups = append(deniedGroups, rg)
			continue
		}
		if g.Topics == nil {
			allTopics[g.Group] = true
		} else {
			g.Topics, deniedTopics[g.Group] = refuseItems(g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) int16 {
				return topicCode(a, authz.OpDescribe, t.Topic, t.TopicID)
			}, func(t kmsg.OffsetFetchRequestGroupTopic, code int16) kmsg.OffsetFetchResponseGroupTopic {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.ErrorCode, rp.Offset = p, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				return rt
			})
		}
		kept = append(kept, g)
	}
	req.Groups = kept
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if allTopics[g.Group] {
				g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
					return topicCode(a, authz.OpDescribe, t.Topic, t.TopicID) != 0
				})
			}
			g.Topics = append(g.Topics, deniedTopics[g.Group]...)
		}
		resp.Groups = append(resp.Groups, deniedGroups...)
	}
}

func azFindCoordinator(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	allowed := func(key string) (bool, int16) {
		switch req.CoordinatorType {
		case 0:
			return a.group(authz.OpDescribe, key), codeGroup
		case 1:
			return a.txnID(authz.OpDescribe, key), codeTxnID
		}
		return true, 0 // unknown key type: the handler answers INVALID_REQUEST
	}
	if req.Version < 4 {
		if ok, code := allowed(req.CoordinatorKey); !ok {
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID = code, -1
			return resp, nil
		}
		return nil, nil
	}
	var denied []kmsg.FindCoordinatorResponseCoordinator
	req.CoordinatorKeys, denied = refuseItems(req.CoordinatorKeys, func(k string) int16 {
		return unless(allowed(k))
	}, func(k string, code int16) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.ErrorCode, c.NodeID = k, code, -1
		return c
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.FindCoordinatorResponse)
		resp.Coordinators = append(resp.Coordinators, denied...)
	}
}

// azGroupRead: JoinGroup, Heartbeat, LeaveGroup, SyncGroup.
func azGroupRead(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	var group string
	switch req := kreq.(type) {
	case *kmsg.JoinGroupRequest:
		group = req.Group
	case *kmsg.HeartbeatRequest:
		group = req.Group
	case *kmsg.LeaveGroupRequest:
		group = req.Group
	case *kmsg.SyncGroupRequest:
		group = req.Group
	}
	if a.group(authz.OpRead, group) {
		return nil, nil
	}
	resp := kreq.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = codeGroup, -1
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = codeGroup
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = codeGroup
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = codeGroup
	}
	return resp, nil
}

func azDescribeGroups(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	var denied []kmsg.DescribeGroupsResponseGroup
	req.Groups, denied = refuseItems(req.Groups, func(g string) int16 {
		return unless(a.group(authz.OpDescribe, g), codeGroup)
	}, func(g string, code int16) kmsg.DescribeGroupsResponseGroup {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		return rg
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeGroupsResponse)
		if req.IncludeAuthorizedOperations {
			for i := range resp.Groups {
				resp.Groups[i].AuthorizedOperations = a.opsBits(authz.ResourceGroup, resp.Groups[i].Group)
			}
		}
		resp.Groups = append(resp.Groups, denied...)
	}
}

func azListGroups(a *azReq, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpDescribe) {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListGroupsResponse)
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !a.group(authz.OpDescribe, g.Group)
		})
	}
}

func azDeleteGroups(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	var denied []kmsg.DeleteGroupsResponseGroup
	req.Groups, denied = refuseItems(req.Groups, func(g string) int16 {
		return unless(a.group(authz.OpDelete, g), codeGroup)
	}, func(g string, code int16) kmsg.DeleteGroupsResponseGroup {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		return rg
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteGroupsResponse)
		resp.Groups = append(resp.Groups, denied...)
	}
}

func azOffsetDelete(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if !a.group(authz.OpDelete, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = codeGroup
		return resp, nil
	}
	var denied []kmsg.OffsetDeleteResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) int16 {
		return unless(a.topic(authz.OpRead, t.Topic), codeTopic)
	}, func(t kmsg.OffsetDeleteRequestTopic, code int16) kmsg.OffsetDeleteResponseTopic {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetDeleteResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

// heartbeatCode is the refusal of a KIP-848 or KIP-932 heartbeat: READ on
// the group, then DESCRIBE on every subscribed topic (0: allowed).
func heartbeatCode(a *azReq, group string, topics []string) int16 {
	if !a.group(authz.OpRead, group) {
		return codeGroup
	}
	for _, t := range topics {
		if !a.topic(authz.OpDescribe, t) {
			return codeTopic
		}
	}
	return 0
}

func azConsumerGroupHeartbeat(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	code := heartbeatCode(a, req.Group, req.SubscribedTopicNames)
	if code == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	return resp, nil
}

func azConsumerGroupDescribe(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	var denied []kmsg.ConsumerGroupDescribeResponseGroup
	req.Groups, denied = refuseItems(req.Groups, func(g string) int16 {
		return unless(a.group(authz.OpDescribe, g), codeGroup)
	}, func(g string, code int16) kmsg.ConsumerGroupDescribeResponseGroup {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		return rg
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ConsumerGroupDescribeResponse)
		if req.IncludeAuthorizedOperations {
			for i := range resp.Groups {
				resp.Groups[i].AuthorizedOperations = a.opsBits(authz.ResourceGroup, resp.Groups[i].Group)
			}
		}
		resp.Groups = append(resp.Groups, denied...)
	}
}

// --- topics admin ---

func azCreateTopics(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	clusterCreate := a.cluster(authz.OpCreate)
	var denied []kmsg.CreateTopicsResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.CreateTopicsRequestTopic) int16 {
		return unless(clusterCreate || a.topic(authz.OpCreate, t.Topic), codeTopic)
	}, func(t kmsg.CreateTopicsRequestTopic, code int16) kmsg.CreateTopicsResponseTopic {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, code, -1, -1
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.CreateTopicsResponse)
		// The configs of a created topic are returned only to a principal
		// that may describe them (Kafka's TopicConfigErrorCode).
		for i := range resp.Topics {
			if t := &resp.Topics[i]; t.ErrorCode == 0 && !a.topic(authz.OpDescribeConfigs, t.Topic) {
				t.ConfigErrorCode, t.Configs = codeTopic, nil
			}
		}
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azDeleteTopics(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	var denied []kmsg.DeleteTopicsResponseTopic
	entry := func(name *string, id [16]byte, code int16) kmsg.DeleteTopicsResponseTopic {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = name, id, code
		return rt
	}
	if req.Version < 6 {
		req.TopicNames, denied = refuseItems(req.TopicNames, func(n string) int16 {
			return unless(a.topic(authz.OpDelete, n), codeTopic)
		}, func(n string, code int16) kmsg.DeleteTopicsResponseTopic {
			return entry(kmsg.StringPtr(n), [16]byte{}, code)
		})
	} else {
		req.Topics, denied = refuseItems(req.Topics, func(t kmsg.DeleteTopicsRequestTopic) int16 {
			return topicCode(a, authz.OpDelete, deref(t.Topic), t.TopicID)
		}, func(t kmsg.DeleteTopicsRequestTopic, code int16) kmsg.DeleteTopicsResponseTopic {
			return entry(t.Topic, t.TopicID, code)
		})
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteTopicsResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azDeleteRecords(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	var denied []kmsg.DeleteRecordsResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.DeleteRecordsRequestTopic) int16 {
		return unless(a.topic(authz.OpDelete, t.Topic), codeTopic)
	}, func(t kmsg.DeleteRecordsRequestTopic, code int16) kmsg.DeleteRecordsResponseTopic {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteRecordsResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azCreatePartitions(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	var denied []kmsg.CreatePartitionsResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) int16 {
		return unless(a.topic(authz.OpAlter, t.Topic), codeTopic)
	}, func(t kmsg.CreatePartitionsRequestTopic, code int16) kmsg.CreatePartitionsResponseTopic {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.CreatePartitionsResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azOffsetForLeaderEpoch(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	fail := func(t kmsg.OffsetForLeaderEpochRequestTopic, code int16) kmsg.OffsetForLeaderEpochResponseTopic {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	// Brokers use it with CLUSTER_ACTION; consumers (KIP-320) with
	// DESCRIBE on the topic. Either suffices, whatever the replica id.
	if a.cluster(authz.OpClusterAction) {
		return nil, nil
	}
	var denied []kmsg.OffsetForLeaderEpochResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) int16 {
		return unless(a.topic(authz.OpDescribe, t.Topic), codeTopic)
	}, fail)
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetForLeaderEpochResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azDescribeProducers(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	var denied []kmsg.DescribeProducersResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.DescribeProducersRequestTopic) int16 {
		return unless(a.topic(authz.OpRead, t.Topic), codeTopic)
	}, func(t kmsg.DescribeProducersRequestTopic, code int16) kmsg.DescribeProducersResponseTopic {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeProducersResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

// --- configs ---

// configResourceCode checks op on a config resource — a topic, or the
// cluster for broker (4) and broker-logger (8) resources — and returns the
// refusal's error code (0: allowed). Other types are left to the handler
// (it refuses them).
func configResourceCode(a *azReq, op authz.Operation, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !a.topic(op, name) {
			return codeTopic
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !a.cluster(op) {
			return codeCluster
		}
	}
	return 0
}

func azDescribeConfigs(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	var denied []kmsg.DescribeConfigsResponseResource
	req.Resources, denied = refuseItems(req.Resources,
		func(r kmsg.DescribeConfigsRequestResource) int16 {
			return configResourceCode(a, authz.OpDescribeConfigs, r.ResourceType, r.ResourceName)
		},
		func(r kmsg.DescribeConfigsRequestResource, code int16) kmsg.DescribeConfigsResponseResource {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			return rr
		})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	}
}

func azAlterConfigs(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	var denied []kmsg.AlterConfigsResponseResource
	req.Resources, denied = refuseItems(req.Resources,
		func(r kmsg.AlterConfigsRequestResource) int16 {
			return configResourceCode(a, authz.OpAlterConfigs, r.ResourceType, r.ResourceName)
		},
		func(r kmsg.AlterConfigsRequestResource, code int16) kmsg.AlterConfigsResponseResource {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			return rr
		})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.AlterConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	}
}

func azIncrementalAlterConfigs(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	var denied []kmsg.IncrementalAlterConfigsResponseResource
	req.Resources, denied = refuseItems(req.Resources,
		func(r kmsg.IncrementalAlterConfigsRequestResource) int16 {
			return configResourceCode(a, authz.OpAlterConfigs, r.ResourceType, r.ResourceName)
		},
		func(r kmsg.IncrementalAlterConfigsRequestResource, code int16) kmsg.IncrementalAlterConfigsResponseResource {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			return rr
		})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	}
}

// --- cluster-level ---

func azDescribeACLs(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpDescribe) {
		return nil, nil
	}
	resp := kreq.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = codeCluster
	return resp, nil
}

func azCreateACLs(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpAlter) {
		return nil, nil
	}
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = codeCluster
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func azDeleteACLs(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpAlter) {
		return nil, nil
	}
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = codeCluster
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func azDescribeLogDirs(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpDescribe) {
		return nil, nil
	}
	// Before v3 the response has no error code: Kafka answers no dirs.
	resp := kreq.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = codeCluster
	return resp, nil
}

// azDescribeCluster: as Metadata, anyone may describe the cluster; the
// authorized operations are returned to a principal with DESCRIBE on the
// cluster, 0 to the others (Kafka's handleDescribeCluster).
func azDescribeCluster(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	if !req.IncludeClusterAuthorizedOperations {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		r.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = a.clusterOps()
	}
}

func azDescribeClientQuotas(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpDescribeConfigs) {
		return nil, nil
	}
	resp := kreq.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.ErrorCode = codeCluster
	return resp, nil
}

func azAlterClientQuotas(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpAlterConfigs) {
		return nil, nil
	}
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode = codeCluster
		for _, c := range e.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			re.Entity = append(re.Entity, rc)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}

func azDescribeUserSCRAM(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpDescribe) {
		return nil, nil
	}
	resp := kreq.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.ErrorCode = codeCluster
	return resp, nil
}

func azAlterUserSCRAM(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpAlter) {
		return nil, nil
	}
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, codeCluster
		resp.Results = append(resp.Results, r)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp, nil
}

// --- transactions ---

func azInitProducerID(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	code := int16(0)
	if req.TransactionalID != nil {
		if !a.txnID(authz.OpWrite, *req.TransactionalID) {
			code = codeTxnID
		}
	} else if !a.cluster(authz.OpIdempotentWrite) && !a.b.authz.AllowedAny(a.principal, a.host, authz.OpWrite, authz.ResourceTopic) {
		code = codeCluster
	}
	if code == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp, nil
}

func azAddPartitionsToTxn(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		// v4+ is the broker-to-coordinator batch form (KIP-890).
		if a.cluster(authz.OpClusterAction) {
			return nil, nil
		}
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		resp.ErrorCode = codeCluster
		return resp, nil
	}
	txnOK := a.txnID(authz.OpWrite, req.TransactionalID)
	refused := map[string]bool{}
	for _, t := range req.Topics {
		if txnOK && !a.topic(authz.OpWrite, t.Topic) {
			refused[t.Topic] = true
		}
	}
	if txnOK && len(refused) == 0 {
		return nil, nil
	}
	// Nothing is added when anything is refused: the refused partitions
	// get their code, the others OPERATION_NOT_ATTEMPTED (Kafka's rule).
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		code := kerr.OperationNotAttempted.Code
		switch {
		case !txnOK:
			code = codeTxnID
		case refused[t.Topic]:
			code = codeTopic
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func azAddOffsetsToTxn(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	code := int16(0)
	switch {
	case !a.txnID(authz.OpWrite, req.TransactionalID):
		code = codeTxnID
	case !a.group(authz.OpRead, req.Group):
		code = codeGroup
	default:
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return resp, nil
}

func azEndTxn(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.EndTxnRequest)
	if a.txnID(authz.OpWrite, req.TransactionalID) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = codeTxnID
	return resp, nil
}

func azWriteTxnMarkers(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(authz.OpClusterAction) {
		return nil, nil
	}
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, codeCluster
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

func azTxnOffsetCommit(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	fail := func(t kmsg.TxnOffsetCommitRequestTopic, code int16) kmsg.TxnOffsetCommitResponseTopic {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	whole := int16(0)
	switch {
	case !a.txnID(authz.OpWrite, req.TransactionalID):
		whole = codeTxnID
	case !a.group(authz.OpRead, req.Group):
		whole = codeGroup
	}
	if whole != 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, fail(t, whole))
		}
		return resp, nil
	}
	var denied []kmsg.TxnOffsetCommitResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) int16 {
		return topicCode(a, authz.OpRead, t.Topic, t.TopicID)
	}, fail)
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azDescribeTransactions(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	var denied []kmsg.DescribeTransactionsResponseTransactionState
	req.TransactionalIDs, denied = refuseItems(req.TransactionalIDs, func(id string) int16 {
		return unless(a.txnID(authz.OpDescribe, id), codeTxnID)
	}, func(id string, code int16) kmsg.DescribeTransactionsResponseTransactionState {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID, s.ErrorCode, s.ProducerID, s.ProducerEpoch = id, code, -1, -1
		return s
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTransactionsResponse)
		// Partitions of topics the principal may not describe are left
		// out, as Kafka does.
		for i := range resp.TransactionStates {
			s := &resp.TransactionStates[i]
			s.Topics = slices.DeleteFunc(s.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool {
				return !a.topic(authz.OpDescribe, t.Topic)
			})
		}
		resp.TransactionStates = append(resp.TransactionStates, denied...)
	}
}

func azListTransactions(a *azReq, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListTransactionsResponse)
		resp.TransactionStates = slices.DeleteFunc(resp.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
			return !a.txnID(authz.OpDescribe, s.TransactionalID)
		})
	}
}
