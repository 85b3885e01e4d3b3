package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
)

// weir acl: add, list and remove ACLs on weir or any Kafka cluster with an
// authorizer (CreateAcls, DescribeAcls, DeleteAcls).

type aclFlags struct {
	allow, deny         []string
	hosts               []string
	ops                 []string
	topic, group, txnID string
	cluster             bool
	pattern             string
	principal, host     string // list/remove filters
	permission          string
	producer, consumer  bool // add: kafka-acls' convenience sets
	idempotent          bool
}

func newACLCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, list and remove ACLs (needs an authorizer: weir serve --authorizer acl)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newACLAddCmd(cf), newACLListCmd(cf), newACLRemoveCmd(cf))
	return cmd
}

// resourceFlags registers the resource selection flags.
func (f *aclFlags) resourceFlags(cmd *cobra.Command, patternDefault string) {
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "", "topic name (\"*\" for every topic)")
	fl.StringVar(&f.group, "group", "", "consumer group name")
	fl.StringVar(&f.txnID, "transactional-id", "", "transactional id")
	fl.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fl.StringVar(&f.pattern, "pattern", patternDefault, "resource pattern type: literal or prefixed (list/remove: also any, match)")
}

// resource returns the selected resource; none selected is ok only if
// optional.
func (f *aclFlags) resource(optional bool) (authz.ResourceType, *string, error) {
	var (
		rt   authz.ResourceType
		name string
		n    int
	)
	if f.topic != "" {
		rt, name, n = authz.ResourceTopic, f.topic, n+1
	}
	if f.group != "" {
		rt, name, n = authz.ResourceGroup, f.group, n+1
	}
	if f.txnID != "" {
		rt, name, n = authz.ResourceTransactionalID, f.txnID, n+1
	}
	if f.cluster {
		rt, name, n = authz.ResourceCluster, authz.ClusterName, n+1
	}
	switch {
	case n > 1:
		return 0, nil, errors.New("give one of --topic, --group, --transactional-id, --cluster")
	case n == 0 && !optional:
		return 0, nil, errors.New("give one of --topic, --group, --transactional-id, --cluster")
	case n == 0:
		return authz.ResourceAny, nil, nil
	}
	return rt, &name, nil
}

func newACLAddCmd(cf *clientFlags) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:   "add (--allow P | --deny P)... (--operation OP... RESOURCE | --producer | --consumer)",
		Short: "Create ACLs: every principal x host x operation given, on one resource (or kafka-acls' --producer/--consumer sets)",
		Example: `  weir acl add --allow User:alice --operation read,describe --topic orders
  weir acl add --allow User:app --operation write --topic logs- --pattern prefixed
  weir acl add --deny User:mallory --operation all --group '*'
  weir acl add --allow User:etl --producer --topic orders --transactional-id etl- --pattern prefixed
  weir acl add --allow User:svc --consumer --topic orders --group billing`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pt, err := authz.ParsePatternType(f.pattern)
			if err != nil {
				return err
			}
			if len(f.allow)+len(f.deny) == 0 {
				return errors.New("give --allow or --deny with a principal (User:name)")
			}
			gs, err := f.grants(pt)
			if err != nil {
				return err
			}
			hosts := f.hosts
			if len(hosts) == 0 {
				hosts = []string{authz.Wildcard}
			}
			req := kmsg.NewPtrCreateACLsRequest()
			var made []authz.Binding
			for _, pp := range []struct {
				perm       authz.Permission
				principals []string
			}{{authz.PermAllow, f.allow}, {authz.PermDeny, f.deny}} {
				for _, p := range pp.principals {
					for _, h := range hosts {
						for _, g := range gs {
							for _, op := range g.ops {
								b := authz.Binding{ResourceType: g.rt, ResourceName: g.name, PatternType: g.pt, Principal: p,
									Host: h, Operation: op, Permission: pp.perm}
								if err := b.Validate(); err != nil {
									return err
								}
								made = append(made, b)
								c := kmsg.NewCreateACLsRequestCreation()
								c.ResourceType, c.ResourceName = kmsg.ACLResourceType(g.rt), g.name
								c.ResourcePatternType = kmsg.ACLResourcePatternType(g.pt)
								c.Principal, c.Host = p, h
								c.Operation, c.PermissionType = kmsg.ACLOperation(op), kmsg.ACLPermissionType(pp.perm)
								req.Creations = append(req.Creations, c)
							}
						}
					}
				}
			}
			cl, err := cf.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return fmt.Errorf("create acls: %w", err)
			}
			var errs []error
			for i, r := range resp.Results {
				if err := aclErr(r.ErrorCode, r.ErrorMessage); err != nil && i < len(made) {
					errs = append(errs, fmt.Errorf("%s: %w", made[i], err))
				} else if i < len(made) {
					fmt.Fprintf(cmd.OutOrStdout(), "created: %s\n", made[i])
				}
			}
			return errors.Join(errs...)
		},
	}
	f.resourceFlags(cmd, "literal")
	fl := cmd.Flags()
	fl.StringArrayVar(&f.allow, "allow", nil, "principal to allow (User:name; User:* for everyone; User:CN=svc,O=Acme for a certificate), repeatable (not comma separated: certificate principals hold commas)")
	fl.StringArrayVar(&f.deny, "deny", nil, "principal to deny, repeatable (not comma separated)")
	fl.StringSliceVar(&f.hosts, "host", nil, "client host (IP) the ACL applies to (default every host: *)")
	fl.StringSliceVar(&f.ops, "operation", nil, "operations, comma separated or repeated")
	fl.BoolVar(&f.producer, "producer", false, "kafka-acls' --producer: WRITE, DESCRIBE, CREATE on --topic; WRITE, DESCRIBE on --transactional-id if given; IDEMPOTENT_WRITE on the cluster with --idempotent")
	fl.BoolVar(&f.idempotent, "idempotent", false, "with --producer: IDEMPOTENT_WRITE on the cluster")
	fl.BoolVar(&f.consumer, "consumer", false, "kafka-acls' --consumer: READ, DESCRIBE on --topic and READ on --group")
	return cmd
}

// grant is a set of operations on one resource pattern.
type grant struct {
	rt   authz.ResourceType
	name string
	pt   authz.PatternType
	ops  []authz.Operation
}

// grants turns the add flags into the operations to grant per resource:
// --operation on the one resource given, or the --producer / --consumer
// sets (kafka-acls' convenience options, allow only).
func (f *aclFlags) grants(pt authz.PatternType) ([]grant, error) {
	if !f.producer && !f.consumer {
		if f.idempotent {
			return nil, errors.New("--idempotent goes with --producer")
		}
		rt, name, err := f.resource(false)
		if err != nil {
			return nil, err
		}
		if len(f.ops) == 0 {
			return nil, errors.New("give --operation (read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write, all), or --producer / --consumer")
		}
		g := grant{rt: rt, name: *name, pt: pt}
		for _, o := range f.ops {
			op, err := authz.ParseOperation(o)
			if err != nil {
				return nil, err
			}
			g.ops = append(g.ops, op)
		}
		return []grant{g}, nil
	}
	switch {
	case len(f.ops) > 0:
		return nil, errors.New("--operation does not go with --producer / --consumer")
	case len(f.deny) > 0:
		return nil, errors.New("--producer / --consumer grant: use --allow, not --deny")
	case f.topic == "":
		return nil, errors.New("--producer / --consumer need --topic")
	case f.cluster:
		return nil, errors.New("--cluster does not go with --producer / --consumer")
	}
	var gs []grant
	if f.producer {
		gs = append(gs, grant{authz.ResourceTopic, f.topic, pt, []authz.Operation{authz.OpWrite, authz.OpDescribe, authz.OpCreate}})
		if f.txnID != "" {
			gs = append(gs, grant{authz.ResourceTransactionalID, f.txnID, pt, []authz.Operation{authz.OpWrite, authz.OpDescribe}})
		}
		if f.idempotent {
			gs = append(gs, grant{authz.ResourceCluster, authz.ClusterName, authz.PatternLiteral, []authz.Operation{authz.OpIdempotentWrite}})
		}
	} else if f.txnID != "" || f.idempotent {
		return nil, errors.New("--transactional-id / --idempotent go with --producer")
	}
	if f.consumer {
		if f.group == "" {
			return nil, errors.New("--consumer needs --group")
		}
		gs = append(gs, grant{authz.ResourceTopic, f.topic, pt, []authz.Operation{authz.OpRead, authz.OpDescribe}},
			grant{authz.ResourceGroup, f.group, pt, []authz.Operation{authz.OpRead}})
	} else if f.group != "" {
		return nil, errors.New("--group goes with --consumer here")
	}
	return gs, nil
}

// filterFlags registers the list/remove filter flags.
func (f *aclFlags) filterFlags(cmd *cobra.Command) {
	f.resourceFlags(cmd, "any")
	fl := cmd.Flags()
	fl.StringVar(&f.principal, "principal", "", "only ACLs of this principal")
	fl.StringVar(&f.host, "host", "", "only ACLs of this host")
	fl.StringVar(&f.permission, "permission", "any", "allow, deny or any")
	fl.StringSliceVar(&f.ops, "operation", nil, "only this operation (default any)")
}

// filter builds the DescribeAcls/DeleteAcls filter; narrowed reports
// whether any flag narrows it (remove refuses a filter selecting all).
func (f *aclFlags) filter() (fl authz.Filter, narrowed bool, err error) {
	rt, name, err := f.resource(true)
	if err != nil {
		return fl, false, err
	}
	pt, err := authz.ParsePatternType(f.pattern)
	if err != nil {
		return fl, false, err
	}
	perm, err := authz.ParsePermission(f.permission)
	if err != nil {
		return fl, false, err
	}
	op := authz.OpAny
	switch len(f.ops) {
	case 0:
	case 1:
		if op, err = authz.ParseOperation(f.ops[0]); err != nil {
			return fl, false, err
		}
	default:
		return fl, false, errors.New("give at most one --operation to filter on")
	}
	fl = authz.Filter{ResourceType: rt, ResourceName: name, PatternType: pt, Operation: op, Permission: perm}
	if f.principal != "" {
		fl.Principal = &f.principal
	}
	if f.host != "" {
		fl.Host = &f.host
	}
	narrowed = name != nil || fl.Principal != nil || fl.Host != nil || op != authz.OpAny || perm != authz.PermAny
	return fl, narrowed, nil
}

func newACLListCmd(cf *clientFlags) *cobra.Command {
	f := &aclFlags{}
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "list [filters]",
		Short: "List ACLs, all or those the filters select",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl, _, err := f.filter()
			if err != nil {
				return err
			}
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourceName = kmsg.ACLResourceType(fl.ResourceType), fl.ResourceName
			req.ResourcePatternType = kmsg.ACLResourcePatternType(fl.PatternType)
			req.Principal, req.Host = fl.Principal, fl.Host
			req.Operation, req.PermissionType = kmsg.ACLOperation(fl.Operation), kmsg.ACLPermissionType(fl.Permission)
			cl, err := cf.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return fmt.Errorf("describe acls: %w", err)
			}
			if err := aclErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
				return fmt.Errorf("describe acls: %w", err)
			}
			var bs []authz.Binding
			for _, r := range resp.Resources {
				for _, a := range r.ACLs {
					bs = append(bs, authz.Binding{ResourceType: authz.ResourceType(r.ResourceType), ResourceName: r.ResourceName,
						PatternType: authz.PatternType(r.ResourcePatternType), Principal: a.Principal, Host: a.Host,
						Operation: authz.Operation(a.Operation), Permission: authz.Permission(a.PermissionType)})
				}
			}
			return printACLs(cmd.OutOrStdout(), bs, out.json())
		},
	}
	f.filterFlags(cmd)
	out = addOutputFlag(cmd)
	return cmd
}

func newACLRemoveCmd(cf *clientFlags) *cobra.Command {
	f := &aclFlags{}
	var all bool
	cmd := &cobra.Command{
		Use:   "remove [filters]",
		Short: "Delete the ACLs the filters select (--all to delete every ACL)",
		Example: `  weir acl remove --principal User:alice --topic orders
  weir acl remove --topic logs- --pattern prefixed --operation write`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl, narrowed, err := f.filter()
			if err != nil {
				return err
			}
			if !narrowed && !all {
				return errors.New("no filter given: this would remove every ACL (add --all to mean it)")
			}
			req := kmsg.NewPtrDeleteACLsRequest()
			rf := kmsg.NewDeleteACLsRequestFilter()
			rf.ResourceType, rf.ResourceName = kmsg.ACLResourceType(fl.ResourceType), fl.ResourceName
			rf.ResourcePatternType = kmsg.ACLResourcePatternType(fl.PatternType)
			rf.Principal, rf.Host = fl.Principal, fl.Host
			rf.Operation, rf.PermissionType = kmsg.ACLOperation(fl.Operation), kmsg.ACLPermissionType(fl.Permission)
			req.Filters = append(req.Filters, rf)
			cl, err := cf.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return fmt.Errorf("delete acls: %w", err)
			}
			n := 0
			for _, r := range resp.Results {
				if err := aclErr(r.ErrorCode, r.ErrorMessage); err != nil {
					return fmt.Errorf("delete acls: %w", err)
				}
				for _, m := range r.MatchingACLs {
					n++
					fmt.Fprintf(cmd.OutOrStdout(), "removed: %s\n", authz.Binding{ResourceType: authz.ResourceType(m.ResourceType),
						ResourceName: m.ResourceName, PatternType: authz.PatternType(m.ResourcePatternType), Principal: m.Principal,
						Host: m.Host, Operation: authz.Operation(m.Operation), Permission: authz.Permission(m.PermissionType)})
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d ACLs removed\n", n)
			return nil
		},
	}
	f.filterFlags(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "allow a filter that selects every ACL")
	return cmd
}

// aclErr is the error of an ACL response code (nil for 0), with the
// broker's message.
func aclErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

type aclJSON struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func printACLs(w io.Writer, bs []authz.Binding, asJSON bool) error {
	sort.SliceStable(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		if a.ResourceType != b.ResourceType {
			return a.ResourceType < b.ResourceType
		}
		if a.ResourceName != b.ResourceName {
			return a.ResourceName < b.ResourceName
		}
		return a.Principal < b.Principal
	})
	if asJSON {
		out := make([]aclJSON, 0, len(bs))
		for _, b := range bs {
			out = append(out, aclJSON{b.ResourceType.String(), b.ResourceName, b.PatternType.String(), b.Principal,
				b.Host, b.Operation.String(), b.Permission.String()})
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tNAME\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, b := range bs {
		fmt.Fprintln(tw, strings.Join([]string{b.ResourceType.String(), b.ResourceName, b.PatternType.String(),
			b.Principal, b.Host, b.Operation.String(), b.Permission.String()}, "\t"))
	}
	return tw.Flush()
}
