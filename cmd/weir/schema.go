package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"
)

// schemaFlags are the settings shared by the weir schema subcommands.
type schemaFlags struct {
	url     string
	timeout time.Duration
}

func defaultRegistryURL() string {
	if v := os.Getenv("WEIR_REGISTRY"); v != "" {
		return v
	}
	return "http://" + defaultRegistryAddr
}

// open returns a registry client and the command's context bounded by
// --timeout.
func (f *schemaFlags) open(cmd *cobra.Command) (context.Context, *sr.Client, context.CancelFunc, error) {
	cl, err := sr.NewClient(sr.URLs(splitList(f.url)...))
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	return ctx, cl, cancel, nil
}

// newSchemaCmd is weir schema: the schema registry's operations, against
// weir's registry or any Confluent-compatible one.
func newSchemaCmd() *cobra.Command {
	f := &schemaFlags{}
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Register, read, check and delete schemas in a Confluent-compatible schema registry",
		Long: `Work with the schema registry at --registry (weir serve's by default): register a
schema under a subject, read it by id or version, list subjects and versions, check a
schema's compatibility before registering it, delete versions or subjects, and read or
set compatibility levels and modes.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "registry", defaultRegistryURL(), "schema registry URL(s), comma separated (WEIR_REGISTRY sets the default)")
	pf.DurationVar(&f.timeout, "timeout", 30*time.Second, "deadline of each command")
	for _, sub := range []*cobra.Command{
		schemaRegisterCmd(f), schemaGetCmd(f), schemaListCmd(f), schemaVersionsCmd(f),
		schemaCheckCmd(f), schemaDeleteCmd(f), schemaConfigCmd(f), schemaModeCmd(f),
	} {
		run := sub.RunE
		sub.RunE = func(cmd *cobra.Command, args []string) error { return registryError(run(cmd, args)) }
		cmd.AddCommand(sub)
	}
	return cmd
}

// registryError adds the registry's error code and HTTP status to an error
// answer (the message alone does not say which error it is).
func registryError(err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return fmt.Errorf("registry: %s (error code %d, HTTP %d)", re.Message, re.ErrorCode, re.StatusCode)
	}
	return err
}

// schemaInput is a schema given on the command line: text or file, type
// and references.
type schemaInput struct {
	file, text, typ string
	refs            []string
}

func (in *schemaInput) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&in.file, "file", "f", "", `file holding the schema ("-" for stdin)`)
	f.StringVar(&in.text, "schema", "", "the schema itself")
	f.StringVarP(&in.typ, "type", "t", "AVRO", "schema type: AVRO, JSON or PROTOBUF")
	f.StringArrayVar(&in.refs, "ref", nil, "a reference NAME=SUBJECT:VERSION (repeatable)")
}

func (in *schemaInput) schema(stdin io.Reader) (sr.Schema, error) {
	text := in.text
	switch {
	case in.file != "" && in.text != "":
		return sr.Schema{}, errors.New("give --file or --schema, not both")
	case in.file == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return sr.Schema{}, err
		}
		text = string(b)
	case in.file != "":
		b, err := os.ReadFile(in.file)
		if err != nil {
			return sr.Schema{}, err
		}
		text = string(b)
	case text == "":
		return sr.Schema{}, errors.New("no schema: give --file or --schema")
	}
	var typ sr.SchemaType
	if err := typ.UnmarshalText([]byte(strings.ToUpper(in.typ))); err != nil {
		return sr.Schema{}, fmt.Errorf("--type: %w", err)
	}
	s := sr.Schema{Schema: text, Type: typ}
	for _, r := range in.refs {
		name, sv, ok1 := strings.Cut(r, "=")
		subject, v, ok2 := strings.Cut(sv, ":")
		version, err := strconv.Atoi(v)
		if !ok1 || !ok2 || err != nil || name == "" || subject == "" {
			return sr.Schema{}, fmt.Errorf("--ref %q: want NAME=SUBJECT:VERSION", r)
		}
		s.References = append(s.References, sr.SchemaReference{Name: name, Subject: subject, Version: version})
	}
	return s, nil
}

// parseSchemaVersion reads a version argument: a number or "latest" (-1).
func parseSchemaVersion(s string) (int, error) {
	if s == "latest" {
		return -1, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("version %q: want a positive number or latest", s)
	}
	return v, nil
}

func schemaRegisterCmd(f *schemaFlags) *cobra.Command {
	var in schemaInput
	var normalize bool
	cmd := &cobra.Command{
		Use:   "register SUBJECT",
		Short: "Register a schema under a subject (its id if already registered)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := in.schema(cmd.InOrStdin())
			if err != nil {
				return err
			}
			ctx, cl, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if normalize {
				ctx = sr.WithParams(ctx, sr.Normalize)
			}
			ss, err := cl.CreateSchema(ctx, args[0], s)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "subject %s version %d id %d\n", ss.Subject, ss.Version, ss.ID)
			return nil
		},
	}
	in.flags(cmd)
	cmd.Flags().BoolVar(&normalize, "normalize", false, "normalize the schema before registering it")
	return cmd
}

func schemaGetCmd(f *schemaFlags) *cobra.Command {
	var id int
	var deleted bool
	cmd := &cobra.Command{
		Use:   "get (--id ID | SUBJECT [VERSION])",
		Short: "Print a schema by id, or a subject's version (default latest)",
		Args:  cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			out := cmd.OutOrStdout()
			if id > 0 {
				if len(args) > 0 {
					return errors.New("give --id or a subject, not both")
				}
				s, err := cl.SchemaByID(ctx, id)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "# id %d type %s\n%s\n", id, s.Type, s.Schema)
				return nil
			}
			if len(args) == 0 {
				return errors.New("give --id or a subject")
			}
			version := -1
			if len(args) == 2 {
				if version, err = parseSchemaVersion(args[1]); err != nil {
					return err
				}
			}
			if deleted {
				ctx = sr.WithParams(ctx, sr.ShowDeleted)
			}
			ss, err := cl.SchemaByVersion(ctx, args[0], version)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "# subject %s version %d id %d type %s\n%s\n", ss.Subject, ss.Version, ss.ID, ss.Type, ss.Schema.Schema)
			return nil
		},
	}
	cmd.Flags().IntVar(&id, "id", 0, "schema id")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include soft-deleted versions")
	return cmd
}

func schemaListCmd(f *schemaFlags) *cobra.Command {
	var deleted bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List subjects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if deleted {
				ctx = sr.WithParams(ctx, sr.ShowDeleted)
			}
			subjects, err := cl.Subjects(ctx)
			if err != nil {
				return err
			}
			for _, s := range subjects {
				fmt.Fprintln(cmd.OutOrStdout(), s)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include soft-deleted subjects")
	return cmd
}

func schemaVersionsCmd(f *schemaFlags) *cobra.Command {
	var deleted bool
	cmd := &cobra.Command{
		Use:   "versions SUBJECT",
		Short: "List a subject's versions with their ids",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if deleted {
				ctx = sr.WithParams(ctx, sr.ShowDeleted)
			}
			schemas, err := cl.Schemas(ctx, args[0])
			if err != nil {
				return err
			}
			for _, s := range schemas {
				fmt.Fprintf(cmd.OutOrStdout(), "version %d id %d type %s\n", s.Version, s.ID, s.Type)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include soft-deleted versions")
	return cmd
}

func schemaCheckCmd(f *schemaFlags) *cobra.Command {
	var in schemaInput
	var version string
	cmd := &cobra.Command{
		Use:   "check SUBJECT",
		Short: "Check a schema's compatibility with a subject's version (exit 1 when incompatible)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := in.schema(cmd.InOrStdin())
			if err != nil {
				return err
			}
			v, err := parseSchemaVersion(version)
			if err != nil {
				return err
			}
			ctx, cl, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			res, err := cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), args[0], v, s)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.Is {
				fmt.Fprintln(out, "compatible")
				return nil
			}
			fmt.Fprintln(out, "incompatible:")
			for _, m := range res.Messages {
				fmt.Fprintln(out, "  "+m)
			}
			return exitError{code: 1}
		},
	}
	in.flags(cmd)
	cmd.Flags().StringVar(&version, "version", "latest", "the version to check against")
	return cmd
}

func schemaDeleteCmd(f *schemaFlags) *cobra.Command {
	var permanent bool
	cmd := &cobra.Command{
		Use:   "delete SUBJECT [VERSION]",
		Short: "Soft-delete a subject or one version (--permanent: delete a soft-deleted one for good)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			how := sr.SoftDelete
			if permanent {
				how = sr.HardDelete
			}
			out := cmd.OutOrStdout()
			if len(args) == 2 {
				v, err := parseSchemaVersion(args[1])
				if err != nil {
					return err
				}
				if err := cl.DeleteSchema(ctx, args[0], v, how); err != nil {
					return err
				}
				fmt.Fprintf(out, "deleted %s version %s\n", args[0], args[1])
				return nil
			}
			vs, err := cl.DeleteSubject(ctx, args[0], how)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "deleted %s versions %v\n", args[0], vs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&permanent, "permanent", false, "permanently delete (the subject or version must be soft-deleted first)")
	return cmd
}

func schemaConfigCmd(f *schemaFlags) *cobra.Command {
	var set string
	var reset bool
	cmd := &cobra.Command{
		Use:   "config [SUBJECT]",
		Short: "Print or set the compatibility level (global, or of a subject)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			var res []sr.CompatibilityResult
			switch {
			case set != "" && reset:
				return errors.New("give --set or --reset, not both")
			case set != "":
				var l sr.CompatibilityLevel
				if err := l.UnmarshalText([]byte(strings.ToUpper(set))); err != nil {
					return fmt.Errorf("--set: %w", err)
				}
				res = cl.SetCompatibility(ctx, sr.SetCompatibility{Level: l}, args...)
			case reset:
				res = cl.ResetCompatibility(ctx, args...)
			default:
				res = cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), args...)
			}
			if res[0].Err != nil {
				return res[0].Err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res[0].Level)
			return nil
		},
	}
	cmd.Flags().StringVar(&set, "set", "", "set the level: NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE")
	cmd.Flags().BoolVar(&reset, "reset", false, "remove the subject's level (it follows the global one), or reset the global one")
	return cmd
}

func schemaModeCmd(f *schemaFlags) *cobra.Command {
	var set string
	var reset, force bool
	cmd := &cobra.Command{
		Use:   "mode [SUBJECT]",
		Short: "Print or set the mode (READWRITE, READONLY, IMPORT), global or of a subject",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			var res []sr.ModeResult
			switch {
			case set != "" && reset:
				return errors.New("give --set or --reset, not both")
			case set != "":
				var m sr.Mode
				if err := m.UnmarshalText([]byte(strings.ToUpper(set))); err != nil {
					return fmt.Errorf("--set: %w", err)
				}
				if force {
					ctx = sr.WithParams(ctx, sr.Force)
				}
				res = cl.SetMode(ctx, m, args...)
			case reset:
				res = cl.ResetMode(ctx, args...)
			default:
				res = cl.Mode(sr.WithParams(ctx, sr.DefaultToGlobal), args...)
			}
			if res[0].Err != nil {
				return res[0].Err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res[0].Mode)
			return nil
		},
	}
	cmd.Flags().StringVar(&set, "set", "", "set the mode: READWRITE, READONLY or IMPORT")
	cmd.Flags().BoolVar(&reset, "reset", false, "remove the subject's mode, or reset the global one")
	cmd.Flags().BoolVar(&force, "force", false, "with --set IMPORT: even if schemas exist")
	return cmd
}
