package mirror

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a mirror. Source and Target are required, and at least
// one of Topics and TopicRegex.
type Config struct {
	// Source and Target are the seed brokers of the cluster copied from
	// and the cluster copied to.
	Source, Target []string
	// SourceOpts and TargetOpts are extra franz-go options for the
	// clients of each side (TLS, SASL, client id, ...). They are applied
	// after the mirror's own, so they can override them; the benchmark
	// baseline uses the same ones.
	SourceOpts, TargetOpts []kgo.Opt

	// Topics are source topics copied by name; TopicRegex selects more by
	// a regular expression matched against the whole name. Topics whose
	// name starts with "__" (a cluster's internal topics) and the mirror's
	// own topics are never selected by TopicRegex.
	Topics     []string
	TopicRegex string
	// Prefix is prepended to the name of every copied topic on the target
	// ("" keeps the names).
	Prefix string

	// ID names the mirror: its progress and offset-sync topics on the
	// target are "weir-mirror.<ID>.progress" and
	// "weir-mirror.<ID>.offset-syncs", and with ExactlyOnce its
	// transactional id is "weir-mirror.<ID>". Default "default". Two
	// mirrors writing to one target need different IDs.
	ID string

	// ExactlyOnce copies in transactions on the target: the records of a
	// round and the progress they make are committed together, so that a
	// read_committed reader of the target sees every source record once,
	// whatever crashes. Without it the mirror is at-least-once; see the
	// package documentation for the duplicate window.
	ExactlyOnce bool

	// MaxPollRecords bounds the records of one round (one transaction with
	// ExactlyOnce). Default 10000.
	MaxPollRecords int
	// RescanInterval is how often the source's topic list is read again
	// for new topics (TopicRegex) and new partitions. Default 30s.
	RescanInterval time.Duration
	// SyncGroups, if not empty, is a regular expression (matched against
	// the whole name) selecting source consumer groups whose committed
	// offsets the mirror translates and commits on the target while it
	// runs, every SyncGroupsInterval (MirrorMaker 2's
	// sync.group.offsets.enabled): a group that stops on the source
	// resumes on the target at the copy of its next record, without a
	// Cutover. A target group's offset never moves backwards, and a group
	// with members on the target is left alone. See the package
	// documentation for the guarantee.
	SyncGroups string
	// SyncGroupsInterval is the period of the group offset sync. Default
	// 10s.
	SyncGroupsInterval time.Duration
	// ReplicationFactor of the topics the mirror creates on the target.
	// Default -1: the target's default.
	ReplicationFactor int16

	// Logger receives the mirror's log. Default: discarded.
	Logger *slog.Logger
	// Registerer is where the mirror registers its metrics (see package
	// documentation). Default: none.
	Registerer prometheus.Registerer
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("mirror: bad configuration")

const (
	defaultID             = "default"
	defaultMaxPollRecords = 10000
	defaultRescan         = 30 * time.Second
	// internalPrefix starts the names of the mirror's own topics.
	internalPrefix = "weir-mirror."
)

// validID are the characters of a Kafka topic name (the ID is part of some).
var validID = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

func (c *Config) withDefaults(needTopics bool) (Config, *regexp.Regexp, error) {
	out := *c
	if out.ID == "" {
		out.ID = defaultID
	}
	if out.MaxPollRecords == 0 {
		out.MaxPollRecords = defaultMaxPollRecords
	}
	if out.RescanInterval == 0 {
		out.RescanInterval = defaultRescan
	}
	if out.ReplicationFactor == 0 {
		out.ReplicationFactor = -1
	}
	if out.SyncGroupsInterval == 0 {
		out.SyncGroupsInterval = defaultSyncGroupsInterval
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if len(out.Source) == 0 {
		errs = append(errs, errors.New("no source brokers"))
	}
	if len(out.Target) == 0 {
		errs = append(errs, errors.New("no target brokers"))
	}
	if !validID.MatchString(out.ID) {
		errs = append(errs, fmt.Errorf("id %q: use letters, digits, '.', '_' and '-'", out.ID))
	}
	if out.Prefix != "" && !validID.MatchString(out.Prefix) {
		errs = append(errs, fmt.Errorf("prefix %q: use letters, digits, '.', '_' and '-'", out.Prefix))
	}
	if out.Prefix == "" && needTopics && sameSeeds(out.Source, out.Target) {
		errs = append(errs, errors.New("source and target are the same cluster: a prefix is needed (else topics would be copied onto themselves)"))
	}
	if out.MaxPollRecords < 1 {
		errs = append(errs, fmt.Errorf("max poll records %d < 1", out.MaxPollRecords))
	}
	if out.RescanInterval < 0 {
		errs = append(errs, fmt.Errorf("rescan interval %v < 0", out.RescanInterval))
	}
	if out.SyncGroupsInterval < 0 {
		errs = append(errs, fmt.Errorf("group sync interval %v < 0", out.SyncGroupsInterval))
	}
	if out.ReplicationFactor < -1 {
		errs = append(errs, fmt.Errorf("replication factor %d: want -1 (target default) or >= 1", out.ReplicationFactor))
	}
	for _, t := range out.Topics {
		if t == "" || strings.HasPrefix(t, internalPrefix) {
			errs = append(errs, fmt.Errorf("topic %q cannot be mirrored", t))
		}
	}
	var re *regexp.Regexp
	if out.TopicRegex != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + out.TopicRegex + ")$"); err != nil {
			errs = append(errs, fmt.Errorf("topic regex: %v", err))
		}
	}
	if _, err := out.groupRegex(); err != nil {
		errs = append(errs, err)
	}
	if needTopics && len(out.Topics) == 0 && out.TopicRegex == "" {
		errs = append(errs, errors.New("no topics: give topic names or a regex"))
	}
	if len(errs) > 0 {
		return out, nil, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return out, re, nil
}

// groupRegex compiles SyncGroups to match whole names; nil if empty.
func (c *Config) groupRegex() (*regexp.Regexp, error) {
	if c.SyncGroups == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + c.SyncGroups + ")$")
	if err != nil {
		return nil, fmt.Errorf("group sync regex: %v", err)
	}
	return re, nil
}

// adminClients returns admin clients of the source and the target (closed
// by their Close).
func (c *Config) adminClients() (src, tgt *kadm.Client, err error) {
	srcCl, err := kgo.NewClient(c.sourceOpts()...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: source client: %w", ErrConfig, err)
	}
	tgtCl, err := kgo.NewClient(c.targetOpts()...)
	if err != nil {
		srcCl.Close()
		return nil, nil, fmt.Errorf("%w: target client: %w", ErrConfig, err)
	}
	return kadm.NewClient(srcCl), kadm.NewClient(tgtCl), nil
}

func (c *Config) progressTopic() string { return internalPrefix + c.ID + ".progress" }
func (c *Config) syncsTopic() string    { return internalPrefix + c.ID + ".offset-syncs" }
func (c *Config) txnID() string         { return internalPrefix + c.ID }

// targetName is the name on the target of source topic t.
func (c *Config) targetName(t string) string { return c.Prefix + t }

// selected reports whether source topic t is mirrored.
func (c *Config) selected(re *regexp.Regexp, t string) bool {
	for _, n := range c.Topics {
		if n == t {
			return true
		}
	}
	return re != nil && !strings.HasPrefix(t, "__") && !strings.HasPrefix(t, internalPrefix) && re.MatchString(t)
}

// metadataMinAge replaces franz-go's 5s: the mirror lists topics it just
// created, and a cached "unknown topic" answer would stall its start.
const metadataMinAge = 200 * time.Millisecond

func (c *Config) sourceOpts(extra ...kgo.Opt) []kgo.Opt {
	o := []kgo.Opt{kgo.SeedBrokers(c.Source...), kgo.ClientID("weir-mirror"), kgo.MetadataMinAge(metadataMinAge)}
	o = append(o, c.SourceOpts...)
	return append(o, extra...)
}

func (c *Config) targetOpts(extra ...kgo.Opt) []kgo.Opt {
	o := []kgo.Opt{kgo.SeedBrokers(c.Target...), kgo.ClientID("weir-mirror"), kgo.MetadataMinAge(metadataMinAge)}
	o = append(o, c.TargetOpts...)
	return append(o, extra...)
}

// sameSeeds reports whether two seed lists name the same brokers.
func sameSeeds(a, b []string) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	set := map[string]bool{}
	for _, s := range a {
		set[s] = true
	}
	for _, s := range b {
		if !set[s] {
			return false
		}
	}
	return true
}
