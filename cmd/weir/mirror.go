package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/weirhq/weir/mirror"
)

// mirrorFlags are the flags shared by weir mirror and its subcommands.
type mirrorFlags struct {
	source, target []string
	id, prefix     string
	topics         []string
	regex          string
}

func (f *mirrorFlags) config() mirror.Config {
	return mirror.Config{Source: f.source, Target: f.target, ID: f.id, Prefix: f.prefix, Topics: f.topics, TopicRegex: f.regex}
}

// newMirrorCmd is weir mirror: a thin layer over package mirror.
func newMirrorCmd() *cobra.Command {
	f := &mirrorFlags{}
	var (
		eos         bool
		maxPoll     int
		rescan      time.Duration
		rf          int16
		metricsAddr string
		verbose     bool
		syncGroups  string
		syncEvery   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Copy topics continuously from one Kafka-protocol cluster to another, and move consumer groups",
		Long: `weir mirror copies topics from a source cluster to a target cluster (weir, Kafka, Redpanda)
until interrupted, as MirrorMaker 2 does: topics selected by name (--topics) or regular
expression (--topic-regex) are created on the target with the same partition count and
configs (renamed with --prefix), and records keep key, value, headers, timestamp and
partition. Transactional source records are copied read_committed.

Progress is stored on the target (topics weir-mirror.<id>.progress and
weir-mirror.<id>.offset-syncs): a restart, even after kill -9, resumes where the copy
stopped, without losing or duplicating a record (records found on the target past the
last progress are compared with the source and skipped). With --exactly-once, records
and progress are committed in one transaction on the target (readers use read_committed).

Consumer groups: with --sync-groups REGEX, the committed offsets of the source groups
whose whole name matches are translated and committed on the target every
--sync-groups-interval (as MirrorMaker 2's sync.group.offsets.enabled): a group that stops
on the source and, after the next sync, starts on the target resumes at the copy of its
next source record, with no gap (at most the records of one in-flight batch read twice,
the window of cutover). A target group's offset never moves backwards, and a group with
members on the target is never written to. A consumer started on the target before the
sync that follows its last source commit resumes from the previous sync, re-reading what
it read since.

weir mirror status shows the copy's lag; weir mirror cutover GROUP moves one stopped
consumer group to the target at the translated offsets, checked and at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			cfg := f.config()
			cfg.ExactlyOnce, cfg.MaxPollRecords, cfg.RescanInterval, cfg.ReplicationFactor = eos, maxPoll, rescan, rf
			cfg.SyncGroups, cfg.SyncGroupsInterval = syncGroups, syncEvery
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			reg := prometheus.NewRegistry()
			cfg.Registerer = reg
			m, err := mirror.New(cfg)
			if err != nil {
				return err
			}
			if metricsAddr != "" {
				ln, err := net.Listen("tcp", metricsAddr)
				if err != nil {
					return fmt.Errorf("--metrics-addr: %w", err)
				}
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				defer srv.Close()
				fmt.Fprintf(cmd.OutOrStdout(), "metrics on http://%s/metrics\n", ln.Addr())
			}
			return m.Run(cmd.Context())
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringSliceVar(&f.source, "source", defaultBrokers(), "source brokers, comma separated (WEIR_BROKERS sets the default)")
	pf.StringSliceVar(&f.target, "target", nil, "target brokers, comma separated (required)")
	pf.StringVar(&f.id, "id", "default", "mirror name: its topics on the target are weir-mirror.<id>.*")
	pf.StringVar(&f.prefix, "prefix", "", "prefix of the target topic names")
	pf.StringSliceVar(&f.topics, "topics", nil, "source topics to copy, comma separated")
	pf.StringVar(&f.regex, "topic-regex", "", "copy the source topics whose whole name matches this regular expression")
	fl := cmd.Flags()
	fl.BoolVar(&eos, "exactly-once", false, "copy in transactions on the target: records and progress committed together")
	fl.IntVar(&maxPoll, "max-poll-records", 10000, "records per round (per transaction with --exactly-once)")
	fl.DurationVar(&rescan, "rescan-interval", 30*time.Second, "how often to look for new source topics and partitions")
	fl.Int16Var(&rf, "replication-factor", -1, "replication factor of the topics created on the target (-1: the target's default)")
	fl.StringVar(&syncGroups, "sync-groups", "", "sync the committed offsets of the source consumer groups whose whole name matches this regular expression to the target")
	fl.DurationVar(&syncEvery, "sync-groups-interval", 10*time.Second, "how often --sync-groups translates and commits group offsets")
	fl.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9465)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	cmd.AddCommand(newMirrorStatusCmd(f), newMirrorCutoverCmd(f))
	return cmd
}

func newMirrorStatusCmd(f *mirrorFlags) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what the mirror has copied and its lag, per partition",
		Long: `weir mirror status reads the mirror's progress on the target and the source's end
offsets (the mirror need not be running). LAG is source offsets not yet copied; LAG-TIME is
0 when caught up, else the age of the last record copied.

With --groups REGEX it shows instead, for each source consumer group matching REGEX and each
partition the mirror copies, the group's offset on the source, the target offset it
translates to (as cutover computes it) and the group's offset on the target: STATE is
synced (a consumer of the group on the target resumes at the copy of its next record),
behind, ahead (never moved back by --sync-groups) or copying (the mirror has not copied up
to the group's offset yet). MEMBERS is the group's members on the target: --sync-groups
leaves a group with members alone.`,
		Args: cobra.NoArgs,
	}
	out := addOutputFlag(cmd)
	var groups string
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "deadline of the command")
	cmd.Flags().StringVar(&groups, "groups", "", `show instead where the source consumer groups whose whole name matches this regular expression stand on the target (".*": all)`)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cancel := contextTimeout(cmd, timeout)
		defer cancel()
		if cmd.Flags().Changed("groups") {
			return mirrorGroupStatus(ctx, cmd, f, groups, out)
		}
		st, err := mirror.Status(ctx, f.config())
		if err != nil {
			return err
		}
		if out.json() {
			if st == nil {
				st = []mirror.PartitionStatus{}
			}
			return writeJSON(cmd.OutOrStdout(), st)
		}
		if len(st) == 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "mirror %s has no progress on the target yet\n", f.id)
			return nil
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tTARGET\tCOPIED\tSOURCE-END\tLAG\tLAG-TIME\tLAST-SYNC")
		var total int64
		for _, s := range st {
			total += max(s.LagRecords, 0)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", s.Topic, s.Partition, s.TargetTopic, s.Copied, s.SourceEnd,
				s.LagRecords, (time.Duration(s.LagSeconds * float64(time.Second))).Round(time.Millisecond), s.LastSync.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "TOTAL\t\t\t\t\t%d\t\t\n", total)
		return tw.Flush()
	}
	return cmd
}

// mirrorGroupStatus prints mirror.GroupStatus.
func mirrorGroupStatus(ctx context.Context, cmd *cobra.Command, f *mirrorFlags, groups string, out *outputFlag) error {
	st, err := mirror.GroupStatus(ctx, f.config(), groups)
	if err != nil {
		return err
	}
	if out.json() {
		if st == nil {
			st = []mirror.GroupPartitionStatus{}
		}
		return writeJSON(cmd.OutOrStdout(), st)
	}
	if len(st) == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "no source group matching %q has offsets of a partition mirror %s copies\n", groups, f.id)
		return nil
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tSOURCE-OFFSET\tTARGET-TOPIC\tTRANSLATED\tTARGET-OFFSET\tSTATE\tMEMBERS")
	for _, s := range st {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\n", s.Group, s.Topic, s.Partition, s.SourceOffset, s.TargetTopic,
			offsetOrDash(s.Translated), offsetOrDash(s.TargetOffset), s.State, s.TargetMembers)
	}
	return tw.Flush()
}

// offsetOrDash prints an offset, or "-" for none (-1).
func offsetOrDash(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

func newMirrorCutoverCmd(f *mirrorFlags) *cobra.Command {
	var (
		opts    mirror.CutoverOptions
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cutover GROUP",
		Short: "Move a stopped consumer group to the target at its translated offsets",
		Long: `weir mirror cutover GROUP translates the group's committed offsets on the source into
offsets of the copies on the target, and commits them for GROUP on the target. Stop the
group's consumers on the source first (refused otherwise, unless --force); the mirror must
have copied up to the group's offsets (waited for up to --wait). The group then reads on
the target from the copy of its next source record: no gap, nothing read twice (if the
source lost records between the mirror's last offset sync and the group's offset, at most
those of that one batch are read twice).`,
		Args: cobra.ExactArgs(1),
	}
	out := addOutputFlag(cmd)
	fl := cmd.Flags()
	fl.DurationVar(&opts.Wait, "wait", time.Minute, "how long to wait for the mirror to copy up to the group's offsets")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print the translated offsets without committing them")
	fl.BoolVar(&opts.Force, "force", false, "do not check that the group has stopped on the source")
	fl.DurationVar(&timeout, "timeout", 5*time.Minute, "deadline of the command")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cancel := contextTimeout(cmd, timeout)
		defer cancel()
		trs, err := mirror.Cutover(ctx, f.config(), args[0], opts)
		if errors.Is(err, mirror.ErrGroupActive) {
			return fmt.Errorf("%w (or use --force)", err)
		}
		if err != nil {
			return err
		}
		if out.json() {
			if trs == nil {
				trs = []mirror.Translation{}
			}
			return writeJSON(cmd.OutOrStdout(), trs)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tSOURCE-OFFSET\tTARGET-TOPIC\tTARGET-OFFSET")
		for _, t := range trs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\n", t.Topic, t.Partition, t.SourceOffset, t.TargetTopic, t.TargetOffset)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		verb := "committed on the target"
		if opts.DryRun {
			verb = "not committed (--dry-run)"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "group %s: %d partitions %s\n", args[0], len(trs), verb)
		return nil
	}
	return cmd
}

// contextTimeout is the command's context with a deadline.
func contextTimeout(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), d)
}
