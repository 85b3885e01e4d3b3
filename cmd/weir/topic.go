package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTopicCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter, trim and delete topics (any Kafka-compatible cluster)",
		Args:  cobra.NoArgs, // "weir topic bogus" is an unknown-command error
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(
		newTopicCreateCmd(cf),
		newTopicListCmd(cf),
		newTopicDescribeCmd(cf),
		newTopicAlterCmd(cf),
		newTopicDeleteCmd(cf),
		newTopicTrimCmd(cf),
	)
	return cmd
}

func newTopicCreateCmd(cf *clientFlags) *cobra.Command {
	var (
		partitions  int32
		replication int16
		configs     []string
		ifNotExists bool
	)
	cmd := &cobra.Command{
		Use:   "create TOPIC...",
		Short: "Create topics",
		Example: `  weir topic create orders -p 6
  weir topic create events -p 12 -c retention.ms=86400000 -c cleanup.policy=delete`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			kvs, err := parseKeyValues("--config", configs)
			if err != nil {
				return err
			}
			cfgs := make(map[string]*string, len(kvs))
			for _, kv := range kvs {
				v := kv[1]
				cfgs[kv[0]] = &v
			}
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.CreateTopics(ctx, partitions, replication, cfgs, topics...)
			if err != nil {
				return fmt.Errorf("create topics: %w", err)
			}
			var errs []error
			out := cmd.OutOrStdout()
			for _, t := range topics {
				r, ok := resps[t]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("topic %q: no answer from the cluster", t))
				case ifNotExists && errors.Is(r.Err, kerr.TopicAlreadyExists):
					fmt.Fprintf(out, "topic %q already exists\n", t)
				case r.Err != nil:
					errs = append(errs, fmt.Errorf("topic %q: %w%s", t, r.Err, detail(r.ErrMessage)))
				default:
					fmt.Fprintf(out, "created topic %q (%d partitions, replication factor %d)\n", t, r.NumPartitions, r.ReplicationFactor)
				}
			}
			return errors.Join(errs...)
		},
	}
	f := cmd.Flags()
	f.Int32VarP(&partitions, "partitions", "p", 1, "number of partitions (-1: the broker's default)")
	f.Int16VarP(&replication, "replication-factor", "r", -1, "replication factor (-1: the broker's default; weir is single-node)")
	f.StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable), e.g. retention.ms=86400000")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "do not fail when a topic already exists")
	return cmd
}

// topicListEntry is one topic of `topic list -o json`.
type topicListEntry struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
	Error             string `json:"error,omitempty"`
}

func newTopicListCmd(cf *clientFlags) *cobra.Command {
	var internal bool
	var output *outputFlag
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics with their partition counts",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var details kadm.TopicDetails
			if internal {
				details, err = adm.ListTopicsWithInternal(ctx)
			} else {
				details, err = adm.ListTopics(ctx)
			}
			if err != nil {
				return fmt.Errorf("list topics: %w", err)
			}
			if output.json() {
				js := []topicListEntry{}
				for _, name := range details.Names() {
					d := details[name]
					e := topicListEntry{Topic: name, Internal: d.IsInternal}
					if d.Err != nil {
						e.Error = d.Err.Error()
					} else {
						e.Partitions, e.ReplicationFactor = len(d.Partitions), d.Partitions.NumReplicas()
					}
					js = append(js, e)
				}
				return writeJSON(cmd.OutOrStdout(), js)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICAS")
			for _, name := range details.Names() {
				d := details[name]
				if d.Err != nil {
					fmt.Fprintf(tw, "%s\terror: %v\t\n", name, d.Err)
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\n", name, len(d.Partitions), d.Partitions.NumReplicas())
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics (__consumer_offsets, ...)")
	output = addOutputFlag(cmd)
	return cmd
}

func newTopicDescribeCmd(cf *clientFlags) *cobra.Command {
	var allConfigs bool
	var adminAddr string
	var output *outputFlag
	cmd := &cobra.Command{
		Use:   "describe TOPIC...",
		Short: "Show partitions (leader, replicas, offsets, size, replay reach) and configs of topics",
		Long: `Show partitions (leader, replicas, offsets, size, replay reach) and configs of topics.

The replay reach of a partition is derived from the cluster: its log start
offset (ListOffsets) and the timestamp of the first record there (Fetch), its
size (DescribeLogDirs) and retention.ms / retention.bytes / cleanup.policy
(DescribeConfigs). For a compacted partition the cleaner's progress (only the
latest value per key before offset N, the full history from N) comes from
weir's read-only admin API (--admin-addr, default the first broker's host and
port 9644), used only if it reports the same topic ID; otherwise the progress
is stated as unknown and only the latest value per key is guaranteed before
the end offset.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			cl, adm, err := cf.clientAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			details, err := adm.ListTopicsWithInternal(ctx, topics...)
			if err != nil {
				return fmt.Errorf("describe topics: %w", err)
			}
			var errs []error
			var found []string
			for _, t := range topics {
				d, ok := details[t]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("topic %q: %w", t, kerr.UnknownTopicOrPartition))
				case d.Err != nil:
					errs = append(errs, fmt.Errorf("topic %q: %w", t, d.Err))
				default:
					found = append(found, t)
				}
			}
			if len(found) == 0 {
				return errors.Join(errs...)
			}
			rs, err := gatherReach(ctx, adm, details, found)
			if err != nil {
				return err
			}
			starts, ends := rs.starts, rs.ends
			docs := topicConfigDocs(ctx, cl, found)
			admin := newAdminSource(adminAddr, cf.brokers, cf.timeout)
			out := cmd.OutOrStdout()
			var js []topicReach
			for i, t := range found {
				rc, _ := rs.cfgs.On(t, nil)
				reach := describeReach(ctx, adm, cl, details[t], starts, ends, rc, rs.sizes, admin)
				if output.json() {
					d := details[t]
					tr := topicReach{Topic: t, ID: topicID(d.ID), Internal: d.IsInternal, ReplicationFactor: d.Partitions.NumReplicas(),
						Configs: map[string]string{}, Partitions: reach}
					for _, c := range rc.Configs {
						if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
							tr.Configs[c.Key] = c.MaybeValue()
						}
					}
					js = append(js, tr)
					continue
				}
				if i > 0 {
					fmt.Fprintln(out)
				}
				printTopic(out, details[t], starts, ends, rc, docs[t], allConfigs)
				printReach(out, reach)
			}
			if output.json() {
				if js == nil {
					js = []topicReach{}
				}
				if err := writeJSON(out, js); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&allConfigs, "all-configs", false, "show every config, not only those set on the topic")
	output = addOutputFlag(cmd)
	cmd.Flags().StringVar(&adminAddr, "admin-addr", "", `weir admin API host:port for the cleaner's progress (default: the first broker's host, port 9644; "off" to not ask)`)
	return cmd
}

// printReach prints the replay reach section of a topic.
func printReach(out io.Writer, rs []partitionReach) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLOG START TIME\tSIZE\tREPLAY REACH")
	for _, r := range rs {
		ts := "-"
		if r.StartTimestamp != "" {
			ts = r.StartTimestamp
		}
		size := "?"
		if r.SizeBytes >= 0 {
			size = strconv.FormatInt(r.SizeBytes, 10)
		}
		reach := r.Reach
		if r.Error != "" {
			reach += " [" + r.Error + "]"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Partition, ts, size, reach)
	}
	_ = tw.Flush()
}

// printTopic prints a topic's partitions and configs; docs (by config name)
// fill the configs' NOTE column, where weir says what it does not enforce.
func printTopic(out io.Writer, d kadm.TopicDetail, starts, ends kadm.ListedOffsets, rc kadm.ResourceConfig, docs map[string]string, all bool) {
	fmt.Fprintf(out, "Topic: %s\nID: %s\nPartitions: %d\nReplication factor: %d\n", d.Topic, topicID(d.ID), len(d.Partitions), d.Partitions.NumReplicas())
	if d.IsInternal {
		fmt.Fprintln(out, "Internal: true")
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tREPLICAS\tISR\tSTART OFFSET\tEND OFFSET\tRECORDS")
	for _, p := range d.Partitions.Sorted() {
		s, e := offsetOf(starts, d.Topic, p.Partition), offsetOf(ends, d.Topic, p.Partition)
		n := "?"
		if s >= 0 && e >= 0 {
			n = strconv.FormatInt(e-s, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, int32s(p.Replicas), int32s(p.ISR), offStr(s), offStr(e), n)
		if p.Err != nil {
			fmt.Fprintf(tw, "\terror: %v\t\t\t\t\t\n", p.Err)
		}
	}
	_ = tw.Flush()
	if rc.Err != nil {
		fmt.Fprintf(out, "Configs: error: %v\n", rc.Err)
		return
	}
	cfgs := append([]kadm.Config(nil), rc.Configs...)
	sort.Slice(cfgs, func(i, j int) bool { return cfgs[i].Key < cfgs[j].Key })
	var shown int
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, c := range cfgs {
		if !all && c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			continue
		}
		if shown == 0 {
			fmt.Fprintln(tw, "CONFIG\tVALUE\tSOURCE\tNOTE")
		}
		shown++
		v := c.MaybeValue()
		if c.Sensitive {
			v = "(sensitive)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Key, v, configSource(c.Source), docs[c.Key])
	}
	if shown == 0 {
		fmt.Fprintln(out, "Configs: (none set on the topic; --all-configs shows defaults)")
		return
	}
	_ = tw.Flush()
}

// topicID formats a topic ID as Kafka's tools do (Uuid.toString: URL-safe
// base64 without padding); "-" when the cluster has no topic IDs.
func topicID(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return "-"
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceStaticBrokerConfig:
		return "broker"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	}
	return strings.ToLower(s.String())
}

func offsetOf(l kadm.ListedOffsets, topic string, p int32) int64 {
	o, ok := l.Lookup(topic, p)
	if !ok || o.Err != nil {
		return -1
	}
	return o.Offset
}

func offStr(o int64) string {
	if o < 0 {
		return "?"
	}
	return strconv.FormatInt(o, 10)
}

func int32s(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(int64(x), 10)
	}
	return strings.Join(s, ",")
}

func newTopicAlterCmd(cf *clientFlags) *cobra.Command {
	var (
		partitions int
		set        []string
		del        []string
	)
	cmd := &cobra.Command{
		Use:   "alter TOPIC...",
		Short: "Add partitions to topics or change their configs",
		Example: `  weir topic alter orders --partitions 12
  weir topic alter orders -c retention.ms=3600000 --delete-config segment.bytes`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			kvs, err := parseKeyValues("--config", set)
			if err != nil {
				return err
			}
			if partitions == 0 && len(kvs) == 0 && len(del) == 0 {
				return errors.New("nothing to alter: give --partitions, --config or --delete-config")
			}
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			out := cmd.OutOrStdout()
			var errs []error
			if partitions > 0 {
				resps, err := adm.UpdatePartitions(ctx, partitions, topics...)
				if err != nil {
					return fmt.Errorf("create partitions: %w", err)
				}
				for _, t := range topics {
					r, ok := resps[t]
					switch {
					case !ok:
						errs = append(errs, fmt.Errorf("topic %q: no answer from the cluster", t))
					case r.Err != nil:
						errs = append(errs, fmt.Errorf("topic %q: partitions: %w%s", t, r.Err, detail(r.ErrMessage)))
					default:
						fmt.Fprintf(out, "topic %q now has %d partitions\n", t, partitions)
					}
				}
			}
			if len(kvs) > 0 || len(del) > 0 {
				var alters []kadm.AlterConfig
				for _, kv := range kvs {
					v := kv[1]
					alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[0], Value: &v})
				}
				for _, k := range del {
					alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
				}
				resps, err := adm.AlterTopicConfigs(ctx, alters, topics...)
				if err != nil {
					return fmt.Errorf("alter configs: %w", err)
				}
				for _, t := range topics {
					r, err := resps.On(t, nil)
					switch {
					case err != nil:
						errs = append(errs, fmt.Errorf("topic %q: no answer from the cluster", t))
					case r.Err != nil:
						errs = append(errs, fmt.Errorf("topic %q: configs: %w%s", t, r.Err, detail(r.ErrMessage)))
					default:
						fmt.Fprintf(out, "topic %q configs updated\n", t)
					}
				}
			}
			return errors.Join(errs...)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&partitions, "partitions", "p", 0, "new total number of partitions (can only grow)")
	f.StringArrayVarP(&set, "config", "c", nil, "set topic config key=value (repeatable)")
	f.StringArrayVar(&del, "delete-config", nil, "remove a topic config override, reverting to the default (repeatable)")
	return cmd
}

func newTopicDeleteCmd(cf *clientFlags) *cobra.Command {
	var ifExists bool
	cmd := &cobra.Command{
		Use:     "delete TOPIC...",
		Aliases: []string{"rm"},
		Short:   "Delete topics and all their data",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.DeleteTopics(ctx, topics...)
			if err != nil {
				return fmt.Errorf("delete topics: %w", err)
			}
			out := cmd.OutOrStdout()
			var errs []error
			for _, t := range topics {
				r, ok := resps[t]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("topic %q: no answer from the cluster", t))
				case ifExists && errors.Is(r.Err, kerr.UnknownTopicOrPartition):
					fmt.Fprintf(out, "topic %q does not exist\n", t)
				case r.Err != nil:
					errs = append(errs, fmt.Errorf("topic %q: %w%s", t, r.Err, detail(r.ErrMessage)))
				default:
					fmt.Fprintf(out, "deleted topic %q\n", t)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "do not fail when a topic does not exist")
	return cmd
}

// detail formats a broker's optional error message.
func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
