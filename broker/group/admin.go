package group

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator, DescribeGroups, ListGroups, DeleteGroups.
//
// Behavior:
//   - FindCoordinator answers this node for every group and transactional
//     ID (single node); v4+ answers each key of the batch. An empty group
//     key is INVALID_REQUEST; key types other than 0 (group) and 1
//     (transaction) are INVALID_REQUEST.
//   - DescribeGroups: an unknown group is reported Dead with no error
//     (v0-v5) or GROUP_ID_NOT_FOUND (v6+); a KIP-848 group answers
//     GROUP_ID_NOT_FOUND ("not a classic group"), as Kafka does — use
//     ConsumerGroupDescribe. Member metadata and assignments are returned
//     only when Stable.
//   - ListGroups filters by state (v4+, case-insensitive) and type (v5+).
//   - DeleteGroups: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or the group's
//     offsets and metadata are tombstoned (durably) and it is gone.

// Versions: FindCoordinator v0-6, DescribeGroups v0-6, ListGroups v0-5,
// DeleteGroups v0-3.
//   - FindCoordinator v1 CoordinatorType and ErrorMessage; v4 batched
//     CoordinatorKeys; v5 (TRANSACTION_ABORTABLE) and v6 (key type 2,
//     share groups: answered INVALID_REQUEST) add no fields.
//   - DescribeGroups v3 AuthorizedOperations; v4 member InstanceID; v6
//     GROUP_ID_NOT_FOUND with ErrorMessage.
//   - ListGroups v4 StatesFilter and GroupState; v5 TypesFilter and
//     GroupType.
//   - DeleteGroups v3 ErrorMessage: left null (the field is nullable; the
//     error code carries the answer).

func init() {
	regAPI(kmsg.FindCoordinator, 0, 6, func(c *Coordinator, _ context.Context, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
		return c.findCoordinator(req), nil
	})
	regAPI(kmsg.DescribeGroups, 0, 6, (*Coordinator).describeGroups)
	regAPI(kmsg.ListGroups, 0, 5, (*Coordinator).listGroups)
	regAPI(kmsg.DeleteGroups, 0, 3, (*Coordinator).deleteGroups)
}

func (c *Coordinator) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	r := kmsg.NewPtrFindCoordinatorResponse()
	answer := func(key string) (int16, *string) {
		if req.CoordinatorType != 0 && req.CoordinatorType != 1 {
			m := "unsupported coordinator type"
			return kerr.InvalidRequest.Code, &m
		}
		if key == "" {
			m := "empty coordinator key"
			return kerr.InvalidRequest.Code, &m
		}
		return 0, nil
	}
	if req.Version >= 4 {
		for _, k := range req.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key = k
			rc.ErrorCode, rc.ErrorMessage = answer(k)
			rc.NodeID, rc.Host, rc.Port = c.opts.NodeID, c.opts.Host, c.opts.Port
			if rc.ErrorCode != 0 {
				rc.NodeID, rc.Host, rc.Port = -1, "", -1
			}
			r.Coordinators = append(r.Coordinators, rc)
		}
		return r
	}
	r.ErrorCode, r.ErrorMessage = answer(req.CoordinatorKey)
	r.NodeID, r.Host, r.Port = c.opts.NodeID, c.opts.Host, c.opts.Port
	if r.ErrorCode != 0 {
		r.NodeID, r.Host, r.Port = -1, "", -1
	}
	return r
}

func (c *Coordinator) describeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	r := kmsg.NewPtrDescribeGroupsResponse()
	err := c.do(ctx, func() {
		for _, id := range req.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group = id
			g := c.groups[id]
			switch {
			case id == "":
				rg.ErrorCode = kerr.InvalidGroupID.Code
			case g == nil || (g.kind == kindClassic && g.state == stateDead):
				rg.State = stateDead.String()
				if req.Version >= 6 {
					rg.ErrorCode = kerr.GroupIDNotFound.Code
					m := "group " + id + " not found"
					rg.ErrorMessage = &m
				}
			case g.kind == kindConsumer:
				rg.ErrorCode = kerr.GroupIDNotFound.Code
				m := "group " + id + " is not a classic group"
				rg.ErrorMessage = &m
			default:
				rg.State = g.state.String()
				rg.ProtocolType = g.protocolType
				if g.state == stateStable {
					rg.Protocol = g.protocol
				}
				for _, m := range g.sortedMembers() {
					rm := kmsg.NewDescribeGroupsResponseGroupMember()
					rm.MemberID = m.id
					if m.instanceID != "" {
						iid := m.instanceID
						rm.InstanceID = &iid
					}
					rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
					if g.state == stateStable {
						rm.ProtocolMetadata = m.metadataFor(g.protocol)
						rm.MemberAssignment = m.assignment
					}
					rg.Members = append(rg.Members, rm)
				}
			}
			if req.Version >= 3 && req.IncludeAuthorizedOperations && rg.ErrorCode == 0 {
				rg.AuthorizedOperations = groupOperations
			}
			r.Groups = append(r.Groups, rg)
		}
	})
	return r, err
}

// groupOperations is the KIP-430 bitfield of what any client may do with a
// group (weir has no ACLs): READ, DELETE, DESCRIBE.
const groupOperations = 1<<3 | 1<<6 | 1<<8

func (c *Coordinator) listGroups(ctx context.Context, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	r := kmsg.NewPtrListGroupsResponse()
	err := c.do(ctx, func() {
		for _, id := range sortedKeys(c.groups) {
			g := c.groups[id]
			if g.kind == kindClassic && g.state == stateDead {
				continue
			}
			st := g.stateName()
			if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, st) }) {
				continue
			}
			typ := g.kind.String()
			if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(s string) bool { return strings.EqualFold(s, typ) }) {
				continue
			}
			rg := kmsg.NewListGroupsResponseGroup()
			rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = id, g.typeProtocol(), st, typ
			r.Groups = append(r.Groups, rg)
		}
	})
	return r, err
}

func (c *Coordinator) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	r := kmsg.NewPtrDeleteGroupsResponse()
	type pendingDel struct {
		idx  int
		done chan error
	}
	var waits []pendingDel
	err := c.do(ctx, func() {
		for _, id := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group = id
			g := c.groups[id]
			switch {
			case id == "":
				rg.ErrorCode = kerr.InvalidGroupID.Code
			case g == nil || (g.kind == kindClassic && g.state == stateDead):
				rg.ErrorCode = kerr.GroupIDNotFound.Code
			case !g.isEmpty():
				rg.ErrorCode = kerr.NonEmptyGroup.Code
			default:
				recs := make([]rec, 0, len(g.offsets)+1)
				for _, t := range sortedTPs(g.offsets) {
					recs = append(recs, rec{Key: offsetKey(id, t.topic, t.partition)})
				}
				recs = append(recs, rec{Key: groupKey(id)})
				done := make(chan error, 1)
				c.writeRecords(g, recs, true, func(err error) { done <- err })
				// The group is gone now; a commit racing with the delete
				// lands in a new incarnation, after the tombstones.
				g.offsets = map[tp]committed{}
				g.state = stateDead
				g.kind = kindClassic
				g.cg = nil
				delete(c.groups, id)
				c.met.forgetGroup(id)
				waits = append(waits, pendingDel{len(r.Groups), done})
			}
			r.Groups = append(r.Groups, rg)
		}
	})
	if err != nil {
		return nil, err
	}
	for _, w := range waits {
		select {
		case werr := <-w.done:
			if werr != nil {
				r.Groups[w.idx].ErrorCode = kerr.NotCoordinator.Code
			}
		case <-c.stopping():
			return nil, ErrClosed
		}
	}
	return r, nil
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedTPs[V any](m map[tp]V) []tp {
	out := make([]tp, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b tp) int {
		if c := cmp.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return out
}

func sortInt32s(s []int32) { slices.Sort(s) }

func sortBy[T any](s []T, key func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
}
