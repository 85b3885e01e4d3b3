package registry

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
	"github.com/weirhq/weir/vfs"
)

// Authorization of mTLS principals, which the registry cannot log in as:
// their ACLs (and those of User:*) are listed with DescribeAcls over the
// registry's own connection and decided by broker/authz, which decides as
// Kafka's StandardAuthorizer does (DENY first, implied operations,
// literal, prefixed and wildcard patterns, the client's host). What the
// registry does not know of the cluster it takes at its strictest:
// allow.everyone.if.no.acl.found is false, and the super users are
// ClusterAuthConfig.SuperUsers.

// principalACLs are one principal's ACLs, decided in memory.
type principalACLs struct {
	principal string
	az        *authz.Authorizer
}

func (p *principalACLs) allowed(r *http.Request, op kmsg.ACLOperation, cluster bool, topic string) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if cluster {
		return p.az.Allowed(p.principal, host, authz.Operation(op), authz.ResourceCluster, authz.ClusterName)
	}
	return p.az.Allowed(p.principal, host, authz.Operation(op), authz.ResourceTopic, topic)
}

func (a *ClusterAuth) aclLister() (*kgo.Client, error) {
	a.aclClientOnce.Do(func() {
		opts := append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.ClientID("weir-registry-acls"),
			kgo.RetryTimeout(a.cfg.Timeout)}, a.cfg.ACLClientOpts...)
		a.aclClient, a.aclClientErr = kgo.NewClient(opts...)
	})
	if a.aclClient == nil && a.aclClientErr == nil {
		return nil, fmt.Errorf("cluster auth closed")
	}
	return a.aclClient, a.aclClientErr
}

// describeACLs lists the ACLs that apply to principal (its own and
// User:*'s) and loads them into an in-memory authorizer.
func (a *ClusterAuth) describeACLs(ctx context.Context, principal string) (*principalACLs, error) {
	cl, err := a.aclLister()
	if err != nil {
		return nil, err
	}
	var (
		bindings []authz.Binding
		super    = a.cfg.SuperUsers
	)
	for _, who := range []string{principal, authz.WildcardPrincipal} {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType = kmsg.ACLResourceTypeAny
		req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		req.Principal = kmsg.StringPtr(who)
		req.Operation = kmsg.ACLOperationAny
		req.PermissionType = kmsg.ACLPermissionTypeAny
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("describe acls of %s: %w", who, err)
		}
		if resp.ErrorCode == kerr.SecurityDisabled.Code {
			// No authorizer on the cluster: every request is allowed.
			super = []string{principal}
			break
		}
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			return nil, fmt.Errorf("describe acls of %s: error %d %s", who, resp.ErrorCode, msg)
		}
		for _, res := range resp.Resources {
			for _, acl := range res.ACLs {
				bindings = append(bindings, authz.Binding{ResourceType: authz.ResourceType(res.ResourceType),
					ResourceName: res.ResourceName, PatternType: authz.PatternType(res.ResourcePatternType),
					Principal: acl.Principal, Host: acl.Host, Operation: authz.Operation(acl.Operation),
					Permission: authz.Permission(acl.PermissionType)})
			}
		}
	}
	az, err := authz.Open(authz.Options{FS: vfs.NewCrashableMem(), SuperUsers: super})
	if err != nil {
		return nil, err
	}
	errs, err := az.Create(bindings)
	if err != nil {
		return nil, err
	}
	for i, e := range errs {
		if e != nil {
			a.cfg.Logger.Warn("registry: an ACL of the cluster is not understood; ignored", "acl", bindings[i].String(), "err", e)
		}
	}
	return &principalACLs{principal: principal, az: az}, nil
}
