package stream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
)

// TestInternalTopicReplicationFromCluster: on a 3-broker cluster, the
// internal topics of an App left at the default replication factor get the
// cluster's default.replication.factor (read from a broker's configs; kfake
// itself would pick 3 for a -1 request), raised to min.insync.replicas; a
// configured factor below min.insync.replicas is refused with
// ErrReplication before anything is created.
func TestInternalTopicReplicationFromCluster(t *testing.T) {
	for _, tc := range []struct {
		name    string
		configs map[string]string
		opt     []stream.Opt
		want    int
		err     error
	}{
		{name: "default", configs: map[string]string{"default.replication.factor": "2"}, want: 2},
		{name: "min.insync.replicas", configs: map[string]string{"default.replication.factor": "1", "min.insync.replicas": "2"}, want: 2},
		{name: "configured", configs: map[string]string{"default.replication.factor": "1"}, opt: []stream.Opt{stream.ReplicationFactor(3)}, want: 3},
		{name: "configured below min.insync.replicas", configs: map[string]string{"min.insync.replicas": "2"},
			opt: []stream.Opt{stream.ReplicationFactor(1)}, err: stream.ErrReplication},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.BrokerConfigs(tc.configs))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, topic := range []string{"in", "out"} {
				if _, err := adm.CreateTopic(ctx, 2, 3, nil, topic); err != nil {
					t.Fatal(err)
				}
			}
			b := stream.NewBuilder()
			in := stream.From(b, "in", stream.String(), stream.String())
			stream.Count(stream.GroupByKey(in), stream.StoreConfig{Name: "n", TTL: time.Hour}).ToStream().To("out", stream.String(), stream.Int64())
			app, err := stream.NewApp("rf", b, append([]stream.Opt{stream.Brokers(c.ListenAddrs()...), stream.StateDir(t.TempDir())}, tc.opt...)...)
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- app.Run(runCtx) }()
			if tc.err != nil {
				if err := <-done; !errors.Is(err, tc.err) {
					t.Fatalf("Run = %v, want %v", err, tc.err)
				}
				stop()
				return
			}
			// Wait for the internal topics, then check every partition's replicas.
			var found map[string]int
			for found == nil || len(found) < 2 {
				if ctx.Err() != nil {
					t.Fatalf("internal topics not created: %v", found)
				}
				time.Sleep(20 * time.Millisecond)
				topics, err := adm.ListTopics(ctx)
				if err != nil {
					continue
				}
				found = map[string]int{}
				for _, td := range topics.Sorted() {
					if strings.HasPrefix(td.Topic, "rf-") || strings.HasPrefix(td.Topic, "rf.") {
						for _, pd := range td.Partitions.Sorted() {
							found[td.Topic] = len(pd.Replicas)
							if len(pd.Replicas) != tc.want {
								t.Errorf("%s/%d: %d replicas, want %d", td.Topic, pd.Partition, len(pd.Replicas), tc.want)
							}
						}
					}
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}
