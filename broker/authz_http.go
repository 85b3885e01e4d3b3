package broker

import (
	"context"
	"net"
	"net/http"

	"github.com/weirhq/weir/broker/authz"
)

// Authorization of the HTTP endpoints. An HTTP front (HTTPAuthenticator:
// basic auth, mTLS, bearer tokens) authenticates a request and records its
// principal with WithPrincipal;
// handlers then ask Authorized, which applies the same ACLs as the Kafka
// listener. A request no front authenticated is User:ANONYMOUS, as a
// PLAINTEXT Kafka connection is.

type principalKey struct{}

// WithPrincipal returns ctx carrying the principal ("User:name") an HTTP
// request was authenticated as.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// PrincipalFrom returns the principal WithPrincipal recorded in ctx, or
// "User:ANONYMOUS".
func PrincipalFrom(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok && p != "" {
		return p
	}
	return authz.Anonymous
}

// Authorized reports whether the HTTP request r may perform op on the
// resource (rt, name): always without an authorizer; else by the ACLs, for
// the principal in r's context and r's remote IP.
func (b *Broker) Authorized(r *http.Request, op authz.Operation, rt authz.ResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	principal := PrincipalFrom(r.Context())
	ok := b.authz.Allowed(principal, host, op, rt, name)
	if !ok {
		b.metrics.authzDenied.WithLabelValues(rt.String(), op.String()).Inc()
		b.logger.Debug("authorization denied", "principal", principal, "host", host, "operation", op.String(),
			"resource_type", rt.String(), "resource", name, "path", r.URL.Path)
	}
	return ok
}
