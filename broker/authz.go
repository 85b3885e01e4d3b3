package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
)

// Authorization wiring. With Config.Authorizer set, every request passes
// through conn.authorize before its handler: the API's rule in authzRules
// (authz_rules.go) either refuses the whole request with Kafka's error
// code, or removes the items the principal may not touch, lets the handler
// answer the rest, and adds the refused items to the response with their
// error code. Items are refused before the handler sees them, so a refused
// principal learns nothing of a resource (an unknown topic it may not
// describe is TOPIC_AUTHORIZATION_FAILED, not UNKNOWN_TOPIC_OR_PARTITION),
// and the handler never acts on them.

// authorizerEnabled parses Config.Authorizer.
func authorizerEnabled(name string) (bool, error) {
	switch name {
	case "":
		return false, nil
	case "acl", "kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer":
		return true, nil
	}
	return false, fmt.Errorf("broker: unknown authorizer %q (want \"acl\" or empty)", name)
}

// openAuthorizer loads the ACLs if an authorizer is configured.
func (b *Broker) openAuthorizer() error {
	if on, _ := authorizerEnabled(b.cfg.Authorizer); !on {
		return nil
	}
	for _, s := range b.cfg.SuperUsers {
		if i := strings.IndexByte(s, ':'); i <= 0 || i == len(s)-1 {
			return fmt.Errorf("super user %q is not of the form User:name", s)
		}
	}
	a, err := authz.Open(authz.Options{FS: b.cfg.FS, Dir: b.cfg.DataDir, SuperUsers: b.cfg.SuperUsers,
		AllowEveryoneIfNoACLFound: b.cfg.AllowEveryoneIfNoACLFound})
	if err != nil {
		return err
	}
	b.authz = a
	return nil
}

// azReq is the identity one request is authorized as.
type azReq struct {
	b         *Broker
	principal string
	host      string // IP address, without Kafka's leading '/'
	// closeAfter: the request gets no response (acks=0 Produce) and
	// something of it was refused, so the connection is closed once the
	// rest is handled, as Kafka tells an acks=0 producer of any error.
	closeAfter bool
}

func (a *azReq) ok(op authz.Operation, rt authz.ResourceType, name string) bool {
	allowed := a.b.authz.Allowed(a.principal, a.host, op, rt, name)
	if !allowed {
		a.b.metrics.authzDenied.WithLabelValues(rt.String(), op.String()).Inc()
		a.b.logger.Debug("authorization denied", "principal", a.principal, "host", a.host,
			"operation", op.String(), "resource_type", rt.String(), "resource", name)
	}
	return allowed
}

func (a *azReq) cluster(op authz.Operation) bool {
	return a.ok(op, authz.ResourceCluster, authz.ClusterName)
}
func (a *azReq) topic(op authz.Operation, name string) bool {
	return a.ok(op, authz.ResourceTopic, name)
}
func (a *azReq) group(op authz.Operation, name string) bool {
	return a.ok(op, authz.ResourceGroup, name)
}
func (a *azReq) txnID(op authz.Operation, name string) bool {
	return a.ok(op, authz.ResourceTransactionalID, name)
}

// opsBits is KIP-430's authorized-operations bit set of the resource:
// bit n set when operation n is allowed.
func (a *azReq) opsBits(rt authz.ResourceType, name string) int32 {
	var bits int32
	for _, op := range authz.Ops(rt) {
		if a.b.authz.Allowed(a.principal, a.host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// clusterOps is the cluster's authorized-operations bit set as Metadata
// and DescribeCluster return it: 0 without DESCRIBE on the cluster.
func (a *azReq) clusterOps() int32 {
	if !a.cluster(authz.OpDescribe) {
		return 0
	}
	return a.opsBits(authz.ResourceCluster, authz.ClusterName)
}

// topicName resolves a request's topic reference: the name, or for
// requests that carry topic IDs the name of that ID. ok is false for an
// unknown ID (the handler answers UNKNOWN_TOPIC_ID, which reveals nothing).
func (a *azReq) topicName(name string, id [16]byte) (string, bool) {
	if id == ([16]byte{}) {
		return name, true
	}
	t, ok := a.b.topics.getByID(id)
	if !ok {
		return "", false
	}
	return t.name, true
}

// principalOf is the principal a request of the connection acts as. Read
// loop only (the principal may change between requests: authentication).
func (c *conn) principalOf(s *slot) string {
	if f := c.b.cfg.principalForTest; f != nil {
		if p := f(s.clientID); p != "" {
			return p
		}
	}
	return c.principal
}

// authorize runs the API's authorization rule on the read loop, before
// the request is ordered (order.go) or handled, so that refused items are
// gone from req before anything links or reads them. It returns the
// wrapper to put around the request's call, and refused true when the
// whole request is answered without its handler (then the caller must
// not order it: order links are closed only by running the call). Without
// an authorizer it changes nothing. The principal is the one in force when
// the request was read.
func (c *conn) authorize(s *slot, req kmsg.Request) (wrap func(handleCall) handleCall, refused bool) {
	s.principal = c.principalOf(s)
	if c.b.authz == nil {
		return noWrap, false
	}
	rule, ok := authzRules[s.api.key]
	if !ok {
		// Fail closed: an API nobody wrote a rule for is not served
		// (TestAuthzRulesCoverEveryAPI keeps this from happening).
		c.logger.Error("closing connection: no authorization rule", "api", s.api.name)
		return func(handleCall) handleCall {
			return func(context.Context) (kmsg.Response, error) { return nil, errCloseConn }
		}, true
	}
	if rule.check == nil {
		return noWrap, false
	}
	a := &azReq{b: c.b, principal: s.principal, host: strings.TrimPrefix(c.host, "/")}
	deny, merge, ok := c.runRule(rule, a, req)
	if !ok {
		return func(handleCall) handleCall {
			return func(context.Context) (kmsg.Response, error) { return nil, errCloseConn }
		}, true
	}
	if deny != nil {
		if a.closeAfter {
			deny = nil
		}
		return func(handleCall) handleCall {
			return func(context.Context) (kmsg.Response, error) {
				if deny == nil {
					return nil, errCloseConn
				}
				return deny, nil
			}
		}, true
	}
	return func(next handleCall) handleCall {
		return func(ctx context.Context) (kmsg.Response, error) {
			resp, err := next(ctx)
			if err == nil && a.closeAfter {
				return nil, errCloseConn
			}
			if err == nil && resp != nil && merge != nil {
				merge(resp) // a panic here is recovered by dispatch
			}
			return resp, err
		}
	}, false
}

// noWrap leaves a call as it is (no allocation per request when there is
// nothing to authorize).
func noWrap(next handleCall) handleCall { return next }

// runRule runs a rule's check, turning a panic (a bug; never from valid
// or invalid input, FuzzAuthzRules checks) into a refusal that closes the
// connection, so that a rule cannot take the broker down or let a request
// through unchecked.
func (c *conn) runRule(rule authzRule, a *azReq, req kmsg.Request) (deny kmsg.Response, merge func(kmsg.Response), ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.b.panics.Add(1)
			c.logger.Error("panic authorizing request", "api", kmsg.NameForKey(req.Key()), "panic", r)
			deny, merge, ok = nil, nil, false
		}
	}()
	deny, merge = rule.check(a, req)
	return deny, merge, true
}
