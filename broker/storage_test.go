package broker

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// faults fails operations of a kind on paths containing a substring while
// armed.
type faults struct {
	armed atomic.Bool
	kind  errorfs.OpKind
	path  string
	err   error
}

func (f *faults) MaybeError(op errorfs.Op) error {
	if f.armed.Load() && op.Kind == f.kind && strings.Contains(op.Path, f.path) {
		return f.err
	}
	return nil
}

// A disk-full write answers KAFKA_STORAGE_ERROR; the partition works again
// once the disk does.
func TestProduceStorageError(t *testing.T) {
	f := &faults{kind: errorfs.OpWrite, path: ".log", err: syscall.ENOSPC}
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, f) })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "disk", 1)
	c := dialRaw(t, b)
	f.armed.Store(true)
	resp := c.roundTrip(produceReq(9, -1, "disk", 0, makeBatch(1, "lost")), 1).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code || p.ErrorMessage == nil {
		t.Fatalf("disk full: %+v", p)
	}
	f.armed.Store(false)
	resp = c.roundTrip(produceReq(9, -1, "disk", 0, makeBatch(1, "kept")), 2).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("after recovery: %+v", p)
	}
	tp, _ := b.topics.get("disk")
	fr := c.roundTrip(fetchReq(12, "disk", tp.id, 0, 0, 0), 3).(*kmsg.FetchResponse)
	if got := batchValues(fr.Topics[0].Partitions[0].RecordBatches, 0); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("log holds %v", got)
	}
}

// A failed registry write fails the admin operation and leaves the
// registry as it was, in memory and on disk.
func TestRegistryWriteFailure(t *testing.T) {
	dir := t.TempDir()
	f := &faults{kind: errorfs.OpRename, path: metaFile, err: syscall.EIO}
	fs := errorfs.Wrap(vfs.Default, f)
	b, _ := testBroker(t, func(c *Config) { c.DataDir = dir; c.FS = fs })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "before", 1)
	adm := kadm.NewClient(newClient(t, b))
	f.armed.Store(true)
	r, _ := adm.CreateTopic(ctx, 2, 1, nil, "during")
	if r.Err == nil {
		t.Fatal("create succeeded with a failing registry write")
	}
	if _, ok := b.topics.get("during"); ok {
		t.Fatal("failed create is visible")
	}
	dr, _ := adm.DeleteTopics(ctx, "before")
	if dr["before"].Err == nil {
		t.Fatal("delete succeeded with a failing registry write")
	}
	ar, _ := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("5")}}, "before")
	if ar[0].Err == nil {
		t.Fatal("alter succeeded with a failing registry write")
	}
	f.armed.Store(false)
	tb, ok := b.topics.get("before")
	if !ok || len(tb.configs) != 0 {
		t.Fatalf("registry changed by failed operations: %v %+v", ok, tb)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, _ := testBroker(t, func(c *Config) { c.DataDir = dir; c.FS = fs })
	names := []string{}
	for _, tp := range b2.topics.all() {
		names = append(names, tp.name)
	}
	if !slices.Equal(names, []string{offsetsTopic, shareStateTopic, "__transaction_state", "before"}) {
		t.Fatalf("after restart: %v", names)
	}
	// No partition directory of the failed create survives.
	entries, _ := vfs.Default.List(filepath.Join(dir, "logs"))
	for _, e := range entries {
		if strings.HasPrefix(e, "during") {
			t.Fatalf("orphan %s", e)
		}
	}
}

// What acks=all acknowledged survives a power loss (only fsynced state of
// the crashable in-memory FS survives), and so do the topics.
func TestAckedDataSurvivesCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	b, _ := testBroker(t, func(c *Config) { c.DataDir = "/data"; c.FS = mem })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "dur", 2, "retention.ms", "-1")
	c := dialRaw(t, b)
	var want []string
	for i := range 20 {
		v := string(rune('a' + i))
		resp := c.roundTrip(produceReq(9, -1, "dur", int32(i%2), makeBatch(1, v)), int32(i)).(*kmsg.ProduceResponse)
		if resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal(resp.Topics[0].Partitions[0].ErrorCode)
		}
		if i%2 == 0 {
			want = append(want, v)
		}
	}
	crashed := mem.CrashClone()
	b2, _ := testBroker(t, func(c *Config) { c.DataDir = "/data"; c.FS = crashed })
	tp, ok := b2.topics.get("dur")
	if !ok || tp.configs["retention.ms"] != "-1" || len(tp.parts) != 2 {
		t.Fatalf("topic after crash: %v %+v", ok, tp)
	}
	c2 := dialRaw(t, b2)
	fr := c2.roundTrip(fetchReq(12, "dur", tp.id, 0, 0, 0), 1).(*kmsg.FetchResponse)
	if got := batchValues(fr.Topics[0].Partitions[0].RecordBatches, 0); !slices.Equal(got, want) {
		t.Fatalf("after crash partition 0 holds %v, want %v", got, want)
	}
}

// Partition directories that belong to no recorded topic (a crash between
// the registry write and the log removal) are removed on start.
func TestOrphanPartitionsRemoved(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t)
	b, _ := testBroker(t, func(c *Config) { c.DataDir = dir })
	mustCreate(t, ctx, b, "keep", 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ghost-0", "keep-3"} {
		if err := vfs.Default.MkdirAll(filepath.Join(dir, "logs", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	testBroker(t, func(c *Config) { c.DataDir = dir })
	entries, err := vfs.Default.List(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e == "ghost-0" || e == "keep-3" {
			t.Fatalf("orphan %s survived (dir: %v)", e, entries)
		}
	}
	if !slices.Contains(entries, "keep-0") {
		t.Fatalf("keep-0 removed: %v", entries)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := Start(t.Context(), Config{}); err == nil {
		t.Fatal("started without a data dir")
	}
	if _, err := Start(t.Context(), Config{DataDir: t.TempDir(), NodeID: -1}); err == nil {
		t.Fatal("started with a negative node id")
	}
	if _, err := Start(t.Context(), Config{DataDir: t.TempDir(), KafkaAddr: "256.0.0.1:99999"}); err == nil {
		t.Fatal("started on a bad address")
	}
}

// A read I/O error answers KAFKA_STORAGE_ERROR for that partition; the
// others of the same fetch are served.
func TestFetchStorageError(t *testing.T) {
	f := &faults{kind: errorfs.OpRead, path: "rd-0", err: syscall.EIO}
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, f) })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "rd", 2)
	tp, _ := b.topics.get("rd")
	c := dialRaw(t, b)
	for p := range int32(2) {
		c.roundTrip(produceReq(9, -1, "rd", p, makeBatch(1, fmt.Sprint("v", p))), p)
	}
	f.armed.Store(true)
	req := fetchReq(12, "rd", tp.id, 0, 0, 0)
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, fp)
	resp := c.roundTrip(req, 10).(*kmsg.FetchResponse)
	got := map[int32]int16{}
	var vals []string
	for _, p := range resp.Topics[0].Partitions {
		got[p.Partition] = p.ErrorCode
		vals = append(vals, batchValues(p.RecordBatches, 0)...)
	}
	if got[0] != kerr.KafkaStorageError.Code || got[1] != 0 || !slices.Equal(vals, []string{"v1"}) {
		t.Fatalf("errors %v values %v", got, vals)
	}
	f.armed.Store(false)
	resp = c.roundTrip(fetchReq(12, "rd", tp.id, 0, 0, 0), 11).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || !slices.Equal(batchValues(p.RecordBatches, 0), []string{"v0"}) {
		t.Fatalf("after the disk recovered: %+v", p)
	}
}

// Close answers in-flight acks=all produce requests (their data is
// durable) before closing the logs.
func TestCloseFinishesInFlightProduce(t *testing.T) {
	dir := t.TempDir()
	b, _ := testBroker(t, func(c *Config) { c.DataDir = dir })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "cf", 1)
	c := dialRaw(t, b)
	const n = 20
	var out []byte
	for i := range n {
		out = append(out, frame(produceReq(9, -1, "cf", 0, makeBatch(1, fmt.Sprint(i))), int32(i))...)
	}
	c.write(out)
	// Close once every request has been read and appended (some may not
	// be durable nor answered yet): all of them must then be answered.
	tp0, _ := b.topics.get("cf")
	for tp0.parts[0].LogEndOffset() < n {
		if ctx.Err() != nil {
			t.Fatal("requests not appended")
		}
		time.Sleep(time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	answered := 0
	for {
		pr := kmsg.NewPtrProduceRequest()
		pr.Version = 9
		corr, body, err := c.read()
		if err != nil {
			break
		}
		if corr != int32(answered) {
			t.Fatalf("response %d has correlation %d", answered, corr)
		}
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		if err := resp.ReadFrom(body[1:]); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("response %d: %v %+v", answered, err, resp)
		}
		answered++
	}
	if answered != n {
		t.Fatalf("%d of %d produce requests answered before the close", answered, n)
	}
	b2, _ := testBroker(t, func(c *Config) { c.DataDir = dir })
	tp, _ := b2.topics.get("cf")
	if hw := tp.parts[0].HighWatermark(); hw < int64(answered) {
		t.Fatalf("%d produces answered, only %d records after restart", answered, hw)
	}
}
