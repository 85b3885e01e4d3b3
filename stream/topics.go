package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrTopicMissing is returned by Run when a source or sink topic does not
// exist. The App creates only its internal topics.
var ErrTopicMissing = errors.New("stream: topic does not exist")

// ErrPartitionMismatch is returned by Run when an internal topic exists with
// another partition count than the topology needs (a changelog or repartition
// topic must match its task's input), or when the input topics of a
// sub-topology that joins a table are not co-partitioned (different
// partition counts; the error names the topics and their counts).
var ErrPartitionMismatch = errors.New("stream: partition count mismatch")

// ErrReplication is returned by Run when the replication factor of the
// internal topics cannot work on the cluster: below its min.insync.replicas
// (every acks=all write, hence every commit, would be refused) or above its
// number of brokers.
var ErrReplication = errors.New("stream: replication factor does not fit the cluster")

// internalReplication resolves the replication factor of the internal
// topics. A configured factor is checked against the cluster; the default
// (-1) becomes the cluster's default.replication.factor, raised to its
// min.insync.replicas and capped at its broker count, read from one broker's
// configs (a cluster-level DescribeConfigs answers only dynamic values).
// If the broker does not describe its configs, -1 is passed on to
// CreateTopics (the broker's own default).
func (a *App) internalReplication(ctx context.Context, adm *kadm.Client) (int16, error) {
	rf := a.cfg.replication
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil || len(meta.Brokers) == 0 {
		a.cfg.logger.Warn("cannot list brokers: internal topics get the broker's default replication factor", "err", err)
		return rf, nil
	}
	brokers := int16(len(meta.Brokers))
	ids := meta.Brokers.NodeIDs()
	rcs, err := adm.DescribeBrokerConfigs(ctx, ids[0])
	var defRF, minISR int16 = -1, 1
	if err == nil && len(rcs) == 1 && rcs[0].Err == nil {
		for _, c := range rcs[0].Configs {
			n, perr := strconv.Atoi(c.MaybeValue())
			if perr != nil || n < 1 || n > 32767 {
				continue
			}
			switch c.Key {
			case "default.replication.factor":
				defRF = int16(n)
			case "min.insync.replicas":
				minISR = int16(n)
			}
		}
	} else {
		a.cfg.logger.Warn("cannot describe broker configs: min.insync.replicas not checked", "err", err)
	}
	if rf == -1 {
		if defRF == -1 {
			return -1, nil
		}
		rf = min(max(defRF, minISR), brokers)
	}
	if rf < minISR || rf > brokers {
		return 0, fmt.Errorf("%w: replication factor %d, cluster has %d brokers and min.insync.replicas %d", ErrReplication, rf, brokers, minISR)
	}
	return rf, nil
}

// setupTopics checks the external topics and creates the internal ones:
//
//   - "<app>-<store>-repartition": the largest partition count of its upstream inputs, or,
//     in a sub-topology reading a table, the table's count (co-partitioned with it);
//   - "<app>-<store>-changelog": compacted, one partition per task of the store's sub-topology
//     (a table has none: its source topic is its changelog);
//   - the dead-letter topic "<app>.dlq" with the largest count of the inputs; with DLQPerTopic,
//     "<input>.dlq" for every input (including repartition topics) with the input's count.
//
// Before creating anything it checks co-partitioning: the external source
// topics of a sub-topology reading a table must have equal partition counts.
func (a *App) setupTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(a.clientOpts()...)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	var external []string
	for _, s := range a.b.sources {
		if !s.internal {
			external = append(external, s.topic)
		}
	}
	for _, s := range a.b.sinks {
		if !s.internal {
			external = append(external, s.topic)
		}
	}
	details, err := adm.ListTopics(ctx, external...)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	parts := map[string]int32{}
	for _, name := range external {
		d, ok := details[name]
		if !ok || d.Err != nil {
			return fmt.Errorf("%w: %s", ErrTopicMissing, name)
		}
		parts[name] = int32(len(d.Partitions))
	}
	if err := a.copartitionCheck(parts); err != nil {
		return err
	}
	rf, err := a.internalReplication(ctx, adm)
	if err != nil {
		return err
	}
	ensure := func(name string, n int32, configs map[string]*string, strict bool) error {
		d, err := adm.ListTopics(ctx, name)
		if err != nil {
			return fmt.Errorf("list topic %s: %w", name, err)
		}
		if td, ok := d[name]; ok && td.Err == nil {
			if got := int32(len(td.Partitions)); strict && got != n {
				return fmt.Errorf("%w: %s has %d partitions, want %d", ErrPartitionMismatch, name, got, n)
			}
			return nil
		}
		resp, err := adm.CreateTopic(ctx, n, rf, configs, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
		a.cfg.logger.Info("internal topic ready", "topic", name, "partitions", n, "replication", rf)
		return nil
	}
	for _, s := range a.b.sources {
		if !s.internal {
			continue
		}
		n := a.repartitionCount(s, func(topic string) int32 { return parts[topic] })
		name := a.topicOf(s)
		if err := ensure(name, n, nil, true); err != nil {
			return err
		}
		parts[name] = n
	}
	a.partitions = parts
	compact := "compact"
	for _, st := range a.b.stores {
		if st.table {
			continue
		}
		n := a.taskCount(a.subs[a.subOf[st.source]])
		if err := ensure(a.changelogTopic(st.name), n, map[string]*string{"cleanup.policy": &compact}, true); err != nil {
			return err
		}
		parts[a.changelogTopic(st.name)] = n
	}
	for topic, n := range a.dlqTopics(func(topic string) int32 { return parts[topic] }) {
		if err := ensure(topic, n, nil, false); err != nil {
			return err
		}
	}
	return nil
}

// repartitionCount is the partition count of internal source s given the
// counts of the topics before it: in a co-partitioned sub-topology the count
// of its external sources (equal, see copartitionCheck), else the largest
// count of its upstream sources.
func (a *App) repartitionCount(s *sourceNode, partitions func(topic string) int32) int32 {
	if st := a.subs[a.subOf[s.idx]]; st.copartitioned {
		for _, o := range st.sources {
			if !o.internal {
				return partitions(o.topic)
			}
		}
		// Only repartition topics: the first one's count (the one of an
		// aggregate declared before any join of its table) is every one's.
		if first := st.sources[0]; first != s {
			return a.repartitionCount(first, partitions)
		}
	}
	var n int32
	for _, up := range s.upstream {
		n = max(n, partitions(a.topicOf(a.b.sources[up])))
	}
	return n
}

// dlqTopics returns the dead-letter topics and their partition counts, given
// the inputs' counts.
func (a *App) dlqTopics(partitions func(topic string) int32) map[string]int32 {
	out := map[string]int32{}
	for _, s := range a.b.sources {
		name := a.topicOf(s)
		dlq := a.dlqTopic(name)
		out[dlq] = max(out[dlq], partitions(name))
	}
	return out
}
