package group

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
)

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// fakeTopics implements Topics and TimestampReader.
type fakeTopics struct {
	mu    sync.Mutex
	parts map[string]int32
	hw    map[tp]int64
	ts    map[tp]time.Time // timestamp of every record (for tests: one per partition)
}

func newFakeTopics(parts map[string]int32) *fakeTopics {
	return &fakeTopics{parts: parts, hw: map[tp]int64{}, ts: map[tp]time.Time{}}
}

func topicIDOf(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	id[15] = 1
	return id
}

func (f *fakeTopics) Partitions(t string) (int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.parts[t]
	return n, ok
}
func (f *fakeTopics) TopicID(t string) ([16]byte, bool) {
	_, ok := f.Partitions(t)
	return topicIDOf(t), ok
}
func (f *fakeTopics) TopicName(id [16]byte) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n := range f.parts {
		if topicIDOf(n) == id {
			return n, true
		}
	}
	return "", false
}
func (f *fakeTopics) TopicNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedKeys(f.parts)
}
func (f *fakeTopics) HighWatermark(t string, p int32) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.parts[t]; !ok {
		return 0, false
	}
	return f.hw[tp{t, p}], true
}
func (f *fakeTopics) LogStartOffset(t string, p int32) (int64, bool) {
	_, ok := f.Partitions(t)
	return 0, ok
}
func (f *fakeTopics) TimestampAt(t string, p int32, off int64) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts, ok := f.ts[tp{t, p}]
	return ts, ok
}

// memStore is an in-memory offsets log with a crash model: crash() keeps
// only what was appended durably.
type memStore struct {
	mu      sync.Mutex
	batches [][]byte // each with its base offset rewritten
	synced  int      // batches[:synced] are durable
	next    int64
	fail    error // returned by append when set
	block   chan struct{}
}

func (m *memStore) Append(b []byte, durable bool) (wlog.AppendResult, error) {
	base, err := m.append(b, durable)
	return wlog.AppendResult{BaseOffset: base}, err
}
func (m *memStore) Read(off int64, maxBytes int, upTo int64) (wlog.ReadResult, error) {
	d, rel, err := m.read(off, maxBytes, upTo)
	return wlog.ReadResult{Data: d, Release: rel}, err
}
func (m *memStore) HighWatermark() int64  { return m.highWatermark() }
func (m *memStore) LogStartOffset() int64 { return 0 }

func (m *memStore) append(b []byte, durable bool) (int64, error) {
	if m.block != nil {
		<-m.block
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	base := m.next
	// Split concatenated batches and rewrite base offsets.
	for len(b) > 0 {
		n := 12 + int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))
		one := append([]byte(nil), b[:n]...)
		b = b[n:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(one); err != nil {
			return 0, err
		}
		off := m.next
		for i := range 8 {
			one[i] = byte(uint64(off) >> (56 - 8*i))
		}
		m.next += int64(rb.LastOffsetDelta) + 1
		m.batches = append(m.batches, one)
	}
	if durable {
		m.synced = len(m.batches)
	}
	return base, nil
}

func (m *memStore) read(off int64, maxBytes int, upTo int64) ([]byte, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []byte
	for _, b := range m.batches {
		var rb kmsg.RecordBatch
		_ = rb.ReadFrom(b)
		if rb.FirstOffset+int64(rb.LastOffsetDelta) < off || rb.FirstOffset >= upTo {
			continue
		}
		out = append(out, b...)
	}
	return out, func() {}, nil
}

func (m *memStore) highWatermark() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}
func (m *memStore) logStartOffset() int64 { return 0 }

// crash returns a store holding only the durable batches.
func (m *memStore) crash() *memStore {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := &memStore{batches: append([][]byte(nil), m.batches[:m.synced]...)}
	n.synced = len(n.batches)
	for _, b := range n.batches {
		var rb kmsg.RecordBatch
		_ = rb.ReadFrom(b)
		n.next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
	}
	return n
}

type harness struct {
	t      *testing.T
	c      *Coordinator
	clk    *fakeClock
	topics *fakeTopics
	st     *memStore
	opts   Options
}

func newHarness(t *testing.T, mod ...func(*Options)) *harness {
	t.Helper()
	h := &harness{
		t:      t,
		clk:    &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		topics: newFakeTopics(map[string]int32{"t": 4, "u": 2}),
		st:     &memStore{},
	}
	h.opts = Options{
		NodeID: 1, Host: "127.0.0.1", Port: 9092,
		Offsets: h.st, Topics: h.topics, Now: h.clk.Now,
	}
	for _, f := range mod {
		f(&h.opts)
	}
	h.start()
	return h
}

func (h *harness) start() {
	h.t.Helper()
	h.opts.Offsets = h.st
	c, err := NewCoordinator(h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	h.t.Cleanup(func() { c.Close() })
}

// restart closes the coordinator and starts a new one on st.
func (h *harness) restart(st *memStore) {
	h.t.Helper()
	h.c.Close()
	h.st = st
	h.start()
}

func (h *harness) advance(d time.Duration) {
	h.clk.Advance(d)
	h.c.tick()
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) handle(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	resp, err := h.c.Handle(h.ctx(), req)
	if err != nil {
		h.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// joinReq builds a JoinGroup request for a consumer with one protocol.
func joinReq(version int16, group, memberID string, instance string, protocols ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = version
	r.Group, r.MemberID = group, memberID
	r.SessionTimeoutMillis = 10000
	r.RebalanceTimeoutMillis = 20000
	r.ProtocolType = "consumer"
	if instance != "" {
		r.InstanceID = &instance
	}
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte("meta-" + p)})
	}
	return r
}

// join runs a JoinGroup on the loop and returns either the immediate
// response or a pending one.
func (h *harness) join(req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	var imm *kmsg.JoinGroupResponse
	var wait chan *kmsg.JoinGroupResponse
	if err := h.c.do(h.ctx(), func() { imm, wait = h.c.joinGroupLocked(req, requestClient{id: "client", host: "/127.0.0.1"}) }); err != nil {
		h.t.Fatal(err)
	}
	return imm, wait
}

func (h *harness) sync(req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, chan *kmsg.SyncGroupResponse) {
	h.t.Helper()
	var imm *kmsg.SyncGroupResponse
	var wait chan *kmsg.SyncGroupResponse
	if err := h.c.do(h.ctx(), func() { imm, wait = h.c.syncGroupLocked(req) }); err != nil {
		h.t.Fatal(err)
	}
	return imm, wait
}

// ready returns the response on ch if there is one (the loop answers
// synchronously, so after a do/tick it is either there or not at all).
func ready[T any](ch chan T) (T, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		var zero T
		return zero, false
	}
}

func mustReady[T any](t *testing.T, ch chan T, what string) T {
	t.Helper()
	v, ok := ready(ch)
	if !ok {
		t.Fatalf("%s: no response yet", what)
	}
	return v
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != errCode(want) {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func (h *harness) groupState(id string) string {
	var s string
	_ = h.c.do(h.ctx(), func() {
		if g := h.c.groups[id]; g != nil {
			s = g.stateName()
		} else {
			s = "none"
		}
	})
	return s
}
