package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// weir quota: set, remove and list client quotas (AlterClientQuotas,
// DescribeClientQuotas) on weir or any Kafka cluster.

func newQuotaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Set, remove and list client quotas (byte rates, request percentage) per user / client id",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newQuotaSetCmd(cf), newQuotaRemoveCmd(cf), newQuotaListCmd(cf))
	return cmd
}

// entityFlags select one entity: --user NAME | --default-user, and/or
// --client-id NAME | --default-client-id.
type entityFlags struct {
	user, clientID               string
	defaultUser, defaultClientID bool
}

func (e *entityFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.user, "user", "", "user name (the principal without \"User:\")")
	f.BoolVar(&e.defaultUser, "default-user", false, "the default user entity (applies to every user without its own quota)")
	f.StringVar(&e.clientID, "client-id", "", "client id")
	f.BoolVar(&e.defaultClientID, "default-client-id", false, "the default client-id entity")
}

func (e *entityFlags) entity() (kadm.ClientQuotaEntity, error) {
	var ent kadm.ClientQuotaEntity
	switch {
	case e.user != "" && e.defaultUser:
		return nil, errors.New("give --user or --default-user, not both")
	case e.user != "":
		u := e.user
		ent = append(ent, kadm.ClientQuotaEntityComponent{Type: "user", Name: &u})
	case e.defaultUser:
		ent = append(ent, kadm.ClientQuotaEntityComponent{Type: "user"})
	}
	switch {
	case e.clientID != "" && e.defaultClientID:
		return nil, errors.New("give --client-id or --default-client-id, not both")
	case e.clientID != "":
		c := e.clientID
		ent = append(ent, kadm.ClientQuotaEntityComponent{Type: "client-id", Name: &c})
	case e.defaultClientID:
		ent = append(ent, kadm.ClientQuotaEntityComponent{Type: "client-id"})
	}
	if len(ent) == 0 {
		return nil, errors.New("give an entity: --user/--default-user and/or --client-id/--default-client-id")
	}
	return ent, nil
}

// quotaKeys maps the flag names to Kafka's quota keys.
var quotaKeys = map[string]string{
	"producer-byte-rate": "producer_byte_rate",
	"consumer-byte-rate": "consumer_byte_rate",
	"request-percentage": "request_percentage",
}

func alterQuotas(cmd *cobra.Command, cf *clientFlags, ent kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	ctx, adm, done, err := cf.adminCtx(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}})
	if err != nil {
		return fmt.Errorf("alter client quotas: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			if r.ErrMessage != "" {
				return fmt.Errorf("%s: %w: %s", r.Entity, r.Err, r.ErrMessage)
			}
			return fmt.Errorf("%s: %w", r.Entity, r.Err)
		}
	}
	return nil
}

func newQuotaSetCmd(cf *clientFlags) *cobra.Command {
	e := &entityFlags{}
	vals := map[string]*float64{}
	cmd := &cobra.Command{
		Use:   "set ENTITY --producer-byte-rate N | --consumer-byte-rate N | --request-percentage P",
		Short: "Set quotas of one entity",
		Example: `  weir quota set --user alice --producer-byte-rate 1048576
  weir quota set --default-user --consumer-byte-rate 10485760
  weir quota set --user alice --client-id etl --request-percentage 50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ent, err := e.entity()
			if err != nil {
				return err
			}
			var ops []kadm.AlterClientQuotaOp
			for flag, key := range quotaKeys {
				if cmd.Flags().Changed(flag) {
					ops = append(ops, kadm.AlterClientQuotaOp{Key: key, Value: *vals[flag]})
				}
			}
			if len(ops) == 0 {
				return errors.New("give at least one of --producer-byte-rate, --consumer-byte-rate, --request-percentage")
			}
			sort.Slice(ops, func(i, j int) bool { return ops[i].Key < ops[j].Key })
			if err := alterQuotas(cmd, cf, ent, ops); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "set %s\n", ent)
			return nil
		},
	}
	e.add(cmd)
	for flag := range quotaKeys {
		v := new(float64)
		vals[flag] = v
		usage := "bytes per second"
		if flag == "request-percentage" {
			usage = "percent of one request-handling thread (100 = one second of handling per second)"
		}
		cmd.Flags().Float64Var(v, flag, 0, usage)
	}
	return cmd
}

func newQuotaRemoveCmd(cf *clientFlags) *cobra.Command {
	e := &entityFlags{}
	var keys []string
	cmd := &cobra.Command{
		Use:     "remove ENTITY [--key producer-byte-rate,...]",
		Short:   "Remove quotas of one entity (all of them unless --key)",
		Example: `  weir quota remove --user alice --key producer-byte-rate`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ent, err := e.entity()
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				for k := range quotaKeys {
					keys = append(keys, k)
				}
				sort.Strings(keys)
			}
			var ops []kadm.AlterClientQuotaOp
			for _, k := range keys {
				key, ok := quotaKeys[k]
				if !ok {
					key, ok = quotaKeys[strings.ReplaceAll(k, "_", "-")]
				}
				if !ok {
					return fmt.Errorf("unknown quota key %q (producer-byte-rate, consumer-byte-rate, request-percentage)", k)
				}
				ops = append(ops, kadm.AlterClientQuotaOp{Key: key, Remove: true})
			}
			if err := alterQuotas(cmd, cf, ent, ops); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed from %s: %s\n", ent, strings.Join(keys, ", "))
			return nil
		},
	}
	e.add(cmd)
	cmd.Flags().StringSliceVar(&keys, "key", nil, "quota keys to remove (default all)")
	return cmd
}

type quotaJSON struct {
	Entity map[string]*string `json:"entity"`
	Values map[string]float64 `json:"values"`
}

func newQuotaListCmd(cf *clientFlags) *cobra.Command {
	e := &entityFlags{}
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "list [--user U | --default-user] [--client-id C | --default-client-id]",
		Short: "List client quotas, all or those of the entities given",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var comps []kadm.DescribeClientQuotaComponent
			add := func(typ, name string, def bool) {
				switch {
				case name != "":
					n := name
					comps = append(comps, kadm.DescribeClientQuotaComponent{Type: typ, MatchType: kmsg.QuotasMatchTypeExact, MatchName: &n})
				case def:
					comps = append(comps, kadm.DescribeClientQuotaComponent{Type: typ, MatchType: kmsg.QuotasMatchTypeDefault})
				}
			}
			add("user", e.user, e.defaultUser)
			add("client-id", e.clientID, e.defaultClientID)
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			return listQuotas(ctx, cmd, adm, comps, out.json())
		},
	}
	e.add(cmd)
	out = addOutputFlag(cmd)
	return cmd
}

func listQuotas(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, comps []kadm.DescribeClientQuotaComponent, asJSON bool) error {
	qs, err := adm.DescribeClientQuotas(ctx, false, comps)
	if err != nil {
		return fmt.Errorf("describe client quotas: %w", err)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Entity.String() < qs[j].Entity.String() })
	w := cmd.OutOrStdout()
	if asJSON {
		list := make([]quotaJSON, 0, len(qs))
		for _, q := range qs {
			j := quotaJSON{Entity: map[string]*string{}, Values: map[string]float64{}}
			for _, c := range q.Entity {
				j.Entity[c.Type] = c.Name
			}
			for _, v := range q.Values {
				j.Values[v.Key] = v.Value
			}
			list = append(list, j)
		}
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTITY\tQUOTA\tVALUE")
	for _, q := range qs {
		sort.Slice(q.Values, func(i, j int) bool { return q.Values[i].Key < q.Values[j].Key })
		for _, v := range q.Values {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", q.Entity, v.Key, strconv.FormatFloat(v.Value, 'f', -1, 64))
		}
	}
	return tw.Flush()
}
