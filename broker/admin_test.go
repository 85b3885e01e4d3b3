package broker

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCreateTopicsErrors(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, b)
	mustCreate(t, ctx, b, "exists", 1)

	type tc struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]string
		want       *kerr.Error
	}
	cases := []tc{
		{"ok", "fresh", 2, 1, map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"}, nil},
		{"default partitions", "dflt", -1, -1, nil, nil},
		{"exists", "exists", 1, 1, nil, kerr.TopicAlreadyExists},
		{"bad name", "bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"dot", "..", 1, 1, nil, kerr.InvalidTopicException},
		{"empty", "", 1, 1, nil, kerr.InvalidTopicException},
		{"zero partitions", "zp", 0, 1, nil, kerr.InvalidPartitions},
		{"rf 3", "rf3", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"unknown config", "uc", 1, 1, map[string]string{"no.such.config": "1"}, kerr.InvalidConfig},
		{"bad number", "bn", 1, 1, map[string]string{"retention.ms": "soon"}, kerr.InvalidConfig},
		{"bad policy", "bp", 1, 1, map[string]string{"cleanup.policy": "forever"}, kerr.InvalidConfig},
		{"bad ts type", "bt", 1, 1, map[string]string{"message.timestamp.type": "Now"}, kerr.InvalidConfig},
		{"below min", "bm", 1, 1, map[string]string{"segment.bytes": "1"}, kerr.InvalidConfig},
		{"collides", "exi_sts", 1, 1, nil, nil},
		{"internal exists", offsetsTopic, 1, 1, nil, kerr.TopicAlreadyExists},
		{"internal txn", "__transaction_state", 1, 1, nil, kerr.TopicAlreadyExists},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.topic, c.partitions, c.rf
			for k, v := range c.configs {
				rc := kmsg.NewCreateTopicsRequestTopicConfig()
				rc.Name, rc.Value = k, kmsg.StringPtr(v)
				rt.Configs = append(rt.Configs, rc)
			}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			st := resp.Topics[0]
			got := kerr.ErrorForCode(st.ErrorCode)
			if c.want == nil && got != nil || c.want != nil && !errors.Is(got, c.want) {
				t.Fatalf("got %v (%v), want %v", got, deref(st.ErrorMessage), c.want)
			}
			if c.want == nil {
				if st.TopicID == [16]byte{} {
					t.Fatal("no topic ID")
				}
				want := c.partitions
				if want == -1 {
					want = 1
				}
				if st.NumPartitions != want {
					t.Fatalf("partitions %d want %d", st.NumPartitions, want)
				}
			} else if c.want == kerr.InvalidConfig && st.ErrorMessage == nil {
				t.Fatal("INVALID_CONFIG without a message")
			}
		})
	}
	// "exi.sts" collides with "exi_sts" created above.
	adm := kadm.NewClient(cl)
	r, _ := adm.CreateTopic(ctx, 1, 1, nil, "exi.sts")
	if !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Fatalf("collision: %v", r.Err)
	}
	// Validate-only creates nothing.
	vr, err := adm.ValidateCreateTopics(ctx, 4, 1, nil, "vonly")
	if err != nil || vr["vonly"].Err != nil {
		t.Fatalf("validate only: %v %v", err, vr["vonly"].Err)
	}
	if _, ok := b.topics.get("vonly"); ok {
		t.Fatal("validate-only created the topic")
	}
	// The same name twice in one request.
	req := kmsg.NewPtrCreateTopicsRequest()
	for range 2 {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "twice", 1, 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range resp.Topics {
		if st.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("duplicate name: %d", st.ErrorCode)
		}
	}
	if _, ok := b.topics.get("twice"); ok {
		t.Fatal("duplicate-name request created the topic")
	}
}

func TestDeleteTopicsByNameAndID(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, b)
	mustCreate(t, ctx, b, "a", 2)
	mustCreate(t, ctx, b, "b", 1)
	adm := kadm.NewClient(cl)
	rs, err := adm.DeleteTopics(ctx, "a", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if rs["a"].Err != nil || !errors.Is(rs["nope"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: a=%v nope=%v", rs["a"].Err, rs["nope"].Err)
	}
	if _, ok := b.topics.get("a"); ok {
		t.Fatal("a still exists")
	}
	tb, _ := b.topics.get("b")
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: tb.id}, {TopicID: [16]byte{1}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("by id: %+v", resp.Topics)
	}
	if _, ok := b.topics.get("b"); ok {
		t.Fatal("b still exists")
	}
	// Internal topic.
	rs, _ = adm.DeleteTopics(ctx, offsetsTopic)
	if rs[offsetsTopic].Err == nil {
		t.Fatal("deleted __consumer_offsets")
	}
	// Recreate with the same name: a new ID and an empty log.
	mustCreate(t, ctx, b, "a", 1)
	ta, _ := b.topics.get("a")
	if ta.parts[0].HighWatermark() != 0 {
		t.Fatal("recreated topic is not empty")
	}
}

func TestCreatePartitions(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, b))
	mustCreate(t, ctx, b, "cp", 2)
	r, err := adm.UpdatePartitions(ctx, 5, "cp")
	if err != nil || r["cp"].Err != nil {
		t.Fatalf("grow: %v %v", err, r["cp"].Err)
	}
	if tp, _ := b.topics.get("cp"); len(tp.parts) != 5 {
		t.Fatalf("partitions %d", len(tp.parts))
	}
	r, _ = adm.UpdatePartitions(ctx, 3, "cp")
	if !errors.Is(r["cp"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrink: %v", r["cp"].Err)
	}
	r, _ = adm.UpdatePartitions(ctx, 3, "missing")
	if !errors.Is(r["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing: %v", r["missing"].Err)
	}
	r, _ = adm.ValidateUpdatePartitions(ctx, 9, "cp")
	if r["cp"].Err != nil {
		t.Fatal(r["cp"].Err)
	}
	if tp, _ := b.topics.get("cp"); len(tp.parts) != 5 {
		t.Fatalf("validate-only changed partitions to %d", len(tp.parts))
	}
}

func TestConfigsDescribeAlter(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	mustCreate(t, ctx, b, "c", 1, "retention.ms", "60000")

	rcs, err := adm.DescribeTopicConfigs(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("c", nil)
	if err != nil || rc.Err != nil {
		t.Fatal(err, rc.Err)
	}
	byName := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		byName[c.Key] = c
	}
	ret := byName["retention.ms"]
	if ret.MaybeValue() != "60000" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms = %q source %v", ret.MaybeValue(), ret.Source)
	}
	if len(ret.Synonyms) != 2 || ret.Synonyms[1].Key != "log.retention.ms" || ret.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms synonyms %+v", ret.Synonyms)
	}
	seg := byName["segment.bytes"]
	if seg.MaybeValue() != "1073741824" || seg.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes %q %v", seg.MaybeValue(), seg.Source)
	}
	for _, want := range []string{"cleanup.policy", "retention.bytes", "segment.ms", "max.message.bytes", "message.timestamp.type", "min.insync.replicas"} {
		if _, ok := byName[want]; !ok {
			t.Errorf("%s not described", want)
		}
	}

	// Incremental: set one, delete another, append to a list.
	ir, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kmsg.StringPtr("2000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact")},
	}, "c")
	if err != nil || ir[0].Err != nil {
		t.Fatalf("incremental: %v %v", err, ir)
	}
	tc, _ := b.topics.get("c")
	if tc.configs["max.message.bytes"] != "2000" || tc.configs["cleanup.policy"] != "delete,compact" {
		t.Fatalf("configs after incremental: %v", tc.configs)
	}
	if _, ok := tc.configs["retention.ms"]; ok {
		t.Fatal("retention.ms not deleted")
	}
	// A bad op changes nothing.
	ir, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("5")},
		{Op: kadm.AppendConfig, Name: "retention.bytes", Value: kmsg.StringPtr("5")},
	}, "c")
	if !errors.Is(ir[0].Err, kerr.InvalidConfig) {
		t.Fatalf("append to non-list: %v", ir[0].Err)
	}
	if tc, _ := b.topics.get("c"); tc.configs["retention.ms"] != "" {
		t.Fatal("failed alter applied partially")
	}

	// Legacy AlterConfigs replaces all overrides.
	lr, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: kmsg.StringPtr("1000")}}, "c")
	if err != nil || lr[0].Err != nil {
		t.Fatalf("legacy alter: %v %v", err, lr)
	}
	if tc, _ := b.topics.get("c"); len(tc.configs) != 1 || tc.configs["segment.ms"] != "1000" {
		t.Fatalf("configs after legacy alter: %v", tc.configs)
	}

	// Broker configs: described, not alterable.
	bcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := bcs.On("0", nil)
	found := false
	for _, c := range bc.Configs {
		if c.Key == "log.retention.ms" && c.MaybeValue() == "604800000" {
			found = true
		}
	}
	if !found {
		t.Fatalf("log.retention.ms not in broker configs")
	}
	br, _ := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("1")}}, 0)
	if len(br) == 0 || br[0].Err == nil {
		t.Fatal("broker config altered")
	}
	// Unknown topic.
	rcs, _ = adm.DescribeTopicConfigs(ctx, "nope")
	if rc, _ := rcs.On("nope", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", rc.Err)
	}
}

// Topics, IDs, configs and the cluster ID survive a restart.
func TestRegistryPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t)
	b1, _ := testBroker(t, func(c *Config) { c.DataDir = dir })
	mustCreate(t, ctx, b1, "keep", 3, "retention.ms", "12345", "cleanup.policy", "compact")
	mustCreate(t, ctx, b1, "gone", 1)
	adm := kadm.NewClient(newClient(t, b1))
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	t1, _ := b1.topics.get("keep")
	cid := b1.ClusterID()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}

	b2, _ := testBroker(t, func(c *Config) { c.DataDir = dir; c.ClusterID = "ignored" })
	if b2.ClusterID() != cid {
		t.Fatalf("cluster id %q, want %q", b2.ClusterID(), cid)
	}
	t2, ok := b2.topics.get("keep")
	if !ok || t2.id != t1.id || len(t2.parts) != 3 || t2.configs["retention.ms"] != "12345" || t2.configs["cleanup.policy"] != "compact" {
		t.Fatalf("after restart: %+v", t2)
	}
	if _, ok := b2.topics.get("gone"); ok {
		t.Fatal("deleted topic came back")
	}
	if _, ok := b2.topics.get(offsetsTopic); !ok {
		t.Fatal("no __consumer_offsets")
	}
}

func TestDescribeClusterAndLogDirs(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, b))
	mustCreate(t, ctx, b, "ld", 2)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Cluster != b.ClusterID() || len(meta.Brokers) != 1 || meta.Controller != 0 {
		t.Fatalf("metadata %+v", meta)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "ld" {
				n++
			}
		})
	})
	if n != 2 {
		t.Fatalf("log dirs list %d partitions of ld, want 2", n)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("disk usage total %d usable %d", d.TotalBytes, d.UsableBytes)
		}
	})
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, newClient(t, b))
	if err != nil || resp.ClusterID != b.ClusterID() || len(resp.Brokers) != 1 || resp.Brokers[0].Port != b.port {
		t.Fatalf("describe cluster: %v %+v", err, resp)
	}
}

// Altered configs reach the partition logs: lowering max.message.bytes
// makes a previously accepted batch MESSAGE_TOO_LARGE, also after a
// restart.
func TestAlteredConfigApplied(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t)
	b, _ := testBroker(t, func(c *Config) { c.DataDir = dir })
	mustCreate(t, ctx, b, "ap", 1)
	batch := makeBatch(1, string(make([]byte, 500)))
	c := dialRaw(t, b)
	if p := c.roundTrip(produceReq(9, -1, "ap", 0, slices.Clone(batch)), 1).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("before alter: %d", p.ErrorCode)
	}
	adm := kadm.NewClient(newClient(t, b))
	r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kmsg.StringPtr("100")}}, "ap")
	if err != nil || r[0].Err != nil {
		t.Fatal(err, r)
	}
	if p := c.roundTrip(produceReq(9, -1, "ap", 0, slices.Clone(batch)), 2).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("after alter: %d", p.ErrorCode)
	}
	b.Close()
	b2, _ := testBroker(t, func(c *Config) { c.DataDir = dir })
	c2 := dialRaw(t, b2)
	if p := c2.roundTrip(produceReq(9, -1, "ap", 0, slices.Clone(batch)), 3).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("after restart: %d", p.ErrorCode)
	}
}
