package txn

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions: v0; ListTransactions: v0-2; FindCoordinator: v0-6
//
// Behavior:
//   - DescribeTransactions answers each id's state, timeout, start time,
//     producer id/epoch and partitions; an unknown (or expiring) id is
//     TRANSACTIONAL_ID_NOT_FOUND.
//   - ListTransactions filters by state names (unknown names are echoed
//     in UnknownStateFilters and otherwise ignored, as Kafka does), producer ids, v1 duration (transactions
//     running longer than it) and v2 a transactional id regular expression
//     (full match; INVALID_REGULAR_EXPRESSION when it does not compile).
//     Ids being removed (Dead) are never listed.
//   - FindCoordinator answers this broker for every key of a group (0) or
//     transaction (1) key type; an empty transactional id or another key
//     type is INVALID_REQUEST.

func init() {
	regAPI(kmsg.DescribeTransactions, 0, 0, onLoop(func(c *Coordinator, req *kmsg.DescribeTransactionsRequest, reply func(kmsg.Response)) {
		reply(c.describe(req))
	}))
	regAPI(kmsg.ListTransactions, 0, 2, onLoop(func(c *Coordinator, req *kmsg.ListTransactionsRequest, reply func(kmsg.Response)) {
		reply(c.list(req))
	}))
	regAPI(kmsg.FindCoordinator, 0, 6, func(c *Coordinator, _ context.Context, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
		return c.findCoordinator(req), nil
	})
}

func (c *Coordinator) describe(req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		m := c.txns[id]
		if m == nil || m.state == stateDead || (m.pending != nil && m.pending.state == stateDead) {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State = m.state.String()
		st.TimeoutMillis = m.timeoutMs
		st.StartTimestamp = m.startMs
		st.ProducerID = m.producerID
		st.ProducerEpoch = m.epoch
		for _, tp := range m.sortedParts() {
			if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = tp.Topic
				st.Topics = append(st.Topics, t)
			}
			t := &st.Topics[len(st.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

func (c *Coordinator) list(req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []txnState
	for _, name := range req.StateFilters {
		s, ok := parseState(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states = append(states, s)
	}
	var re *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		re, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp
		}
	}
	duration := int64(-1)
	if req.Version >= 1 {
		duration = req.DurationFilterMillis
	}
	now := c.nowMs()
	for id, m := range c.txns {
		switch {
		case m.state == stateDead, m.pending != nil && m.pending.state == stateDead:
			continue
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, m.producerID):
			continue
		case len(states) > 0 && !slices.Contains(states, m.state):
			continue
		case duration >= 0 && now-m.startMs <= duration:
			continue
		case re != nil && !re.MatchString(id):
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID = m.producerID
		st.TransactionState = m.state.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		return strings.Compare(a.TransactionalID, b.TransactionalID)
	})
	return resp
}

func (c *Coordinator) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(key string) (int16, *string) {
		switch req.CoordinatorType {
		case 0:
		case 1:
			if key == "" {
				msg := "empty transactional id"
				return kerr.InvalidRequest.Code, &msg
			}
		default:
			msg := "unsupported coordinator key type"
			return kerr.InvalidRequest.Code, &msg
		}
		return 0, nil
	}
	if req.Version <= 3 {
		code, msg := answer(req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		if code == 0 {
			resp.NodeID, resp.Host, resp.Port = c.opts.NodeID, c.opts.Host, c.opts.Port
		} else {
			resp.NodeID, resp.Port = -1, -1
		}
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = key
		co.ErrorCode, co.ErrorMessage = answer(key)
		if co.ErrorCode == 0 {
			co.NodeID, co.Host, co.Port = c.opts.NodeID, c.opts.Host, c.opts.Port
		} else {
			co.NodeID, co.Port = -1, -1
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp
}
