package mirror

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorWeirToKafkaAndBack copies topics from weir to a 3-broker
// cluster (renamed with a prefix) and back, under both guarantees, while
// records keep arriving, and compares every record: key (null included),
// value, headers, timestamp, partition and order; transactional input
// copied read_committed (aborted records absent). The target topics get the
// source's partition counts and explicitly set configs.
func TestMirrorWeirToKafkaAndBack(t *testing.T) {
	for _, eos := range []bool{false, true} {
		name := "AtLeastOnce"
		if eos {
			name = "ExactlyOnce"
		}
		t.Run(name, func(t *testing.T) {
			weir, kf := startWeir(t), startKfake(t)
			retention := "3600000"
			weir.createTopic(t, "orders", 3, map[string]*string{"retention.ms": &retention})
			weir.createTopic(t, "payments", 2, nil)
			weir.produce(t, "orders", 3, 0, 500)
			weir.produceTxn(t, "payments", 2, 0, 40)

			there := Config{Source: weir.seeds, Target: kf.seeds, TopicRegex: "orders|pay.*", Prefix: "weir.",
				ID: "there", ExactlyOnce: eos, MaxPollRecords: 64}
			stopThere := runMirror(t, there)
			weir.produce(t, "orders", 3, 500, 500) // while the mirror runs
			weir.produceTxn(t, "payments", 2, 40, 40)
			waitCaughtUp(t, there, map[string]int32{"orders": 3, "payments": 2})
			if n := sameTopic(t, weir, "orders", kf, "weir.orders"); n != 1000 {
				t.Errorf("orders: %d records compared, want 1000", n)
			}
			if n := sameTopic(t, weir, "payments", kf, "weir.payments"); n != 80 {
				t.Errorf("payments: %d committed records compared, want 80", n)
			}
			checkTargetTopic(t, kf, "weir.orders", 3, "retention.ms", retention)

			back := Config{Source: kf.seeds, Target: weir.seeds, Topics: []string{"weir.orders"}, Prefix: "back.",
				ID: "back", ExactlyOnce: eos, MaxPollRecords: 64}
			stopBack := runMirror(t, back)
			waitCaughtUp(t, back, map[string]int32{"weir.orders": 3})
			sameTopic(t, weir, "orders", weir, "back.weir.orders")
			for _, stop := range []func() error{stopThere, stopBack} {
				if err := stop(); err != nil {
					t.Errorf("mirror stop: %v", err)
				}
			}
		})
	}
}

func checkTargetTopic(t *testing.T, c *cluster, topic string, partitions int, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := c.adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(td[topic].Partitions); got != partitions {
		t.Errorf("%s: %d partitions, want %d", topic, got, partitions)
	}
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cf := range rc.Configs {
		if cf.Key == key {
			if cf.MaybeValue() != value || cf.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("%s %s = %q (source %v), want %q set on the topic", topic, key, cf.MaybeValue(), cf.Source, value)
			}
			return
		}
	}
	t.Errorf("%s: config %s not found", topic, key)
}

// TestMirrorRestartResumes stops a mirror cleanly mid-stream and starts a
// new one: it resumes from the progress stored on the target, with nothing
// missing and nothing twice.
func TestMirrorRestartResumes(t *testing.T) {
	weir, kf := startWeir(t), startKfake(t)
	weir.createTopic(t, "events", 2, nil)
	cfg := Config{Source: weir.seeds, Target: kf.seeds, Topics: []string{"events"}, MaxPollRecords: 10}
	weir.produce(t, "events", 2, 0, 300)
	stop := runMirror(t, cfg)
	waitCaughtUp(t, cfg, map[string]int32{"events": 2})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	weir.produce(t, "events", 2, 300, 300)
	// Stopped: the status shows the lag, in records and in time.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var lag int64
	for _, s := range st {
		lag += s.LagRecords
		if s.LagSeconds < time.Since(t0.Add(300*time.Millisecond)).Seconds()-60 {
			t.Errorf("%s/%d: lag %.0fs, want the age of the last copied record", s.Topic, s.Partition, s.LagSeconds)
		}
	}
	if lag != 300 {
		t.Errorf("status lag %d records, want 300: %+v", lag, st)
	}
	stop = runMirror(t, cfg)
	waitCaughtUp(t, cfg, map[string]int32{"events": 2})
	if n := sameTopic(t, weir, "events", kf, "events"); n != 600 {
		t.Errorf("%d records, want 600", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorSkipsRecordsAlreadyCopied: records on the target after the
// last stored sync (a mirror killed between the acknowledgement and its
// sync) are compared with the source and not copied again; records that
// differ are not skipped.
func TestMirrorSkipsRecordsAlreadyCopied(t *testing.T) {
	weir, kf := startWeir(t), startKfake(t)
	weir.createTopic(t, "events", 1, nil)
	cfg := Config{Source: weir.seeds, Target: kf.seeds, Topics: []string{"events"}}
	weir.produce(t, "events", 1, 0, 100)
	stop := runMirror(t, cfg)
	waitCaughtUp(t, cfg, map[string]int32{"events": 1})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// What a killed mirror leaves: the next 30 copies on the target, no sync.
	weir.produce(t, "events", 1, 100, 100)
	kf.produce(t, "events", 1, 100, 30)
	stop = runMirror(t, cfg)
	waitCaughtUp(t, cfg, map[string]int32{"events": 1})
	if n := sameTopic(t, weir, "events", kf, "events"); n != 200 {
		t.Errorf("%d records, want 200", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorConfigErrors: bad configurations are typed errors.
func TestMirrorConfigErrors(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no source":   {Target: []string{"x:1"}, Topics: []string{"a"}},
		"no target":   {Source: []string{"x:1"}, Topics: []string{"a"}},
		"no topics":   {Source: []string{"x:1"}, Target: []string{"y:1"}},
		"bad regex":   {Source: []string{"x:1"}, Target: []string{"y:1"}, TopicRegex: "("},
		"bad id":      {Source: []string{"x:1"}, Target: []string{"y:1"}, Topics: []string{"a"}, ID: "a/b"},
		"bad prefix":  {Source: []string{"x:1"}, Target: []string{"y:1"}, Topics: []string{"a"}, Prefix: "a b"},
		"own topic":   {Source: []string{"x:1"}, Target: []string{"y:1"}, Topics: []string{"weir-mirror.x.progress"}},
		"bad rf":      {Source: []string{"x:1"}, Target: []string{"y:1"}, Topics: []string{"a"}, ReplicationFactor: -2},
		"onto itself": {Source: []string{"x:1", "y:1"}, Target: []string{"y:1", "x:1"}, Topics: []string{"a"}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", name, err)
		}
	}
}

// TestMirrorMissingTopic: a named topic missing on the source ends Run with
// ErrTopicMissing instead of retrying.
func TestMirrorMissingTopic(t *testing.T) {
	weir, kf := startWeir(t), startKfake(t)
	m, err := New(Config{Source: weir.seeds, Target: kf.seeds, Topics: []string{"nope"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Run(ctx); !errors.Is(err, ErrTopicMissing) {
		t.Fatalf("Run = %v, want ErrTopicMissing", err)
	}
}

// TestMirrorPicksUpNewTopicsAndPartitions: with a regex, a topic created on
// the source after the mirror started is copied too, and partitions added
// to a mirrored topic are added on the target and copied.
func TestMirrorPicksUpNewTopicsAndPartitions(t *testing.T) {
	weir, kf := startWeir(t), startKfake(t)
	weir.createTopic(t, "t1", 2, nil)
	weir.produce(t, "t1", 2, 0, 100)
	cfg := Config{Source: weir.seeds, Target: kf.seeds, TopicRegex: `t\d`}
	runMirror(t, cfg) // rescans every 200ms
	waitCaughtUp(t, cfg, map[string]int32{"t1": 2})

	weir.createTopic(t, "t2", 3, nil)
	weir.produce(t, "t2", 3, 0, 90)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := weir.adm.UpdatePartitions(ctx, 3, "t1"); err != nil {
		t.Fatal(err)
	}
	newCluster(t, weir.seeds).produce(t, "t1", 3, 100, 90) // a client that knows the new partition
	waitCaughtUp(t, cfg, map[string]int32{"t1": 3, "t2": 3})
	if n := sameTopic(t, weir, "t1", kf, "t1"); n != 190 {
		t.Errorf("t1: %d records, want 190", n)
	}
	if n := sameTopic(t, weir, "t2", kf, "t2"); n != 90 {
		t.Errorf("t2: %d records, want 90", n)
	}
}

// TestMirrorTargetWithMorePartitions: a target topic with more partitions
// than its source is refused (keys would be placed differently).
func TestMirrorTargetWithMorePartitions(t *testing.T) {
	weir, kf := startWeir(t), startKfake(t)
	weir.createTopic(t, "a", 2, nil)
	kf.createTopic(t, "a", 4, nil)
	m, err := New(Config{Source: weir.seeds, Target: kf.seeds, Topics: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Run(ctx); !errors.Is(err, ErrPartitionMismatch) {
		t.Fatalf("Run = %v, want ErrPartitionMismatch", err)
	}
}
