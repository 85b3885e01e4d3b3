package main

import (
	"github.com/spf13/pflag"

	"github.com/weirhq/weir/broker"
)

// securityOptions are weir serve's authorization and quota settings
// (Kafka's authorizer.class.name, super.users,
// allow.everyone.if.no.acl.found).
type securityOptions struct {
	authorizer         string
	superUsers         []string
	allowEveryoneNoACL bool
}

func (s *securityOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.authorizer, "authorizer", "", `authorizer.class.name: "acl" enforces the ACLs stored in the data dir (weir acl) on every request; "" allows everything`)
	f.StringSliceVar(&s.superUsers, "super-users", nil, "super.users: principals allowed everything, comma separated (User:admin)")
	f.BoolVar(&s.allowEveryoneNoACL, "allow-everyone-if-no-acl-found", false, "allow.everyone.if.no.acl.found: with --authorizer, a resource no ACL matches is open to all")
}

func (s *securityOptions) apply(cfg *broker.Config) {
	cfg.Authorizer = s.authorizer
	cfg.SuperUsers = s.superUsers
	cfg.AllowEveryoneIfNoACLFound = s.allowEveryoneNoACL
}
