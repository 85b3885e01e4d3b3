// Package authz is weir's authorizer: Kafka's ACL model (resources, pattern
// types, operations, permissions, principals and hosts), the decision
// procedure of Kafka's StandardAuthorizer, and a durable store of the ACLs.
//
// It knows nothing of the wire protocol; its enumerations carry the numeric
// values Kafka uses on the wire (CreateAcls, DescribeAcls, DeleteAcls), so
// the broker converts by a plain integer cast.
//
// Decision (Authorizer.Allowed), for principal P from host H asking
// operation O on resource (T, N):
//
//  1. P is a super user: allowed.
//  2. The ACLs that match the resource are those of type T whose pattern is
//     LITERAL N, LITERAL "*" (wildcard), or PREFIXED by a prefix of N. If
//     there are none, the answer is allow.everyone.if.no.acl.found.
//  3. Of those, an ACL applies to the request if its principal is P or
//     "User:*" and its host is H or "*".
//  4. Deny wins: a DENY that applies with operation O or ALL refuses.
//  5. An ALLOW that applies with operation O or ALL allows; so does an
//     ALLOW of an operation that implies O: READ, WRITE, DELETE and ALTER
//     imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. A DENY of
//     the implying operation does not deny the implied one (Kafka's rule).
//  6. Otherwise refused.
package authz

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is the kind of object an ACL protects (Kafka's values).
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterName is the name of the single cluster resource ("kafka-cluster").
const ClusterName = "kafka-cluster"

// Wildcard, as a resource name, principal or host, matches every one.
const Wildcard = "*"

// WildcardPrincipal matches every principal.
const WildcardPrincipal = "User:*"

// Anonymous is the principal of an unauthenticated connection.
const Anonymous = "User:ANONYMOUS"

// PatternType says how an ACL's resource name matches (Kafka's values).
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: any pattern type
	PatternMatch    PatternType = 2 // filters only: every pattern matching a name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is what a request does to a resource (Kafka's values).
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is ALLOW or DENY (Kafka's values).
type Permission int8

const (
	PermUnknown Permission = 0
	PermAny     Permission = 1 // filters only
	PermDeny    Permission = 2
	PermAllow   Permission = 3
)

var (
	resourceNames = map[ResourceType]string{ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP",
		ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID", ResourceDelegationToken: "DELEGATION_TOKEN", ResourceUser: "USER"}
	patternNames = map[PatternType]string{PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED"}
	opNames      = map[Operation]string{OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE",
		OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION",
		OpDescribeConfigs: "DESCRIBE_CONFIGS", OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE",
		OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS"}
	permNames = map[Permission]string{PermAny: "ANY", PermDeny: "DENY", PermAllow: "ALLOW"}
)

func name[K comparable](m map[K]string, k K) string {
	if s, ok := m[k]; ok {
		return s
	}
	return "UNKNOWN"
}

func parse[K comparable](m map[K]string, what, s string) (K, error) {
	u := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	for k, n := range m {
		if n == u {
			return k, nil
		}
	}
	var zero K
	return zero, fmt.Errorf("%w: unknown %s %q", ErrInvalid, what, s)
}

func (t ResourceType) String() string { return name(resourceNames, t) }
func (p PatternType) String() string  { return name(patternNames, p) }
func (o Operation) String() string    { return name(opNames, o) }
func (p Permission) String() string   { return name(permNames, p) }

// ParseResourceType parses a resource type name ("topic", "TRANSACTIONAL_ID", "transactional-id").
func ParseResourceType(s string) (ResourceType, error) {
	return parse(resourceNames, "resource type", s)
}

// ParsePatternType parses a pattern type name ("literal", "prefixed", ...).
func ParsePatternType(s string) (PatternType, error) { return parse(patternNames, "pattern type", s) }

// ParseOperation parses an operation name ("read", "describe-configs", ...).
func ParseOperation(s string) (Operation, error) { return parse(opNames, "operation", s) }

// ParsePermission parses "allow" or "deny" (or "any").
func ParsePermission(s string) (Permission, error) { return parse(permNames, "permission", s) }

// ErrInvalid is wrapped by every error about a malformed binding or filter.
var ErrInvalid = errors.New("invalid acl")

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s on %s:%s:%s from %s for %s", b.Permission, b.Operation, b.ResourceType, b.PatternType,
		b.ResourceName, b.Host, b.Principal)
}

// validOps lists the operations an ACL of each resource type may name
// (Kafka's AclEntry.supportedOperations); ALL is valid everywhere.
var validOps = map[ResourceType][]Operation{
	ResourceTopic:           {OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup:           {OpRead, OpDescribe, OpDelete},
	ResourceCluster:         {OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe},
	ResourceTransactionalID: {OpDescribe, OpWrite},
	ResourceDelegationToken: {OpDescribe},
	ResourceUser:            {OpCreateTokens, OpDescribeTokens},
}

// Ops lists the operations defined on resource type t, ALL excluded.
func Ops(t ResourceType) []Operation { return append([]Operation(nil), validOps[t]...) }

// Validate reports a binding that cannot be stored: a filter-only value
// (ANY, MATCH), an empty name, an operation the resource type does not
// have, a principal not of the form "Type:name", the cluster under another
// name than "kafka-cluster".
func (b Binding) Validate() error {
	ops, ok := validOps[b.ResourceType]
	if !ok {
		return fmt.Errorf("%w: resource type %s", ErrInvalid, b.ResourceType)
	}
	if b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed {
		return fmt.Errorf("%w: pattern type %s", ErrInvalid, b.PatternType)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	}
	if b.ResourceType == ResourceCluster && (b.ResourceName != ClusterName || b.PatternType != PatternLiteral) {
		return fmt.Errorf("%w: the cluster resource is LITERAL %q", ErrInvalid, ClusterName)
	}
	if b.PatternType == PatternPrefixed && b.ResourceName == Wildcard {
		return fmt.Errorf("%w: a PREFIXED pattern cannot be %q", ErrInvalid, Wildcard)
	}
	if i := strings.IndexByte(b.Principal, ':'); i <= 0 || i == len(b.Principal)-1 {
		return fmt.Errorf("%w: principal %q is not of the form Type:name", ErrInvalid, b.Principal)
	}
	if b.Host == "" {
		return fmt.Errorf("%w: empty host (use %q for every host)", ErrInvalid, Wildcard)
	}
	if b.Permission != PermAllow && b.Permission != PermDeny {
		return fmt.Errorf("%w: permission %s", ErrInvalid, b.Permission)
	}
	if b.Operation != OpAll {
		found := false
		for _, o := range ops {
			found = found || o == b.Operation
		}
		if !found {
			return fmt.Errorf("%w: operation %s is not defined on %s", ErrInvalid, b.Operation, b.ResourceType)
		}
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls). A nil string field
// matches any value; the ANY values of the enumerations match any value.
// PatternType MATCH with a name selects every ACL that would apply to that
// resource name: literal ACLs of that name, the wildcard, and prefixed ACLs
// whose prefix the name starts with.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate reports a filter Kafka refuses: UNKNOWN values.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == ResourceUnknown || resourceNames[f.ResourceType] == "":
		return fmt.Errorf("%w: filter resource type %d", ErrInvalid, f.ResourceType)
	case f.PatternType == PatternUnknown || patternNames[f.PatternType] == "":
		return fmt.Errorf("%w: filter pattern type %d", ErrInvalid, f.PatternType)
	case f.Operation == OpUnknown || opNames[f.Operation] == "":
		return fmt.Errorf("%w: filter operation %d", ErrInvalid, f.Operation)
	case f.Permission == PermUnknown || permNames[f.Permission] == "":
		return fmt.Errorf("%w: filter permission %d", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case PatternAny:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case PatternMatch:
		if f.ResourceName != nil && !patternMatches(b, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType || (f.ResourceName != nil && *f.ResourceName != b.ResourceName) {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermAny || f.Permission == b.Permission
}

// patternMatches reports whether b's resource pattern covers the resource
// named name (of b's type).
func patternMatches(b Binding, name string) bool {
	switch b.PatternType {
	case PatternLiteral:
		return b.ResourceName == name || b.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}
