package broker

import (
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
	kept := req.GroupIDs[:0]
	for _, g := range req.GroupIDs {
		if !a.group(authz.OpDescribe, g) {
			rg := kmsg.NewShareGroupDescribeResponseGroup()
			rg.GroupID, rg.ErrorCode = g, codeGroup
			denied = append(denied, rg)
			continue
		}
		kept = append(kept, g)
	}
	req.GroupIDs = kept
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

// shareTopicName is the name of a share request's topic (named by ID).
func (a *azReq) shareTopicName(id [16]byte) (string, bool) { return a.topicName("", id) }

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
	kept := req.Topics[:0]
	for _, t := range req.Topics {
		if name, ok := a.shareTopicName(t.TopicID); ok && !a.topic(authz.OpRead, name) {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, fail(p.Partition))
			}
			denied = append(denied, rt)
			continue
		}
		kept = append(kept, t)
	}
	req.Topics = kept
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ShareFetchResponse)
		// A share session answers partitions the request did not name
		// (as a fetch session): they are checked here too.
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if name, ok := a.shareTopicName(t.TopicID); ok && !a.topic(authz.OpRead, name) {
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
	kept := req.Topics[:0]
	for _, t := range req.Topics {
		if name, ok := a.shareTopicName(t.TopicID); ok && !a.topic(authz.OpRead, name) {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopic
				rt.Partitions = append(rt.Partitions, rp)
			}
			denied = append(denied, rt)
			continue
		}
		kept = append(kept, t)
	}
	req.Topics = kept
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
			kt := g.Topics[:0]
			for _, t := range g.Topics {
				if !a.topic(authz.OpDescribe, t.Topic) {
					rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
						rp.Partition, rp.ErrorCode, rp.StartOffset = p, codeTopic, -1
						rt.Partitions = append(rt.Partitions, rp)
					}
					deniedTopics[g.GroupID] = append(deniedTopics[g.GroupID], rt)
					continue
				}
				kt = append(kt, t)
			}
			g.Topics = kt
		}
		kept = append(kept, g)
	}
	req.Groups = kept
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeShareGroupOffsetsResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if allTopics[g.GroupID] {
				kt := g.Topics[:0]
				for _, t := range g.Topics {
					if a.topic(authz.OpDescribe, t.Topic) {
						kt = append(kt, t)
					}
				}
				g.Topics = kt
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
	kept := req.Topics[:0]
	for _, t := range req.Topics {
		if !a.topic(authz.OpRead, t.Topic) {
			rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopic
				rt.Partitions = append(rt.Partitions, rp)
			}
			denied = append(denied, rt)
			continue
		}
		kept = append(kept, t)
	}
	req.Topics = kept
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
	kept := req.Topics[:0]
	for _, t := range req.Topics {
		if !a.topic(authz.OpRead, t.Topic) {
			rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, codeTopic
			denied = append(denied, rt)
			continue
		}
		kept = append(kept, t)
	}
	req.Topics = kept
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.Topics = append(resp.Topics, denied...)
	}
}
