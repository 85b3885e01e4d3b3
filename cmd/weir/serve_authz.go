package main

import (
	"net/http"

	"github.com/spf13/pflag"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/authz"
)

// authzOptions are weir serve's authorization and quota settings
// (Kafka's authorizer.class.name, super.users,
// allow.everyone.if.no.acl.found).
type authzOptions struct {
	authorizer         string
	superUsers         []string
	allowEveryoneNoACL bool
}

func (s *authzOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.authorizer, "authorizer", "", `authorizer.class.name: "acl" enforces the ACLs stored in the data dir (weir acl) on every request; "" allows everything`)
	f.StringSliceVar(&s.superUsers, "super-users", nil, "super.users: principals allowed everything, comma separated (User:admin)")
	f.BoolVar(&s.allowEveryoneNoACL, "allow-everyone-if-no-acl-found", false, "allow.everyone.if.no.acl.found: with --authorizer, a resource no ACL matches is open to all")
}

func (s *authzOptions) apply(cfg *broker.Config) {
	cfg.Authorizer = s.authorizer
	cfg.SuperUsers = s.superUsers
	cfg.AllowEveryoneIfNoACLFound = s.allowEveryoneNoACL
}

// metricsACL guards /metrics with the broker's ACLs: DESCRIBE on the
// cluster, for the principal an HTTP front recorded (broker.WithPrincipal;
// User:ANONYMOUS without one). /healthz stays open for liveness probes.
// Without an authorizer nothing changes.
func metricsACL(b *broker.Broker, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && !b.Authorized(r, authz.OpDescribe, authz.ResourceCluster, authz.ClusterName) {
			http.Error(w, "CLUSTER_AUTHORIZATION_FAILED: /metrics needs DESCRIBE on the cluster", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
