package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/share"
)

// Share group coordinator wiring (KIP-932). The coordinator (broker/share)
// keeps share-partition state in the single partition of the compacted
// internal topic "__share_group_state", created on first start. Its APIs
// register in their own NN_name.go files (regShareAPI) at the versions
// broker/share registers next to their handlers. Share groups share the
// group ID namespace with consumer groups: ListGroups and DeleteGroups
// cover both coordinators (listGroupsAll, deleteGroupsAll).

const shareStateTopic = share.StateTopic

// regShareAPI registers key, handled by h (handleShare: the share
// coordinator), at the range the share coordinator registered.
func regShareAPI(key kmsg.Key, h handlerFunc) {
	for _, v := range share.APIVersions() {
		if kmsg.Key(v.ApiKey) == key {
			regAPI(api{key: key, min: v.MinVersion, max: v.MaxVersion, handle: h})
			return
		}
	}
	panic(fmt.Sprintf("broker: the share coordinator does not serve %s", key.Name()))
}

// handleShare passes a request to the share coordinator. ctx is the
// connection's context (done when it closes): share sessions end with it.
func handleShare(b *Broker, ctx context.Context, s *slot, req kmsg.Request) (kmsg.Response, error) {
	return b.shares.Handle(share.WithConnection(share.WithClient(ctx, s.clientID, s.host), ctx), req)
}

// startShares opens (creating on first start) __share_group_state and
// builds the share coordinator, which replays it.
func (b *Broker) startShares() error {
	t, ok := b.topics.get(shareStateTopic)
	if !ok {
		var err error
		t, err = b.topics.create(shareStateTopic, 1, map[string]string{
			"cleanup.policy":  "compact",
			"segment.bytes":   "104857600",
			"retention.ms":    "-1",
			"retention.bytes": "-1",
		}, false)
		if err != nil {
			return fmt.Errorf("create %s: %w", shareStateTopic, err)
		}
	}
	coord, err := share.NewCoordinator(share.Options{
		State:      t.parts[0],
		Topics:     shareTopics{b},
		Now:        b.cfg.Now,
		Logger:     b.cfg.Logger.With("component", "share"),
		Registerer: b.cfg.Registerer,

		RecordLockDuration: b.cfg.ShareRecordLockDuration,
		DeliveryCountLimit: b.cfg.ShareDeliveryCountLimit,
		MaxRecordLocks:     b.cfg.ShareMaxRecordLocks,
	})
	if err != nil {
		return fmt.Errorf("start share coordinator: %w", err)
	}
	b.shares = coord
	return nil
}

// shareTopics implements share.Topics over the registry.
type shareTopics struct{ b *Broker }

var _ share.Topics = shareTopics{}

func (st shareTopics) Partitions(topic string) (int32, bool) {
	return brokerTopics(st).Partitions(topic)
}

func (st shareTopics) TopicID(topic string) ([16]byte, bool) { return brokerTopics(st).TopicID(topic) }

func (st shareTopics) TopicName(id [16]byte) (string, bool) { return brokerTopics(st).TopicName(id) }

func (st shareTopics) Internal(topic string) bool { return isInternalTopic(topic) }

func (st shareTopics) Log(topic string, partition int32) (share.PartitionLog, bool) {
	t, ok := st.b.topics.get(topic)
	if !ok {
		return nil, false
	}
	l, ok := t.partition(partition)
	if !ok {
		return nil, false
	}
	return l, true
}

// listGroupsAll answers ListGroups from both coordinators: the group
// coordinator's groups, then the share groups (type "share", protocol type
// "share"), with the same state and type filters.
func listGroupsAll(b *Broker, ctx context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	kresp, err := handleGroup(b, ctx, s, kreq)
	if err != nil {
		return nil, err
	}
	req, resp := kreq.(*kmsg.ListGroupsRequest), kresp.(*kmsg.ListGroupsResponse)
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	for _, g := range b.shares.ListGroups() {
		if !match(req.StatesFilter, g.State) || !match(req.TypesFilter, "share") {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.ID, "share", g.State, "share"
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// deleteGroupsAll answers DeleteGroups: share groups are deleted by the
// share coordinator, the others by the group coordinator; the answers keep
// the request's order.
func deleteGroupsAll(b *Broker, ctx context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var others []string
	shareErr := map[string]error{}
	for _, id := range req.Groups {
		if id != "" && b.shares.IsGroup(id) {
			shareErr[id] = b.shares.DeleteGroup(ctx, id)
		} else {
			others = append(others, id)
		}
	}
	byID := map[string]kmsg.DeleteGroupsResponseGroup{}
	if len(others) > 0 {
		sub := *req
		sub.Groups = others
		kr, err := handleGroup(b, ctx, s, &sub)
		if err != nil {
			return nil, err
		}
		for _, g := range kr.(*kmsg.DeleteGroupsResponse).Groups {
			byID[g.Group] = g
		}
	}
	for _, id := range req.Groups {
		if err, ok := shareErr[id]; ok {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group = id
			if err != nil {
				var ke *kerr.Error
				if !errors.As(err, &ke) {
					ke = kerr.NotCoordinator // the deletion was not made durable
				}
				rg.ErrorCode = ke.Code
			}
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		resp.Groups = append(resp.Groups, byID[id])
	}
	return resp, nil
}

// alterGroupConfigs applies IncrementalAlterConfigs ops to a GROUP
// resource: the share.* group configs (broker/share). SET and DELETE
// only (none is a list); nothing changes if one op is bad.
func (b *Broker) alterGroupConfigs(ctx context.Context, rr *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	if rr.ResourceName == "" {
		return kerrMsg(kerr.InvalidRequest, "the group name must not be empty")
	}
	confs := b.shares.GroupConfigs(rr.ResourceName)
	seen := map[string]bool{}
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return kerrMsg(kerr.InvalidRequest, fmt.Sprintf("config %s is altered more than once", c.Name))
		}
		seen[c.Name] = true
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if err := share.ValidateGroupConfig(c.Name, deref(c.Value)); err != nil {
				return kerrMsg(kerr.InvalidConfig, err.Error())
			}
			confs[c.Name] = deref(c.Value)
		case kmsg.IncrementalAlterConfigOpDelete:
			if err := share.ValidateGroupConfig(c.Name, "x"); err != nil && strings.HasPrefix(err.Error(), "unknown") {
				return kerrMsg(kerr.InvalidConfig, err.Error())
			}
			delete(confs, c.Name)
		default:
			return kerrMsg(kerr.InvalidConfig, fmt.Sprintf("config %s is not a list: only SET and DELETE are allowed", c.Name))
		}
	}
	if validateOnly {
		return nil
	}
	if err := b.shares.SetGroupConfigs(ctx, rr.ResourceName, confs); err != nil {
		return kerrMsg(kerr.InvalidConfig, err.Error())
	}
	return nil
}

// describeGroupConfigs lists a group's share.* configs (names nil: all).
func (b *Broker) describeGroupConfigs(group string, names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, gc := range b.shares.DescribeGroupConfigs(group) {
		if names != nil && !slices.Contains(names, gc.Name) {
			continue
		}
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value = gc.Name, kmsg.StringPtr(gc.Value)
		rc.ConfigType = kmsg.ConfigTypeString
		if gc.Int {
			rc.ConfigType = kmsg.ConfigTypeInt
		}
		rc.Source, rc.IsDefault = kmsg.ConfigSourceDefaultConfig, !gc.Overridden
		if gc.Overridden {
			rc.Source = kmsg.ConfigSourceGroupConfig
		}
		if docs {
			rc.Documentation = kmsg.StringPtr(gc.Doc)
		}
		out = append(out, rc)
	}
	return out
}

// handleShareHeartbeat serves ShareGroupHeartbeat. A member joining (epoch
// 0) a group ID the group coordinator holds as a classic or consumer group
// is refused, as by Kafka: GROUP_ID_NOT_FOUND, "not a share group" (share
// and consumer groups share one namespace).
func handleShareHeartbeat(b *Broker, ctx context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	if req.MemberEpoch == 0 && req.GroupID != "" && !b.shares.IsGroup(req.GroupID) {
		other, err := b.otherGroupType(ctx, s, req.GroupID)
		if err != nil {
			return nil, err
		}
		if other != "" {
			resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("group %s is a %s group, not a share group", req.GroupID, other))
			return resp, nil
		}
	}
	return handleShare(b, ctx, s, req)
}

// handleGroupNotShare serves ConsumerGroupHeartbeat and JoinGroup, which
// the group coordinator would answer by making a consumer or classic group
// of the ID: under a share group's ID they are refused as by Kafka (share
// and consumer groups share one namespace, KAFKA-20799), a
// ConsumerGroupHeartbeat of any member epoch with GROUP_ID_NOT_FOUND
// ("Group <id> is not a consumer group."), a JoinGroup with
// INCONSISTENT_GROUP_PROTOCOL.
func handleGroupNotShare(b *Broker, ctx context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	switch req := kreq.(type) {
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if req.Group != "" && b.shares.IsGroup(req.Group) {
			resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			resp.ErrorMessage = kmsg.StringPtr("Group " + req.Group + " is not a consumer group.")
			return resp, nil
		}
	case *kmsg.JoinGroupRequest:
		if req.Group != "" && b.shares.IsGroup(req.Group) {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
			resp.Generation, resp.MemberID = -1, req.MemberID
			return resp, nil
		}
	}
	return handleGroup(b, ctx, s, kreq)
}

// otherGroupType is "classic" or "consumer" if the group coordinator holds
// id as such a group (with members or committed offsets), else "".
func (b *Broker) otherGroupType(ctx context.Context, s *slot, id string) (string, error) {
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{id}
	kr, err := handleGroup(b, ctx, s, dg)
	if err != nil {
		return "", err
	}
	if gs := kr.(*kmsg.DescribeGroupsResponse).Groups; len(gs) == 1 && gs[0].ErrorCode == 0 && gs[0].State != "Dead" {
		return "classic", nil
	}
	cg := kmsg.NewPtrConsumerGroupDescribeRequest()
	cg.Version, cg.Groups = 0, []string{id}
	kr, err = handleGroup(b, ctx, s, cg)
	if err != nil {
		return "", err
	}
	if gs := kr.(*kmsg.ConsumerGroupDescribeResponse).Groups; len(gs) == 1 && gs[0].ErrorCode == 0 {
		return "consumer", nil
	}
	return "", nil
}

// describeGroupsAll answers DescribeGroups: the group coordinator's
// answer, except that a share group is named as such (Kafka: a
// DescribeGroups of a group that is not classic is GROUP_ID_NOT_FOUND, "not
// a classic group"; before v6 the state Dead).
func describeGroupsAll(b *Broker, ctx context.Context, s *slot, kreq kmsg.Request) (kmsg.Response, error) {
	kresp, err := handleGroup(b, ctx, s, kreq)
	if err != nil {
		return nil, err
	}
	req, resp := kreq.(*kmsg.DescribeGroupsRequest), kresp.(*kmsg.DescribeGroupsResponse)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.Group == "" || g.State != "Dead" && g.ErrorCode == 0 || !b.shares.IsGroup(g.Group) {
			continue
		}
		g.State = "Dead"
		if req.Version >= 6 {
			g.ErrorCode = kerr.GroupIDNotFound.Code
			g.ErrorMessage = kmsg.StringPtr("group " + g.Group + " is a share group, not a classic group (use ShareGroupDescribe)")
		}
	}
	return resp, nil
}
