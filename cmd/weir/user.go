package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/auth"
)

// weir user: SCRAM users of a broker, over the Kafka protocol
// (AlterUserScramCredentials / DescribeUserScramCredentials, so it works
// against Kafka too) or, with --data-dir, directly in the data directory
// of a stopped weir broker (how the first user of a broker whose listeners
// all require SASL is made). PLAIN logins check the same credentials.
//
// The password comes from --password-stdin (first line of stdin) or
// WEIR_USER_PASSWORD, never from a flag: a command line is visible to every
// user of the machine.

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, delete and list SASL/SCRAM users (PLAIN logins check the same credentials)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cf := addClientFlags(cmd)
	var dataDir string
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "", "work on the data directory of a stopped weir broker instead of over the network")
	cmd.AddCommand(newUserCreateCmd(cf, &dataDir), newUserDeleteCmd(cf, &dataDir), newUserListCmd(cf, &dataDir))
	return cmd
}

var scramMechs = map[string]kadm.ScramMechanism{"SCRAM-SHA-256": kadm.ScramSha256, "SCRAM-SHA-512": kadm.ScramSha512}

func parseMechanisms(ms []string) ([]string, error) {
	var out []string
	for _, m := range ms {
		m = strings.ToUpper(strings.TrimSpace(m))
		if _, ok := scramMechs[m]; !ok {
			return nil, fmt.Errorf("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", m)
		}
		out = append(out, m)
	}
	return out, nil
}

// readPassword takes the password from the first line of stdin
// (--password-stdin) or WEIR_USER_PASSWORD.
func readPassword(stdin io.Reader, fromStdin bool) (string, error) {
	if fromStdin {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read password: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return "", errors.New("empty password on stdin")
		}
		return line, nil
	}
	if p := os.Getenv("WEIR_USER_PASSWORD"); p != "" {
		return p, nil
	}
	return "", errors.New("no password: give --password-stdin or set WEIR_USER_PASSWORD")
}

func newUserCreateCmd(cf *clientFlags, dataDir *string) *cobra.Command {
	var (
		mechs      []string
		iterations int32
		fromStdin  bool
	)
	cmd := &cobra.Command{
		Use:   "create USER",
		Short: "Create a user or change its password",
		Example: `  echo "$PASSWORD" | weir user create alice --password-stdin
  WEIR_USER_PASSWORD=... weir user create alice --data-dir ./weir-data   # broker stopped`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			ms, err := parseMechanisms(mechs)
			if err != nil {
				return err
			}
			pass, err := readPassword(cmd.InOrStdin(), fromStdin)
			if err != nil {
				return err
			}
			if *dataDir != "" {
				for _, m := range ms {
					if err := broker.SetScramPassword(nil, *dataDir, user, m, pass, int(iterations)); err != nil {
						return err
					}
				}
			} else {
				ctx, adm, done, err := cf.adminCtx(cmd.Context())
				if err != nil {
					return err
				}
				defer done()
				var ups []kadm.UpsertSCRAM
				for _, m := range ms {
					ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: scramMechs[m], Iterations: iterations, Password: pass})
				}
				res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
				if err != nil {
					return fmt.Errorf("create user: %w", err)
				}
				if r := res[user]; r.Err != nil {
					return fmt.Errorf("create user %s: %w %s", user, r.Err, r.ErrMessage)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s: %s set\n", user, strings.Join(ms, ", "))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&mechs, "mechanism", []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, "SCRAM mechanisms to store the password for")
	f.Int32Var(&iterations, "iterations", auth.DefaultIterations, "PBKDF2 iterations (4096..16384)")
	f.BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of stdin (else WEIR_USER_PASSWORD)")
	return cmd
}

func newUserDeleteCmd(cf *clientFlags, dataDir *string) *cobra.Command {
	var mechs []string
	cmd := &cobra.Command{
		Use:   "delete USER",
		Short: "Delete a user's credentials",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			if *dataDir != "" {
				found, err := broker.DeleteScramUser(nil, *dataDir, user)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("user %s has no credentials", user)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "user %s deleted\n", user)
				return nil
			}
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			ms, err := parseMechanisms(mechs)
			if err != nil {
				return err
			}
			if len(ms) == 0 {
				d, err := adm.DescribeUserSCRAMs(ctx, user)
				if err != nil {
					return fmt.Errorf("describe user %s: %w", user, err)
				}
				if d[user].Err != nil {
					return fmt.Errorf("user %s: %w", user, d[user].Err)
				}
				for _, ci := range d[user].CredInfos {
					ms = append(ms, ci.Mechanism.String())
				}
			}
			var dels []kadm.DeleteSCRAM
			for _, m := range ms {
				dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: scramMechs[m]})
			}
			res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
			if err != nil {
				return fmt.Errorf("delete user: %w", err)
			}
			if r := res[user]; r.Err != nil {
				return fmt.Errorf("delete user %s: %w %s", user, r.Err, r.ErrMessage)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s deleted (%s)\n", user, strings.Join(ms, ", "))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&mechs, "mechanism", nil, "delete only these mechanisms' credentials (default: all)")
	return cmd
}

func newUserListCmd(cf *clientFlags, dataDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List users and their SCRAM mechanisms",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			users := map[string][]string{}
			if *dataDir != "" {
				var err error
				if users, err = broker.ScramUsers(nil, *dataDir); err != nil {
					return err
				}
			} else {
				ctx, adm, done, err := cf.adminCtx(cmd.Context())
				if err != nil {
					return err
				}
				defer done()
				d, err := adm.DescribeUserSCRAMs(ctx)
				if err != nil {
					return fmt.Errorf("describe users: %w", err)
				}
				for u, r := range d {
					for _, ci := range r.CredInfos {
						users[u] = append(users[u], fmt.Sprintf("%s(%d)", ci.Mechanism, ci.Iterations))
					}
				}
			}
			names := make([]string, 0, len(users))
			for u := range users {
				names = append(names, u)
			}
			sort.Strings(names)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tMECHANISMS")
			for _, u := range names {
				sort.Strings(users[u])
				fmt.Fprintf(tw, "%s\t%s\n", u, strings.Join(users[u], ","))
			}
			return tw.Flush()
		},
	}
}
