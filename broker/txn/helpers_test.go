package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
)

// clock is a fake clock tests advance by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// marker is one WriteMarker call.
type marker struct {
	tp     TopicPartition
	pid    int64
	epoch  int16
	commit bool
}

// fakeParts implements Partitions: every partition in exists; markers are
// recorded; a gate blocks a partition's markers until opened; failN makes
// the next N marker writes of a partition fail.
type fakeParts struct {
	mu      sync.Mutex
	exists  map[TopicPartition]bool
	markers []marker
	gates   map[TopicPartition]chan struct{}
	failN   map[TopicPartition]int
	written chan marker
}

func newFakeParts(parts ...TopicPartition) *fakeParts {
	p := &fakeParts{exists: map[TopicPartition]bool{}, gates: map[TopicPartition]chan struct{}{},
		failN: map[TopicPartition]int{}, written: make(chan marker, 1000)}
	for _, tp := range parts {
		p.exists[tp] = true
	}
	return p
}

func (p *fakeParts) Exists(topic string, partition int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exists[TopicPartition{topic, partition}]
}

func (p *fakeParts) gate(tp TopicPartition) func() {
	ch := make(chan struct{})
	p.mu.Lock()
	p.gates[tp] = ch
	p.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

var errInjected = errors.New("injected marker failure")

func (p *fakeParts) WriteMarker(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	tp := TopicPartition{topic, partition}
	p.mu.Lock()
	g := p.gates[tp]
	p.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failN[tp] > 0 {
		p.failN[tp]--
		return errInjected
	}
	m := marker{tp, pid, epoch, commit}
	p.markers = append(p.markers, m)
	p.written <- m
	return nil
}

func (p *fakeParts) all() []marker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]marker(nil), p.markers...)
}

// fakeOffsets implements OffsetCommitter.
type fakeOffsets struct {
	mu      sync.Mutex
	commits []*kmsg.TxnOffsetCommitRequest
	markers []marker
	gate    chan struct{} // if set, TxnOffsetCommit waits for it
	entered chan struct{}
}

func (o *fakeOffsets) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	o.mu.Lock()
	g := o.gate
	o.mu.Unlock()
	if g != nil {
		o.entered <- struct{}{}
		<-g
	}
	o.mu.Lock()
	o.commits = append(o.commits, req)
	o.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (o *fakeOffsets) WriteMarker(ctx context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.markers = append(o.markers, marker{TopicPartition{OffsetsTopic, 0}, pid, epoch, commit})
	return nil
}

func (o *fakeOffsets) allMarkers() []marker {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]marker(nil), o.markers...)
}

// memState is an in-memory StateLog with failure injection.
type memState struct {
	mu      sync.Mutex
	batches [][]byte // base offset rewritten
	next    int64
	fail    error
	gate    chan struct{} // if set, Append waits for it to close
}

func (s *memState) Append(b []byte, durable bool) (int64, error) {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		<-g
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return -1, s.fail
	}
	base := s.next
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		size := 12 + int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))
		if err := rb.ReadFrom(b[:size]); err != nil {
			return -1, err
		}
		cp := append([]byte(nil), b[:size]...)
		for i := 0; i < 8; i++ {
			cp[i] = byte(uint64(s.next) >> (56 - 8*i))
		}
		s.batches = append(s.batches, cp)
		s.next += int64(rb.LastOffsetDelta) + 1
		b = b[size:]
	}
	return base, nil
}

func (s *memState) Read(offset int64, maxBytes int, upTo int64) ([]byte, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []byte
	for _, b := range s.batches {
		var rb kmsg.RecordBatch
		_ = rb.ReadFrom(b)
		last := rb.FirstOffset + int64(rb.LastOffsetDelta)
		if last < offset || rb.FirstOffset >= upTo {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	return out, func() {}, nil
}

func (s *memState) HighWatermark() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}
func (s *memState) LogStartOffset() int64 { return 0 }

// block makes appends wait until the returned func is called.
func (s *memState) block() func() {
	g := make(chan struct{})
	s.mu.Lock()
	s.gate = g
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(g)
		})
	}
}

func (s *memState) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// env is one coordinator under test.
type env struct {
	t     *testing.T
	c     *Coordinator
	clock *clock
	parts *fakeParts
	offs  *fakeOffsets
	state StateLog
	opts  Options
}

var (
	tpA = TopicPartition{"a", 0}
	tpB = TopicPartition{"b", 1}
	tpC = TopicPartition{"c", 0}
)

func newEnv(t *testing.T, mod ...func(*Options)) *env {
	t.Helper()
	e := &env{t: t, clock: newClock(), parts: newFakeParts(tpA, tpB, tpC), offs: &fakeOffsets{}, state: &memState{}}
	e.opts = Options{NodeID: 1, Host: "127.0.0.1", Port: 9092, State: e.state, Partitions: e.parts,
		Offsets: e.offs, Now: e.clock.Now,
		// Answer EndTxn at the prepare (Kafka's behaviour) so tests can
		// observe the Prepare states; TestEndTxnWaitsForCompletion covers
		// the default.
		EndTxnCompletionWait: -1}
	for _, f := range mod {
		f(&e.opts)
	}
	e.state = e.opts.State
	e.start()
	return e
}

func (e *env) start() {
	e.t.Helper()
	e.opts.State = e.state
	c, err := NewCoordinator(e.opts)
	if err != nil {
		e.t.Fatalf("NewCoordinator: %v", err)
	}
	e.c = c
	e.t.Cleanup(func() { c.Close() })
}

// restart closes the coordinator and starts a new one on the same state.
func (e *env) restart() {
	e.t.Helper()
	e.c.Close()
	e.start()
}

func (e *env) do(req kmsg.Request) kmsg.Response {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.c.Handle(ctx, req)
	if err != nil {
		e.t.Fatalf("Handle(%T): %v", req, err)
	}
	return resp
}

func strp(s string) *string { return &s }

func (e *env) initPID(id *string, timeoutMs int32, pid int64, epoch int16, version int16) *kmsg.InitProducerIDResponse {
	e.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = version
	req.TransactionalID = id
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return e.do(req).(*kmsg.InitProducerIDResponse)
}

// mustInit initialises a transactional id and returns its pid and epoch.
func (e *env) mustInit(id string, timeoutMs int32) (int64, int16) {
	e.t.Helper()
	r := e.initPID(&id, timeoutMs, -1, -1, 4)
	if r.ErrorCode != 0 {
		e.t.Fatalf("InitProducerId(%s): %v", id, kerr.ErrorForCode(r.ErrorCode))
	}
	return r.ProducerID, r.ProducerEpoch
}

func (e *env) addParts(id string, pid int64, epoch int16, parts ...TopicPartition) []int16 {
	e.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	for _, tp := range parts {
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic = tp.Topic
		t.Partitions = []int32{tp.Partition}
		req.Topics = append(req.Topics, t)
	}
	resp := e.do(req).(*kmsg.AddPartitionsToTxnResponse)
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

func (e *env) mustAdd(id string, pid int64, epoch int16, parts ...TopicPartition) {
	e.t.Helper()
	for _, code := range e.addParts(id, pid, epoch, parts...) {
		if code != 0 {
			e.t.Fatalf("AddPartitionsToTxn(%s): %v", id, kerr.ErrorForCode(code))
		}
	}
}

func (e *env) addOffsets(id string, pid int64, epoch int16, group string) int16 {
	e.t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, group
	return e.do(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

func (e *env) endTxn(id string, pid int64, epoch int16, commit bool, version int16) *kmsg.EndTxnResponse {
	e.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return e.do(req).(*kmsg.EndTxnResponse)
}

func (e *env) txnCommit(id string, pid int64, epoch int16, group string, version int16) int16 {
	e.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, group
	req.Generation = -1
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = "in"
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = 0, 42
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return e.do(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (e *env) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	e.t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return e.do(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
}

// waitState waits (bounded) until id reaches state; markers complete
// asynchronously.
func (e *env) waitState(id string, state string) kmsg.DescribeTransactionsResponseTransactionState {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := e.describe(id)
		if st.State == state {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: state %q (error %d), want %q", id, st.State, st.ErrorCode, state)
		}
		time.Sleep(time.Millisecond)
	}
}

func (e *env) verify(id string, pid int64, epoch int16, implicit bool, parts ...TopicPartition) ([]int16, func()) {
	e.t.Helper()
	codes, release, err := e.c.Verify(context.Background(), id, pid, epoch, parts, implicit)
	if err != nil {
		e.t.Fatalf("Verify: %v", err)
	}
	return codes, release
}

func wantCode(t *testing.T, what string, got int16, want error) {
	t.Helper()
	var wantCode int16
	if want != nil {
		wantCode = want.(*kerr.Error).Code
	}
	if got != wantCode {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func (m marker) String() string {
	return fmt.Sprintf("%s/%d pid=%d epoch=%d commit=%v", m.tp.Topic, m.tp.Partition, m.pid, m.epoch, m.commit)
}

// crashLog is a StateLog on the storage engine over a crashable MemFS.
type crashLog struct {
	fs  *vfs.MemFS
	log *wlog.Log
}

func openCrashLog(t *testing.T, fs *vfs.MemFS) *crashLog {
	t.Helper()
	l, err := wlog.Open(wlog.Options{FS: fs, Dir: "data/" + StateTopic + "-0", Config: wlog.Config{Compact: true}})
	if err != nil {
		t.Fatalf("open state log: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return &crashLog{fs: fs, log: l}
}

// idle reports whether id has no transition or marker job in flight.
func (e *env) idle(id string) bool {
	ch := make(chan bool, 1)
	if !e.c.post(func() {
		m := e.c.txns[id]
		ch <- m == nil || (m.pending == nil && m.markers == nil)
	}) {
		return true
	}
	return <-ch
}

// The *NoT helpers are for goroutines other than the test's (no t.Fatal).

func (e *env) mustInitNoT(id string) (int64, int16) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60000
	resp, err := e.c.Handle(context.Background(), req)
	if err != nil {
		return -1, -1
	}
	r := resp.(*kmsg.InitProducerIDResponse)
	return r.ProducerID, r.ProducerEpoch
}

func (e *env) addPartsNoT(id string, pid int64, epoch int16, parts []TopicPartition) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	for _, tp := range parts {
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		req.Topics = append(req.Topics, t)
	}
	resp, err := e.c.Handle(context.Background(), req)
	if err != nil {
		return kerr.UnknownServerError.Code
	}
	for _, t := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}

func (e *env) endTxnNoT(id string, pid int64, epoch int16, commit bool, version int16) (*kmsg.EndTxnResponse, error) {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	resp, err := e.c.Handle(context.Background(), req)
	if err != nil {
		return kmsg.NewPtrEndTxnResponse(), err
	}
	return resp.(*kmsg.EndTxnResponse), nil
}
