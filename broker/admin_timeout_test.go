package broker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// adminGate blocks file operations under a topic's partition directories
// until released (at most 10s, then it fails them).
type adminGate struct {
	prefix  string // "<topic>-"
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func newAdminGate(topic string) *adminGate {
	return &adminGate{prefix: string(filepath.Separator) + topic + "-", reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *adminGate) fs() vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.Contains(op.Path, g.prefix) {
			return nil
		}
		g.once.Do(func() { close(g.reached) })
		select {
		case <-g.release:
			return nil
		case <-time.After(10 * time.Second):
			return syscall.ETIMEDOUT
		}
	}))
}

func createTopicsReq(timeoutMillis int32, validateOnly bool, topics map[string]int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis, req.ValidateOnly = timeoutMillis, validateOnly
	for name, n := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func topicCodes(resp *kmsg.CreateTopicsResponse) map[string]int16 {
	out := map[string]int16{}
	for _, st := range resp.Topics {
		out[st.Topic] = st.ErrorCode
	}
	return out
}

// waitPartitions waits (10s at most) until the registry has topic with n
// partitions (n = 0: until it is gone).
func waitPartitions(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tp, ok := b.topics.get(topic)
		if (n == 0 && !ok) || (ok && len(tp.parts) == n) {
			return
		}
		if time.Now().After(deadline) {
			got := -1
			if ok {
				got = len(tp.parts)
			}
			t.Fatalf("topic %s: %d partitions, want %d", topic, got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TimeoutMillis 0 ("don't wait", as Kafka): a valid topic answers
// REQUEST_TIMED_OUT and is created anyway; invalid ones get their own
// error at once.
func TestCreateTopicsTimeoutZero(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, b)
	mustCreate(t, ctx, b, "exists", 1)
	req := createTopicsReq(0, false, map[string]int32{"later": 3, "exists": 1, "bad": 0, "bad/name": 1})
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"later": kerr.RequestTimedOut.Code, "exists": kerr.TopicAlreadyExists.Code,
		"bad": kerr.InvalidPartitions.Code, "bad/name": kerr.InvalidTopicException.Code}
	got := topicCodes(resp)
	for name, code := range want {
		if got[name] != code {
			t.Errorf("%s: code %d, want %d", name, got[name], code)
		}
	}
	waitPartitions(t, b, "later", 3)
	// Negative is "don't wait" too.
	resp, err = createTopicsReq(-1, false, map[string]int32{"later-neg": 2}).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := topicCodes(resp)["later-neg"]; c != kerr.RequestTimedOut.Code {
		t.Fatalf("timeout -1: code %d, want REQUEST_TIMED_OUT", c)
	}
	waitPartitions(t, b, "later-neg", 2)
	// Now it exists: a second creation says so.
	resp, err = createTopicsReq(0, false, map[string]int32{"later": 3}).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := topicCodes(resp)["later"]; c != kerr.TopicAlreadyExists.Code {
		t.Fatalf("second create: code %d", c)
	}
}

// ValidateOnly answers at once, whatever the timeout, and creates nothing.
func TestCreateTopicsValidateOnlyTimeoutZero(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	resp, err := createTopicsReq(0, true, map[string]int32{"v": 4}).RequestWith(ctx, newClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.Topics[0]; st.ErrorCode != 0 || st.NumPartitions != 4 {
		t.Fatalf("validate only: code %d partitions %d", st.ErrorCode, st.NumPartitions)
	}
	if _, ok := b.topics.get("v"); ok {
		t.Fatal("validate-only created the topic")
	}
	if names, _ := vfs.Default.List(logsDir(b.cfg.DataDir)); len(names) > 0 && strings.HasPrefix(names[0], "v-") {
		t.Fatalf("validate-only left directories: %v", names)
	}
}

// A creation still running when TimeoutMillis passes answers
// REQUEST_TIMED_OUT; the name is taken meanwhile (TOPIC_ALREADY_EXISTS) and
// the topic appears, complete, when the creation finishes.
func TestCreateTopicsTimeoutWhileCreating(t *testing.T) {
	gate := newAdminGate("slow")
	b, _ := testBroker(t, func(c *Config) { c.FS = gate.fs() })
	ctx := testCtx(t)
	cl := newClient(t, b)
	resp, err := createTopicsReq(50, false, map[string]int32{"slow": 20}).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.reached // the creation did start
	if st := resp.Topics[0]; st.ErrorCode != kerr.RequestTimedOut.Code || st.ErrorMessage == nil {
		t.Fatalf("slow create: code %d message %v", st.ErrorCode, st.ErrorMessage)
	}
	if _, ok := b.topics.get("slow"); ok {
		t.Fatal("topic visible before its creation finished")
	}
	resp, err = createTopicsReq(60000, false, map[string]int32{"slow": 1}).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := topicCodes(resp)["slow"]; c != kerr.TopicAlreadyExists.Code {
		t.Fatalf("create during creation: code %d, want TOPIC_ALREADY_EXISTS", c)
	}
	close(gate.release)
	waitPartitions(t, b, "slow", 20)
	// It was persisted (in the critical section that installed it, so
	// taking adminMu waits for the write): a restart would reload it.
	b.topics.adminMu.Lock()
	m, err := b.topics.load()
	b.topics.adminMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tj := range m.Topics {
		found = found || (tj.Name == "slow" && tj.Partitions == 20)
	}
	if !found {
		t.Fatalf("slow not in %s", metaFile)
	}
}

// A creation that fails leaves no partition directory behind.
func TestCreateTopicsFailureLeavesNothing(t *testing.T) {
	fail := errorfs.NewToggle(errorfs.FailIf(errorfs.And(errorfs.OnOps(errorfs.OpSync), errorfs.PathContains(string(filepath.Separator)+"doomed-7")), syscall.EIO))
	fail.On()
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, fail) })
	ctx := testCtx(t)
	resp, err := createTopicsReq(60000, false, map[string]int32{"doomed": 40}).RequestWith(ctx, newClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != kerr.KafkaStorageError.Code {
		t.Fatalf("code %d, want KAFKA_STORAGE_ERROR", c)
	}
	names, _ := vfs.Default.List(logsDir(b.cfg.DataDir))
	for _, n := range names {
		if strings.HasPrefix(n, "doomed-") {
			t.Fatalf("failed creation left %s", n)
		}
	}
	fail.Off()
	mustCreate(t, ctx, b, "doomed", 40)
}

func TestDeleteTopicsTimeoutZero(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, b)
	mustCreate(t, ctx, b, "gone", 4)
	tp, _ := b.topics.get("gone")
	dir := tp.parts[0].Dir()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 0
	for _, n := range []string{"gone", "never"} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, st := range resp.Topics {
		codes[*st.Topic] = st.ErrorCode
	}
	if codes["gone"] != kerr.RequestTimedOut.Code || codes["never"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("codes %v", codes)
	}
	waitPartitions(t, b, "gone", 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not removed", dir)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCreatePartitionsTimeout(t *testing.T) {
	gate := newAdminGate("grow")
	b, _ := testBroker(t, func(c *Config) { c.FS = gate.fs() })
	ctx := testCtx(t)
	cl := newClient(t, b)
	// The first creation passes the gate once released.
	close(gate.release)
	mustCreate(t, ctx, b, "grow", 2)

	send := func(timeoutMillis, count int32, validateOnly bool) int16 {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis, req.ValidateOnly = timeoutMillis, validateOnly
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "grow", count
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	if c := send(0, 1, false); c != kerr.InvalidPartitions.Code {
		t.Fatalf("shrink with timeout 0: code %d, want INVALID_PARTITIONS", c)
	}
	if c := send(0, 9, true); c != 0 {
		t.Fatalf("validate only with timeout 0: code %d", c)
	}
	if c := send(0, 6, false); c != kerr.RequestTimedOut.Code {
		t.Fatalf("grow with timeout 0: code %d, want REQUEST_TIMED_OUT", c)
	}
	waitPartitions(t, b, "grow", 6)
	if c := send(60000, 8, false); c != 0 {
		t.Fatalf("grow with timeout: code %d", c)
	}
	waitPartitions(t, b, "grow", 8)
}

// A client that waits (kgo's default admin timeout) sees plain success, and
// a connection that goes away mid-creation does not stop it.
func TestCreateTopicsContextCancelled(t *testing.T) {
	gate := newAdminGate("orphan")
	b, _ := testBroker(t, func(c *Config) { c.FS = gate.fs() })
	cl := newClient(t, b, kgo.RetryTimeout(time.Second))
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := createTopicsReq(60000, false, map[string]int32{"orphan": 3}).RequestWith(ctx, cl)
		done <- err
	}()
	<-gate.reached
	cancel()
	if err := <-done; err == nil {
		t.Fatal("request returned without error after its context was cancelled")
	}
	cl.Close()
	close(gate.release)
	waitPartitions(t, b, "orphan", 3)
}
