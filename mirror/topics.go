package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrTopicMissing is returned when a topic named in Config.Topics does not
// exist on the source.
var ErrTopicMissing = errors.New("mirror: source topic does not exist")

// ErrPartitionMismatch is returned when a target topic exists with more
// partitions than its source: records keep their partition, so a keyed
// producer on the target would place keys elsewhere than the copies.
var ErrPartitionMismatch = errors.New("mirror: target topic has more partitions than its source")

// skippedConfigs are topic configs not copied: they describe the source's
// placement or are not settable at creation on every broker.
var skippedConfigs = map[string]bool{
	"leader.replication.throttled.replicas":   true,
	"follower.replication.throttled.replicas": true,
	"message.format.version":                  true,
}

// ensureInternal creates the mirror's topics on the target: progress
// (compacted: the last sync of each partition survives forever) and
// offset-syncs (the full history for translating group offsets, kept for
// the target's default retention).
func ensureInternal(ctx context.Context, cfg *Config, tgt *kadm.Client) error {
	compact, del, hour := "compact", "delete", "3600000"
	for name, configs := range map[string]map[string]*string{
		// Segments roll hourly so that compaction keeps the progress
		// topic (read whole at every start) short.
		cfg.progressTopic(): {"cleanup.policy": &compact, "segment.ms": &hour},
		cfg.syncsTopic():    {"cleanup.policy": &del},
	} {
		resp, err := tgt.CreateTopic(ctx, 1, cfg.ReplicationFactor, configs, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s on target: %w", name, err)
		}
	}
	return waitTopics(ctx, tgt, cfg.progressTopic(), cfg.syncsTopic())
}

// sourceTopics lists the selected source topics and their partition
// counts. With named set, a named topic missing is an error.
func (m *Mirror) sourceTopics(ctx context.Context, named bool) (map[string]int32, error) {
	all, err := m.srcAdm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list source topics: %w", err)
	}
	out := map[string]int32{}
	for _, td := range all.Sorted() {
		if td.Err == nil && m.cfg.selected(m.re, td.Topic) {
			out[td.Topic] = int32(len(td.Partitions))
		}
	}
	if named {
		for _, t := range m.cfg.Topics {
			if _, ok := out[t]; !ok {
				return nil, fmt.Errorf("%w: %s", ErrTopicMissing, t)
			}
		}
	}
	return out, nil
}

// ensureTargets creates (or grows) the target topic of every source topic
// in topics: same partition count, and the source's explicitly set topic
// configs (retention, compaction, timestamps, ...).
func (m *Mirror) ensureTargets(ctx context.Context, topics map[string]int32) error {
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	var targets []string
	for _, t := range names {
		targets = append(targets, m.cfg.targetName(t))
	}
	existing, err := m.tgtAdm.ListTopics(ctx, targets...)
	if err != nil {
		return fmt.Errorf("list target topics: %w", err)
	}
	var missing []string
	for _, t := range names {
		want := topics[t]
		td, ok := existing[m.cfg.targetName(t)]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t)
			continue
		}
		if td.Err != nil {
			return fmt.Errorf("target topic %s: %w", td.Topic, td.Err)
		}
		switch have := int32(len(td.Partitions)); {
		case have > want:
			return fmt.Errorf("%w: %s has %d, source %s has %d", ErrPartitionMismatch, td.Topic, have, t, want)
		case have < want:
			resp, err := m.tgtAdm.UpdatePartitions(ctx, int(want), td.Topic)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return fmt.Errorf("grow %s to %d partitions: %w", td.Topic, want, err)
			}
			m.cfg.Logger.Info("target topic grown", "topic", td.Topic, "partitions", want)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rcs, err := m.srcAdm.DescribeTopicConfigs(ctx, missing...)
	if err != nil {
		return fmt.Errorf("describe source topic configs: %w", err)
	}
	for _, t := range missing {
		configs := map[string]*string{}
		rc, err := rcs.On(t, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return fmt.Errorf("configs of source topic %s: %w", t, err)
		}
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !c.Sensitive && c.Value != nil && !skippedConfigs[c.Key] {
				configs[c.Key] = c.Value
			}
		}
		name := m.cfg.targetName(t)
		resp, err := m.tgtAdm.CreateTopic(ctx, topics[t], m.cfg.ReplicationFactor, configs, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create target topic %s: %w", name, err)
		}
		m.cfg.Logger.Info("target topic created", "topic", name, "source", t, "partitions", topics[t], "configs", len(configs))
	}
	var created []string
	for _, t := range missing {
		created = append(created, m.cfg.targetName(t))
	}
	return waitTopics(ctx, m.tgtAdm, created...)
}

// waitTopics waits (up to 10s) until every partition of the topics just
// created has a leader in the cluster's metadata, so that the offsets
// listed next are not refused as unknown; it gives up silently (the run
// restarts on the error that follows, if any).
func waitTopics(ctx context.Context, adm *kadm.Client, topics ...string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		td, err := adm.ListTopics(ctx, topics...)
		ready := err == nil
		for _, t := range topics {
			d, ok := td[t]
			if !ok || d.Err != nil || len(d.Partitions) == 0 {
				ready = false
				break
			}
			for _, p := range d.Partitions {
				if p.Err != nil || p.Leader < 0 {
					ready = false
				}
			}
		}
		if ready || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// partitionsOf lists the partitions of topics.
func partitionsOf(topics map[string]int32) []tp {
	var out []tp
	for t, n := range topics {
		for p := int32(0); p < n; p++ {
			out = append(out, tp{t, p})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}

// lookup returns the offset of t/p in l, or an error.
func lookup(l kadm.ListedOffsets, t string, p int32) (int64, error) {
	o, ok := l.Lookup(t, p)
	if !ok {
		return 0, fmt.Errorf("no offset listed for %s/%d", t, p)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("%s/%d: %w", t, p, o.Err)
	}
	return o.Offset, nil
}
