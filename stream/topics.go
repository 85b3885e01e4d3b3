package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrTopicMissing is returned by Run when a source or sink topic does not
// exist. The App creates only its internal topics.
var ErrTopicMissing = errors.New("stream: topic does not exist")

// ErrPartitionMismatch is returned by Run when an internal topic exists with
// another partition count than the topology needs (a changelog or repartition
// topic must match its task's input).
var ErrPartitionMismatch = errors.New("stream: partition count mismatch")

// setupTopics checks the external topics and creates the internal ones:
//
//   - "<app>-<store>-repartition": the largest partition count of its upstream inputs;
//   - "<app>-<store>-changelog": compacted, the partition count of the store's input;
//   - "<input>.dlq" for every input (including repartition topics): the input's count.
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
		resp, err := adm.CreateTopic(ctx, n, a.cfg.replication, configs, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
		a.cfg.logger.Info("internal topic ready", "topic", name, "partitions", n)
		return nil
	}
	for _, s := range a.b.sources {
		if !s.internal {
			continue
		}
		var n int32
		for _, up := range s.upstream {
			n = max(n, parts[a.topicOf(a.b.sources[up])])
		}
		name := a.topicOf(s)
		if err := ensure(name, n, nil, true); err != nil {
			return err
		}
		parts[name] = n
	}
	compact := "compact"
	for _, st := range a.b.stores {
		n := parts[a.topicOf(a.b.sources[st.source])]
		if err := ensure(a.changelogTopic(st.name), n, map[string]*string{"cleanup.policy": &compact}, true); err != nil {
			return err
		}
		parts[a.changelogTopic(st.name)] = n
	}
	a.partitions = parts
	for _, s := range a.b.sources {
		name := a.topicOf(s)
		if err := ensure(DLQTopic(name), parts[name], nil, false); err != nil {
			return err
		}
	}
	return nil
}
