package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
)

// Authorization of the share group APIs (KIP-932), as KafkaApis: the
// group's operation first (READ to take part or alter offsets, DESCRIBE to
// describe, DELETE to delete offsets), then per topic (READ to fetch,
// acknowledge or alter; DESCRIBE to describe or subscribe). Registered in
// authzRules by init, like the others.

func init() {
	for k, r := range map[kmsg.Key]authzRule{
		kmsg.ShareGroupHeartbeat:       {"READ on the group; DESCRIBE on each subscribed topic", azShareGroupHeartbeat},
		kmsg.ShareGroupDescribe:        {"DESCRIBE on each group", azShareGroupDescribe},
		kmsg.ShareFetch:                {"READ on the group (whole request); READ on each topic", azShareFetch},
		kmsg.ShareAcknowledge:          {"READ on the group (whole request); READ on each topic", azShareAcknowledge},
		kmsg.DescribeShareGroupOffsets: {"DESCRIBE on each group; DESCRIBE on each topic (all-topic answers are filtered)", azDescribeShareGroupOffsets},
		kmsg.AlterShareGroupOffsets:    {"READ on the group; READ on each topic", azAlterShareGroupOffsets},
		kmsg.DeleteShareGroupOffsets:   {"DELETE on the group; READ on each topic", azDeleteShareGroupOffsets},
	} {
		if _, dup := authzRules[k]; dup {
			panic("broker: authorization rule registered twice for " + k.Name())
		}
		authzRules[k] = r
	}
}

func azShareGroupHeartbeat(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	code := heartbeatCode(a, req.GroupID, req.SubscribedTopicNames)
	if code == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = code
	return resp, nil
}

func azShareGroupDescribe(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	var denied []kmsg.ShareGroupDescribeResponseGroup
	req.GroupIDs, denied = refuseItems(req.GroupIDs, func(g string) int16 {
		return unless(a.group(authz.OpDescribe, g), codeGroup)
	}, func(g string, code int16) kmsg.ShareGroupDescribeResponseGroup {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID, rg.ErrorCode = g, code
		return rg
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ShareGroupDescribeResponse)
		if req.IncludeAuthorizedOperations {
			for i := range resp.Groups {
				if resp.Groups[i].ErrorCode == 0 {
					resp.Groups[i].AuthorizedOperations = a.opsBits(authz.ResourceGroup, resp.Groups[i].GroupID)
				}
			}
		}
		resp.Groups = append(resp.Groups, denied...)
	}
}

func azShareFetch(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ShareFetchRequest)
	if req.GroupID != nil && !a.group(authz.OpRead, *req.GroupID) {
		resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = codeGroup
		return resp, nil
	}
	fail := func(p int32) kmsg.ShareFetchResponseTopicPartition {
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p, codeTopic
		return rp
	}
	var denied []kmsg.ShareFetchResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.ShareFetchRequestTopic) int16 {
		return topicCode(a, authz.OpRead, "", t.TopicID)
	}, func(t kmsg.ShareFetchRequestTopic, _ int16) kmsg.ShareFetchResponseTopic {
		rt := kmsg.NewShareFetchResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, fail(p.Partition))
		}
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ShareFetchResponse)
		// A share session answers partitions the request did not name
		// (as a fetch session): they are checked here too.
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if topicCode(a, authz.OpRead, "", t.TopicID) != 0 {
				for j := range t.Partitions {
					t.Partitions[j] = fail(t.Partitions[j].Partition)
				}
			}
		}
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azShareAcknowledge(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	if req.GroupID != nil && !a.group(authz.OpRead, *req.GroupID) {
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode = codeGroup
		return resp, nil
	}
	var denied []kmsg.ShareAcknowledgeResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.ShareAcknowledgeRequestTopic) int16 {
		return topicCode(a, authz.OpRead, "", t.TopicID)
	}, func(t kmsg.ShareAcknowledgeRequestTopic, code int16) kmsg.ShareAcknowledgeResponseTopic {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ShareAcknowledgeResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azDescribeShareGroupOffsets(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	var deniedGroups []kmsg.DescribeShareGroupOffsetsResponseGroup
	deniedTopics := map[string][]kmsg.DescribeShareGroupOffsetsResponseGroupTopic{}
	allTopics := map[string]bool{}
	kept := req.Groups[:0]
	for _, g := range req.Groups {
		if !a.group(authz.OpDescribe, g.GroupID) {
			rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			rg.GroupID, rg.ErrorCode = g.GroupID, codeGroup
			deniedGroups = append(deniedGroups, rg)
			continue
		}
		if g.Topics == nil {
			allTopics[g.GroupID] = true
		} else {
			g.Topics, deniedTopics[g.GroupID] = refuseItems(g.Topics, func(t kmsg.DescribeShareGroupOffsetsRequestGroupTopic) int16 {
				return unless(a.topic(authz.OpDescribe, t.Topic), codeTopic)
			}, func(t kmsg.DescribeShareGroupOffsetsRequestGroupTopic, code int16) kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.ErrorCode, rp.StartOffset = p, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				return rt
			})
		}
		kept = append(kept, g)
	}
	req.Groups = kept
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeShareGroupOffsetsResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if allTopics[g.GroupID] {
				g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.DescribeShareGroupOffsetsResponseGroupTopic) bool {
					return !a.topic(authz.OpDescribe, t.Topic)
				})
			}
			g.Topics = append(g.Topics, deniedTopics[g.GroupID]...)
		}
		resp.Groups = append(resp.Groups, deniedGroups...)
	}
}

func azAlterShareGroupOffsets(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	if !a.group(authz.OpRead, req.GroupID) {
		resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		resp.ErrorCode = codeGroup
		return resp, nil
	}
	var denied []kmsg.AlterShareGroupOffsetsResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.AlterShareGroupOffsetsRequestTopic) int16 {
		return unless(a.topic(authz.OpRead, t.Topic), codeTopic)
	}, func(t kmsg.AlterShareGroupOffsetsRequestTopic, code int16) kmsg.AlterShareGroupOffsetsResponseTopic {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.AlterShareGroupOffsetsResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}

func azDeleteShareGroupOffsets(a *azReq, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	if !a.group(authz.OpDelete, req.GroupID) {
		resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.ErrorCode = codeGroup
		return resp, nil
	}
	var denied []kmsg.DeleteShareGroupOffsetsResponseTopic
	req.Topics, denied = refuseItems(req.Topics, func(t kmsg.DeleteShareGroupOffsetsRequestTopic) int16 {
		return unless(a.topic(authz.OpRead, t.Topic), codeTopic)
	}, func(t kmsg.DeleteShareGroupOffsetsRequestTopic, code int16) kmsg.DeleteShareGroupOffsetsResponseTopic {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		return rt
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}
