package share_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/vfs"
)

// rawMember speaks KIP-932 with raw requests to node 0.
type rawMember struct {
	t      *testing.T
	cl     *kgo.Client
	group  string
	id     string
	epoch  int32 // share session epoch of the next request
	member int32
}

func newRawMember(t *testing.T, addr, group, id string) *rawMember {
	return &rawMember{t: t, cl: newClient(t, addr), group: group, id: id}
}

func (m *rawMember) req(ctx context.Context, r kmsg.Request) kmsg.Response {
	m.t.Helper()
	resp, err := m.cl.Broker(0).Request(ctx, r)
	if err != nil {
		m.t.Fatalf("%s: %v", kmsg.NameForKey(r.Key()), err)
	}
	return resp
}

func (m *rawMember) join(ctx context.Context, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	m.t.Helper()
	r := kmsg.NewPtrShareGroupHeartbeatRequest()
	r.GroupID, r.MemberID, r.MemberEpoch, r.SubscribedTopicNames = m.group, m.id, 0, topics
	resp := m.req(ctx, r).(*kmsg.ShareGroupHeartbeatResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		m.t.Fatalf("join: %v", err)
	}
	m.member = resp.MemberEpoch
	return resp
}

// fetch sends a ShareFetch of topicID's partition 0 in the member's
// session (opening it at epoch 0) and returns that partition's answer.
func (m *rawMember) fetch(ctx context.Context, topicID [16]byte, maxWait int32) kmsg.ShareFetchResponseTopicPartition {
	m.t.Helper()
	r := kmsg.NewPtrShareFetchRequest()
	r.Version = 2
	r.GroupID, r.MemberID = &m.group, &m.id
	r.ShareSessionEpoch, r.MaxWaitMillis, r.MaxBytes, r.MaxRecords, r.BatchSize = m.epoch, maxWait, 1<<20, 500, 500
	r.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
	resp := m.req(ctx, r).(*kmsg.ShareFetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		m.t.Fatalf("share fetch (epoch %d): %v", m.epoch, err)
	}
	m.epoch++
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return p
		}
	}
	return kmsg.ShareFetchResponseTopicPartition{}
}

// ack sends one ShareAcknowledge of partition 0 and returns its error.
func (m *rawMember) ack(ctx context.Context, topicID [16]byte, batches ...kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) error {
	m.t.Helper()
	r := kmsg.NewPtrShareAcknowledgeRequest()
	r.Version = 2
	r.GroupID, r.MemberID, r.ShareSessionEpoch = &m.group, &m.id, m.epoch
	r.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0, AcknowledgementBatches: batches}}}}
	resp := m.req(ctx, r).(*kmsg.ShareAcknowledgeResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	m.epoch++
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

func ackBatch(first, last int64, typ int8) kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}
}

// acquiredOffsets flattens a partition's acquired ranges to offset ->
// delivery count.
func acquiredOffsets(p kmsg.ShareFetchResponseTopicPartition) map[int64]int16 {
	out := map[int64]int16{}
	for _, a := range p.AcquiredRecords {
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			out[o] = a.DeliveryCount
		}
	}
	return out
}

func topicID(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata %s: %v %+v", topic, err, resp)
	}
	return resp.Topics[0].TopicID
}

// The share state survives a power loss (only fsynced data of the
// crashable in-memory FS survives): accepted and rejected records are
// never delivered again, records acquired at the crash come back with
// their delivery count, and the delivery count limit holds across it.
func TestShareStateSurvivesCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	b := startBroker(t, broker.Config{DataDir: "/data", FS: mem})
	ctx := testCtx(t, 60*time.Second)
	admin := newClient(t, b.Addr())
	const topic, group = "dur", "durable"
	createTopic(t, ctx, admin, topic, 1)
	setGroupConfigs(t, ctx, admin, group, "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2")
	produceKeys(t, ctx, b.Addr(), topic, 10)
	id := topicID(t, ctx, admin, topic)

	m := newRawMember(t, b.Addr(), group, "a")
	m.join(ctx, topic)
	got := acquiredOffsets(m.fetch(ctx, id, 1000))
	if len(got) != 10 {
		t.Fatalf("first fetch acquired %v, want offsets 0-9", got)
	}
	for o, c := range got {
		if c != 1 {
			t.Fatalf("offset %d delivery count %d, want 1", o, c)
		}
	}
	// A crash right after the fetch: the delivery counts were durable
	// before the records were handed out.
	afterFetch := mem.CrashClone()
	if err := m.ack(ctx, id, ackBatch(0, 2, 1), ackBatch(3, 3, 3)); err != nil {
		t.Fatalf("accept 0-2, reject 3: %v", err)
	}
	{
		b := startBroker(t, broker.Config{DataDir: "/data", FS: afterFetch})
		m := newRawMember(t, b.Addr(), group, "x")
		m.join(ctx, topic)
		got := acquiredOffsets(m.fetch(ctx, id, 1000))
		for o := int64(0); o < 10; o++ {
			if got[o] != 2 {
				t.Fatalf("crash after the first fetch: acquired %v, want 0-9 with delivery count 2", got)
			}
		}
	}

	crashed := mem.CrashClone()
	b2 := startBroker(t, broker.Config{DataDir: "/data", FS: crashed})
	m2 := newRawMember(t, b2.Addr(), group, "b")
	m2.join(ctx, topic)
	again := acquiredOffsets(m2.fetch(ctx, id, 1000))
	want := map[int64]int16{4: 2, 5: 2, 6: 2, 7: 2, 8: 2, 9: 2}
	if len(again) != len(want) {
		t.Fatalf("after crash acquired %v, want %v", again, want)
	}
	for o, c := range want {
		if again[o] != c {
			t.Fatalf("after crash acquired %v, want %v", again, want)
		}
	}
	// Released at the limit: archived, never delivered a third time, even
	// across another crash.
	if err := m2.ack(ctx, id, ackBatch(4, 9, 2)); err != nil {
		t.Fatalf("release 4-9: %v", err)
	}
	b3 := startBroker(t, broker.Config{DataDir: "/data", FS: crashed.CrashClone()})
	m3 := newRawMember(t, b3.Addr(), group, "c")
	m3.join(ctx, topic)
	if p := m3.fetch(ctx, id, 200); len(p.AcquiredRecords) != 0 {
		t.Fatalf("archived records delivered again: %+v", p.AcquiredRecords)
	}
	checkStartOffsets(t, ctx, newClient(t, b3.Addr()), group, topic, map[int32]int64{0: 10})
}

// Internal topics are never assigned to a share group member nor
// delivered to one that names them in a ShareFetch.
func TestShareInternalTopicsNeverDelivered(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 30*time.Second)
	admin := newClient(t, b.Addr())
	createTopic(t, ctx, admin, "plain", 1)
	// Commit an offset so __consumer_offsets holds a record.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "classic", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "plain", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	if _, err := oc.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	m := newRawMember(t, b.Addr(), "g", "a")
	hb := m.join(ctx, "__consumer_offsets", "__share_group_state", "plain")
	plain := topicID(t, ctx, admin, "plain")
	if hb.Assignment == nil || len(hb.Assignment.TopicPartitions) != 1 || hb.Assignment.TopicPartitions[0].TopicID != plain {
		t.Fatalf("assignment %+v, want only topic plain", hb.Assignment)
	}
	for _, internal := range []string{"__consumer_offsets", "__share_group_state"} {
		id := topicID(t, ctx, admin, internal)
		p := m.fetch(ctx, id, 0)
		if p.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(p.AcquiredRecords) != 0 || len(p.Records) != 0 {
			t.Fatalf("fetch of %s: error %d, %d acquired ranges", internal, p.ErrorCode, len(p.AcquiredRecords))
		}
	}
}

// An acknowledgement of a record the member does not hold is
// INVALID_RECORD_STATE and changes nothing; a wrong session epoch is
// INVALID_SHARE_SESSION_EPOCH; closing the session releases what it held.
func TestShareAckRulesAndSessionClose(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 30*time.Second)
	admin := newClient(t, b.Addr())
	createTopic(t, ctx, admin, "t", 1)
	setGroupConfigs(t, ctx, admin, "g", "share.auto.offset.reset", "earliest")
	produceKeys(t, ctx, b.Addr(), "t", 4)
	id := topicID(t, ctx, admin, "t")
	a, c := newRawMember(t, b.Addr(), "g", "a"), newRawMember(t, b.Addr(), "g", "c")
	a.join(ctx, "t")
	c.join(ctx, "t")
	if got := acquiredOffsets(a.fetch(ctx, id, 500)); len(got) != 4 {
		t.Fatalf("a acquired %v", got)
	}
	if p := c.fetch(ctx, id, 100); len(p.AcquiredRecords) != 0 {
		t.Fatalf("c acquired records a holds: %+v", p.AcquiredRecords)
	}
	if err := c.ack(ctx, id, ackBatch(0, 0, 1)); err != kerr.InvalidRecordState {
		t.Fatalf("c accepting a's record: %v, want INVALID_RECORD_STATE", err)
	}
	a.epoch += 5
	if err := a.ack(ctx, id, ackBatch(0, 0, 1)); err != kerr.InvalidShareSessionEpoch {
		t.Fatalf("wrong epoch: %v, want INVALID_SHARE_SESSION_EPOCH", err)
	}
	a.epoch -= 5
	a.epoch = -1 // close: releases 0-3
	if err := a.ack(ctx, id, ackBatch(0, 0, 1)); err != nil {
		t.Fatalf("closing ack: %v", err)
	}
	got := acquiredOffsets(c.fetch(ctx, id, 1000))
	var offs []int64
	for o, cnt := range got {
		if cnt != 2 {
			t.Fatalf("offset %d redelivered with count %d, want 2", o, cnt)
		}
		offs = append(offs, o)
	}
	slices.Sort(offs)
	if !slices.Equal(offs, []int64{1, 2, 3}) {
		t.Fatalf("after a closed its session c acquired %v, want 1-3 (0 was accepted)", offs)
	}
}

// Share groups share the group ID namespace with consumer groups: joining
// a share group under the ID of a classic group is refused.
func TestShareGroupIDOfClassicGroupRefused(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 30*time.Second)
	admin := newClient(t, b.Addr())
	createTopic(t, ctx, admin, "plain", 1)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "taken", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "plain", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	if _, err := oc.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	m := newRawMember(t, b.Addr(), "taken", "a")
	r := kmsg.NewPtrShareGroupHeartbeatRequest()
	r.GroupID, r.MemberID, r.SubscribedTopicNames = "taken", "a", []string{"plain"}
	resp := m.req(ctx, r).(*kmsg.ShareGroupHeartbeatResponse)
	if resp.ErrorCode != kerr.GroupIDNotFound.Code || resp.ErrorMessage == nil {
		t.Fatalf("share member joining classic group: error %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	// A fresh ID is fine.
	newRawMember(t, b.Addr(), "free", "a").join(ctx, "plain")
}

// ListGroups shows share groups with type "share" (and filters by it);
// DescribeGroups names a share group as not classic.
func TestShareGroupListedAndDescribed(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 30*time.Second)
	admin := newClient(t, b.Addr())
	createTopic(t, ctx, admin, "plain", 1)
	newRawMember(t, b.Addr(), "sg", "a").join(ctx, "plain")
	for _, tc := range []struct {
		types []string
		want  bool
	}{{nil, true}, {[]string{"share"}, true}, {[]string{"Share"}, true}, {[]string{"consumer", "classic"}, false}} {
		lg := kmsg.NewPtrListGroupsRequest()
		lg.TypesFilter = tc.types
		resp, err := lg.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, g := range resp.Groups {
			if g.Group == "sg" {
				found = g.GroupType == "share" && g.ProtocolType == "share" && g.GroupState == "Stable"
				if !found {
					t.Fatalf("listed %+v", g)
				}
			}
		}
		if found != tc.want {
			t.Fatalf("types %v: share group listed %v, want %v (%+v)", tc.types, found, tc.want, resp.Groups)
		}
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"sg"}
	resp, err := dg.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if g := resp.Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || g.State != "Dead" {
		t.Fatalf("DescribeGroups of a share group: %+v", g)
	}
}

// The share.* group configs default to Kafka's group.share.* settings,
// overrides show as GROUP_CONFIG, and bad values are INVALID_CONFIG.
func TestShareGroupConfigs(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 30*time.Second)
	admin := newClient(t, b.Addr())
	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe: %v %+v", err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	want := map[string]string{
		"share.auto.offset.reset":       "latest",
		"share.record.lock.duration.ms": "30000",
		"share.session.timeout.ms":      "45000",
		"share.heartbeat.interval.ms":   "5000",
		"share.delivery.count.limit":    "5",
		"share.isolation.level":         "read_uncommitted",
	}
	got := describe()
	for k, v := range want {
		if c, ok := got[k]; !ok || c.Value == nil || *c.Value != v || c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s: %+v, want default %s", k, c, v)
		}
	}
	setGroupConfigs(t, ctx, admin, "g", "share.record.lock.duration.ms", "15000")
	if c := describe()["share.record.lock.duration.ms"]; *c.Value != "15000" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("override: %+v", c)
	}
	for _, bad := range [][2]string{{"share.delivery.count.limit", "1"}, {"share.auto.offset.reset", "sometime"},
		{"share.isolation.level", "serializable"}, {"consumer.session.timeout.ms", "45000"}, {"share.record.lock.duration.ms", "x"}} {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = bad[0], kmsg.StringPtr(bad[1])
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code || resp.Resources[0].ErrorMessage == nil {
			t.Errorf("%s=%s: %v %+v, want INVALID_CONFIG with a message", bad[0], bad[1], err, resp)
		}
	}
	if c := describe()["share.record.lock.duration.ms"]; *c.Value != "15000" {
		t.Fatalf("a refused alter changed the config: %+v", c)
	}
}

// kadm's share group offsets admin: alter the start offset of an empty
// group (delivery resumes there), refused while the group has a member,
// delete the state once it is empty again.
func TestShareOffsetsAdminKadm(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 30*time.Second)
	admin := newClient(t, b.Addr())
	adm := kadm.NewClient(admin)
	createTopic(t, ctx, admin, "t", 1)
	produceKeys(t, ctx, b.Addr(), "t", 10)
	id := topicID(t, ctx, admin, "t")

	alter := func(at int64) error {
		o := kadm.Offsets{}
		o.Add(kadm.Offset{Topic: "t", Partition: 0, At: at})
		resp, err := adm.AlterShareGroupOffsets(ctx, "g", o)
		if err != nil {
			return err
		}
		return resp.Error()
	}
	if err := alter(4); err != nil {
		t.Fatalf("alter an empty group: %v", err)
	}
	if err := alter(11); err != kerr.InvalidRequest {
		t.Fatalf("alter past the log end: %v, want INVALID_REQUEST", err)
	}
	m := newRawMember(t, b.Addr(), "g", "a")
	m.join(ctx, "t")
	got := acquiredOffsets(m.fetch(ctx, id, 500))
	if len(got) != 6 || got[4] != 1 || got[3] != 0 {
		t.Fatalf("after altering the start to 4, acquired %v, want 4-9", got)
	}
	if err := alter(0); err != kerr.NonEmptyGroup {
		t.Fatalf("alter with a member: %v, want NON_EMPTY_GROUP", err)
	}
	r := kmsg.NewPtrShareGroupHeartbeatRequest()
	r.GroupID, r.MemberID, r.MemberEpoch = "g", "a", -1
	m.req(ctx, r)
	dresp, err := adm.DeleteShareGroupOffsets(ctx, "g", "t")
	if err != nil || dresp["t"] != nil {
		t.Fatalf("delete share offsets: %v %v", err, dresp)
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs["g"].Offsets.Lookup("t", 0); ok && o.StartOffset != -1 {
		t.Fatalf("after delete: %+v", o)
	}
}

// A share session ends with the connection that opened it: the records
// its member held are released at once (not after the 30s lock), and a
// session lives across the requests of its connection.
func TestShareSessionEndsWithConnection(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 20*time.Second)
	admin := newClient(t, b.Addr())
	createTopic(t, ctx, admin, "t", 1)
	setGroupConfigs(t, ctx, admin, "g", "share.auto.offset.reset", "earliest")
	produceKeys(t, ctx, b.Addr(), "t", 5)
	id := topicID(t, ctx, admin, "t")
	a := newRawMember(t, b.Addr(), "g", "a")
	a.join(ctx, "t")
	if got := acquiredOffsets(a.fetch(ctx, id, 500)); len(got) != 5 {
		t.Fatalf("a acquired %v", got)
	}
	if got := acquiredOffsets(a.fetch(ctx, id, 0)); len(got) != 0 { // same session, nothing new
		t.Fatalf("a acquired again %v", got)
	}
	c := newRawMember(t, b.Addr(), "g", "c")
	c.join(ctx, "t")
	a.cl.Close() // a's connections close; a stays a member until its session timeout
	start := time.Now()
	got := acquiredOffsets(c.fetch(ctx, id, 5000))
	if len(got) != 5 || got[0] != 2 {
		t.Fatalf("after a's connection closed, c acquired %v, want 0-4 with delivery count 2", got)
	}
	if waited := time.Since(start); waited > 15*time.Second {
		t.Fatalf("records came back only after %v (the lock timeout), not when the connection closed", waited)
	}
}

// share.isolation.level=read_committed delivers only committed records:
// an aborted transaction's records are never delivered, and records of an
// open transaction wait for its end; read_uncommitted delivers them all.
func TestShareReadCommitted(t *testing.T) {
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t, 30*time.Second)
	admin := newClient(t, b.Addr())
	createTopic(t, ctx, admin, "tx", 1)
	setGroupConfigs(t, ctx, admin, "rc", "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed")
	setGroupConfigs(t, ctx, admin, "ru", "share.auto.offset.reset", "earliest")
	id := topicID(t, ctx, admin, "tx")

	txp := newClient(t, b.Addr(), kgo.TransactionalID("share-tx"), kgo.DefaultProduceTopic("tx"))
	txn := func(commit bool, vals ...string) {
		t.Helper()
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := txp.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txp.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, "c1", "c2")  // offsets 0-1, marker 2
	txn(false, "a1", "a2") // offsets 3-4, marker 5
	txn(true, "c3")        // offset 6, marker 7
	values := func(p kmsg.ShareFetchResponseTopicPartition) []string {
		var out []string
		acq := acquiredOffsets(p)
		recs, _ := kgoRecords(p.Records)
		for _, r := range recs {
			if _, ok := acq[r.offset]; ok {
				out = append(out, r.value)
			}
		}
		return out
	}
	rc := newRawMember(t, b.Addr(), "rc", "a")
	rc.join(ctx, "tx")
	if got := values(rc.fetch(ctx, id, 500)); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("read_committed delivered %v, want c1 c2 c3", got)
	}
	ru := newRawMember(t, b.Addr(), "ru", "a")
	ru.join(ctx, "tx")
	if got := values(ru.fetch(ctx, id, 500)); !slices.Equal(got, []string{"c1", "c2", "a1", "a2", "c3"}) {
		t.Fatalf("read_uncommitted delivered %v", got)
	}
	// An open transaction holds read_committed back until it commits.
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, kgo.StringRecord("o1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := values(rc.fetch(ctx, id, 200)); len(got) != 0 {
		t.Fatalf("read_committed delivered %v of an open transaction", got)
	}
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := values(rc.fetch(ctx, id, 2000)); !slices.Equal(got, []string{"o1"}) {
		t.Fatalf("after the commit read_committed delivered %v, want o1", got)
	}
}

type rawRec struct {
	offset int64
	value  string
}

// kgoRecords decodes the (uncompressed) records of batches.
func kgoRecords(batches []byte) ([]rawRec, error) {
	var out []rawRec
	for len(batches) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batches); err != nil {
			return out, err
		}
		n := int(rb.Length) + 12
		batches = batches[n:]
		if rb.Attributes&0x20 != 0 { // control
			continue
		}
		recs := rb.Records
		for i := int32(0); i < rb.NumRecords; i++ {
			var r kmsg.Record
			l, w := binary.Varint(recs)
			if w <= 0 || len(recs) < w+int(l) {
				return out, fmt.Errorf("record framing")
			}
			if err := r.ReadFrom(recs[:w+int(l)]); err != nil {
				return out, err
			}
			recs = recs[w+int(l):]
			out = append(out, rawRec{rb.FirstOffset + int64(r.OffsetDelta), string(r.Value)})
		}
	}
	return out, nil
}
