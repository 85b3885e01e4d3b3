package broker

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

func createPartitionsReq(topic string, count, timeoutMillis int32) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = timeoutMillis
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics = append(req.Topics, rt)
	return req
}

// growthGate returns a broker whose file system holds, while the gate is
// held, every directory creation of the partitions of topic numbered
// from first on (so the topic's existing partitions are not held).
func growthGate(t *testing.T, topic string, first int) (*Broker, *errorfs.Gate, string) {
	t.Helper()
	dir := t.TempDir()
	gate := errorfs.NewGate(errorfs.And(errorfs.OnOps(errorfs.OpMkdir), func(op errorfs.Op) bool {
		base := filepath.Base(op.Path)
		for p := first; p < first+64; p++ {
			if base == topic+"-"+strconv.Itoa(p) {
				return true
			}
		}
		return false
	}))
	b, _ := testBroker(t, func(c *Config) { c.DataDir = dir; c.FS = errorfs.Wrap(vfs.Default, gate) })
	return b, gate, dir
}

// waitEntered waits (10s at most) for a held operation.
func waitEntered(t *testing.T, g *errorfs.Gate) {
	t.Helper()
	select {
	case <-g.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("no operation reached the gate")
	}
}

// A CreatePartitions held in the middle of opening its partitions does not
// block Metadata, CreateTopics of another topic, or a config change of the
// growing topic; the new partitions are invisible until all are open and
// the count is durable; they then carry the configs changed meanwhile.
func TestCreatePartitionsOpensWithoutAdminLock(t *testing.T) {
	b, gate, _ := growthGate(t, "grow", 2)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "grow", 2)
	c := dialRaw(t, b)

	gate.Hold()
	defer gate.Release()
	grown := make(chan *kmsg.CreatePartitionsResponse, 1)
	go func() {
		c2 := dialRaw(t, b)
		grown <- c2.roundTrip(createPartitionsReq("grow", 5, 60000), 1).(*kmsg.CreatePartitionsResponse)
	}()
	waitEntered(t, gate)

	// While held: other admin requests and Metadata are answered.
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	mr := c.roundTrip(meta, 2).(*kmsg.MetadataResponse)
	for _, mt := range mr.Topics {
		if *mt.Topic == "grow" && len(mt.Partitions) != 2 {
			t.Fatalf("growing topic visible with %d partitions mid-open", len(mt.Partitions))
		}
	}
	cr := c.roundTrip(createTopicsReq(60000, false, map[string]int32{"other": 3}), 3).(*kmsg.CreateTopicsResponse)
	if codes := topicCodes(cr); codes["other"] != 0 {
		t.Fatalf("CreateTopics of another topic during a growth: %v", codes)
	}
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "grow"
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "max.message.bytes", kmsg.StringPtr("100")
	ar.Configs = append(ar.Configs, ac)
	alter.Resources = append(alter.Resources, ar)
	if r := c.roundTrip(alter, 4).(*kmsg.IncrementalAlterConfigsResponse); r.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter configs during a growth: %+v", r.Resources[0])
	}
	select {
	case r := <-grown:
		t.Fatalf("growth finished while held: %+v", r)
	default:
	}
	if tp, _ := b.topics.get("grow"); len(tp.parts) != 2 {
		t.Fatalf("%d partitions visible mid-open", len(tp.parts))
	}

	gate.Release()
	select {
	case r := <-grown:
		if ec := r.Topics[0].ErrorCode; ec != 0 {
			t.Fatalf("growth: error %d", ec)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("growth did not finish after release")
	}
	tp, _ := b.topics.get("grow")
	if len(tp.parts) != 5 || tp.configs["max.message.bytes"] != "100" {
		t.Fatalf("after growth: %d partitions, configs %v", len(tp.parts), tp.configs)
	}
	// Every partition, the new ones included, applies the config changed
	// during the growth.
	big := makeBatch(1, strings.Repeat("x", 200))
	for p := range int32(5) {
		pr := c.roundTrip(produceReq(9, -1, "grow", p, big), 10+p).(*kmsg.ProduceResponse)
		if ec := pr.Topics[0].Partitions[0].ErrorCode; ec != kerr.MessageTooLarge.Code {
			t.Errorf("partition %d: produce over max.message.bytes: error %d, want MESSAGE_TOO_LARGE", p, ec)
		}
	}
}

// A deletion of a growing topic waits for the growth and then removes
// every partition, the new ones included.
func TestDeleteWaitsForGrowth(t *testing.T) {
	b, gate, dir := growthGate(t, "gd", 1)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "gd", 1)
	gate.Hold()
	defer gate.Release()
	grown := make(chan error, 1)
	go func() { grown <- b.topics.addPartitions("gd", 3, false) }()
	waitEntered(t, gate)
	deleted := make(chan error, 1)
	go func() {
		_, err := b.topics.remove("gd", [16]byte{})
		deleted <- err
	}()
	select {
	case err := <-deleted:
		t.Fatalf("delete finished during the growth: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	gate.Release()
	for _, ch := range []chan error{grown, deleted} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("growth or delete did not finish")
		}
	}
	if _, ok := b.topics.get("gd"); ok {
		t.Fatal("topic survived its deletion")
	}
	entries, _ := vfs.Default.List(filepath.Join(dir, "logs"))
	for _, e := range entries {
		if strings.HasPrefix(e, "gd-") {
			t.Fatalf("directory %s left behind", e)
		}
	}
}

// A growth whose open fails leaves the topic as it was, no directory of
// the new partitions, and the next growth succeeds.
func TestCreatePartitionsFailureLeavesNothing(t *testing.T) {
	b, gate, dir := growthGate(t, "gf", 2)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "gf", 2)
	c := dialRaw(t, b)
	gate.FailWith(syscall.EIO)
	r := c.roundTrip(createPartitionsReq("gf", 4, 60000), 1).(*kmsg.CreatePartitionsResponse)
	if ec := r.Topics[0].ErrorCode; ec != kerr.KafkaStorageError.Code {
		t.Fatalf("failed growth: error %d, want KAFKA_STORAGE_ERROR", ec)
	}
	if tp, _ := b.topics.get("gf"); len(tp.parts) != 2 {
		t.Fatalf("%d partitions after a failed growth", len(tp.parts))
	}
	entries, _ := vfs.Default.List(filepath.Join(dir, "logs"))
	for _, e := range entries {
		if e == "gf-2" || e == "gf-3" {
			t.Fatalf("directory %s left by a failed growth", e)
		}
	}
	gate.FailWith(nil)
	r = c.roundTrip(createPartitionsReq("gf", 4, 60000), 2).(*kmsg.CreatePartitionsResponse)
	if ec := r.Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("growth after a failed one: error %d", ec)
	}
	if tp, _ := b.topics.get("gf"); len(tp.parts) != 4 {
		t.Fatalf("%d partitions after growth", len(tp.parts))
	}
}
