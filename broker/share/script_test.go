package share

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/recbatch"
	wlog "github.com/weirhq/weir/broker/log"
)

// Data-driven scripts (github.com/cockroachdb/datadriven) for the share
// coordinator's state machines, over in-memory logs and a fake clock:
// testdata/partition (acquisition, acknowledgement, locks, delivery
// counts, restarts), testdata/membership (heartbeats and assignment) and
// testdata/sessions (share session epochs). A block is command lines,
// "----", then the expected output.
//
//	join A topics=t[,u]          ShareGroupHeartbeat epoch 0
//	heartbeat A [epoch=N]        at the member's epoch (or N)
//	leave A                      epoch -1
//	produce t/P n=N [control]    append N records (or a transaction marker)
//	trim t/P OFFSET              move the log start (retention)
//	delete-topic t               the topic is deleted
//	fetch A t/P[,t/Q] [max=N] [strict] [epoch=N]
//	                             ShareFetch (opens A's session the first time)
//	ack A t/P RANGE:TYPE... [epoch=N] [fetch]
//	                             ShareAcknowledge (fetch: piggybacked on a
//	                             ShareFetch); RANGE is O or O-O, TYPE accept,
//	                             release, reject, gap, renew
//	close A                      ShareAcknowledge epoch -1
//	advance DURATION             move the clock and Tick
//	state t/P                    the share-partition's in-flight records
//	config NAME=VALUE...         the group's share.* configs
//	offsets                      DescribeShareGroupOffsets of every partition
//	restart                      a new coordinator replays the state log
//
// The group is "g"; topic "t" has 2 partitions, "__int" 1 (internal).
// Rewrite the expected outputs with: go test ./broker/share -run Scripts -rewrite

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		if st, err := os.Stat(file); err != nil || st.IsDir() {
			continue // testdata/fuzz
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			s := newScript(t)
			defer func() { s.c.Close() }() // the coordinator of the last restart
			datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
				var out strings.Builder
				for _, line := range append([]string{d.FullCmd()}, strings.Split(d.Input, "\n")...) {
					line = strings.TrimSpace(line)
					if line == "" {
						continue
					}
					out.WriteString(s.run(t, strings.Fields(line)))
				}
				s.checkInvariants(t)
				return out.String()
			})
		})
	}
}

// fakeLog is an in-memory partition log of uncompressed batches.
type fakeLog struct {
	mu      sync.Mutex
	batches [][]byte
	hw      int64
	start   int64
	changed chan struct{}
}

func newFakeLog() *fakeLog { return &fakeLog{changed: make(chan struct{})} }

func (l *fakeLog) append(b []byte, n int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	base := l.hw
	binary.BigEndian.PutUint64(b, uint64(base))
	l.batches = append(l.batches, b)
	l.hw += n
	close(l.changed)
	l.changed = make(chan struct{})
	return base
}

func (l *fakeLog) HighWatermark() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.hw }

func (l *fakeLog) LogStartOffset() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.start }

func (l *fakeLog) Changed() <-chan struct{} { l.mu.Lock(); defer l.mu.Unlock(); return l.changed }

func (l *fakeLog) LastStableOffset() int64 { return l.HighWatermark() } // no open transactions

func (l *fakeLog) AbortedTransactions(from, to int64) []wlog.AbortedTxn { return nil }

func (l *fakeLog) Read(offset int64, maxBytes int, upTo int64) (wlog.ReadResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var data []byte
	for _, b := range l.batches {
		h, _ := wlog.ReadBatchHeader(b)
		if h.LastOffset() < offset || h.LastOffset() < l.start || h.BaseOffset >= upTo {
			continue
		}
		if len(data) > 0 && len(data)+len(b) > maxBytes {
			break
		}
		data = append(data, b...)
	}
	return wlog.ReadResult{Data: data, HighWatermark: l.hw, LogStartOffset: l.start, Release: func() {}}, nil
}

type fakeTopic struct {
	id    [16]byte
	parts []*fakeLog
}

type fakeTopics map[string]*fakeTopic

func (f fakeTopics) Partitions(t string) (int32, bool) {
	if ft, ok := f[t]; ok {
		return int32(len(ft.parts)), true
	}
	return 0, false
}

func (f fakeTopics) TopicID(t string) ([16]byte, bool) {
	if ft, ok := f[t]; ok {
		return ft.id, true
	}
	return [16]byte{}, false
}

func (f fakeTopics) TopicName(id [16]byte) (string, bool) {
	for n, ft := range f {
		if ft.id == id {
			return n, true
		}
	}
	return "", false
}

func (f fakeTopics) Internal(t string) bool { return strings.HasPrefix(t, "__") }

func (f fakeTopics) Log(t string, p int32) (PartitionLog, bool) {
	ft, ok := f[t]
	if !ok || p < 0 || int(p) >= len(ft.parts) {
		return nil, false
	}
	return ft.parts[p], true
}

// memState is an in-memory state log; every append is durable.
type memState struct{ log *fakeLog }

func (m memState) Append(b []byte, _ bool) (wlog.AppendResult, error) {
	var res wlog.AppendResult
	for first := true; len(b) > 0; first = false {
		h, _ := wlog.ReadBatchHeader(b)
		base := m.log.append(append([]byte(nil), b[:h.Size()]...), int64(h.NumRecords))
		if first {
			res.BaseOffset = base
		}
		b = b[h.Size():]
	}
	return res, nil
}

func (m memState) Read(offset int64, maxBytes int, upTo int64) (wlog.ReadResult, error) {
	return m.log.Read(offset, maxBytes, upTo)
}

func (m memState) HighWatermark() int64  { return m.log.HighWatermark() }
func (m memState) LogStartOffset() int64 { return m.log.LogStartOffset() }

type scriptMember struct {
	epoch   int32 // member epoch
	session int32 // next share session epoch
}

type script struct {
	now     time.Time
	topics  fakeTopics
	state   memState
	c       *Coordinator
	members map[string]*scriptMember
}

func newScript(t *testing.T) *script {
	s := &script{
		now:     time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		topics:  fakeTopics{"t": {id: [16]byte{1}, parts: []*fakeLog{newFakeLog(), newFakeLog()}}, "__int": {id: [16]byte{2}, parts: []*fakeLog{newFakeLog()}}},
		state:   memState{newFakeLog()},
		members: map[string]*scriptMember{},
	}
	s.start(t)
	return s
}

func (s *script) start(t *testing.T) {
	c, err := NewCoordinator(Options{State: s.state, Topics: s.topics, TickInterval: -1, Now: func() time.Time { return s.now },
		MaxRecordLocks: 20})
	if err != nil {
		t.Fatal(err)
	}
	s.c = c
}

func (s *script) checkInvariants(t *testing.T) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	for _, p := range s.c.parts {
		if err := p.check(s.c.settings(p.key.group).limit, s.c.opts.MaxRecordLocks); err != nil {
			t.Fatalf("share-partition %s/%d: %v", p.topic, p.key.part, err)
		}
	}
}

func (s *script) member(name string) *scriptMember {
	m := s.members[name]
	if m == nil {
		m = &scriptMember{}
		s.members[name] = m
	}
	return m
}

func parseTP(t *testing.T, arg string) (string, int32) {
	topic, p, ok := strings.Cut(arg, "/")
	n, err := strconv.Atoi(p)
	if !ok || err != nil {
		t.Fatalf("bad partition %q", arg)
	}
	return topic, int32(n)
}

func kv(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		out[k] = v
	}
	return out
}

func errName(code int16) string {
	if code == 0 {
		return "ok"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

var ackTypes = map[string]int8{"gap": AckGap, "accept": AckAccept, "release": AckRelease, "reject": AckReject, "renew": AckRenew}

func (s *script) run(t *testing.T, f []string) string {
	ctx := context.Background()
	handle := func(req kmsg.Request) kmsg.Response {
		resp, err := s.c.Handle(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(f, " "), err)
		}
		return resp
	}
	opts := kv(f[1:])
	switch f[0] {
	case "join", "heartbeat", "leave":
		m := s.member(f[1])
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version = 1
		req.GroupID, req.MemberID, req.MemberEpoch = "g", f[1], m.epoch
		switch f[0] {
		case "join":
			req.MemberEpoch = 0
			req.SubscribedTopicNames = strings.Split(opts["topics"], ",")
		case "leave":
			req.MemberEpoch = -1
		}
		if e, ok := opts["epoch"]; ok {
			n, _ := strconv.Atoi(e)
			req.MemberEpoch = int32(n)
		}
		resp := handle(req).(*kmsg.ShareGroupHeartbeatResponse)
		if resp.ErrorCode != 0 {
			return fmt.Sprintf("%s: %s\n", f[1], errName(resp.ErrorCode))
		}
		m.epoch = resp.MemberEpoch
		if f[0] == "leave" {
			m.session = 0 // leaving closed the member's share session
		}
		out := fmt.Sprintf("%s: epoch=%d", f[1], resp.MemberEpoch)
		if resp.Assignment != nil {
			var parts []string
			for _, tp := range resp.Assignment.TopicPartitions {
				name, _ := s.topics.TopicName(tp.TopicID)
				parts = append(parts, fmt.Sprintf("%s%v", name, tp.Partitions))
			}
			out += " assignment=" + strings.Join(parts, ",")
		}
		return out + "\n"
	case "produce":
		topic, p := parseTP(t, f[1])
		l := s.topics[topic].parts[p]
		if _, ok := opts["control"]; ok {
			l.append(recbatch.Marker(1, 0, true, 0, s.now.UnixMilli()), 1)
			return ""
		}
		n, _ := strconv.Atoi(opts["n"])
		recs := make([]recbatch.Record, n)
		for i := range recs {
			recs[i] = recbatch.Record{Key: []byte("k"), Value: []byte("v")}
		}
		l.append(recbatch.Encode(recs, s.now.UnixMilli(), -1, -1, 0), int64(n))
		return ""
	case "delete-topic":
		delete(s.topics, f[1])
		return ""
	case "trim":
		topic, p := parseTP(t, f[1])
		o, _ := strconv.ParseInt(f[2], 10, 64)
		l := s.topics[topic].parts[p]
		l.mu.Lock()
		l.start = o
		l.mu.Unlock()
		return ""
	case "fetch":
		m := s.member(f[1])
		req := kmsg.NewPtrShareFetchRequest()
		req.Version = 2
		g, id := "g", f[1]
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &id, m.session
		req.MaxBytes, req.MaxRecords = 1<<20, 500
		if v, ok := opts["max"]; ok {
			n, _ := strconv.Atoi(v)
			req.MaxRecords = int32(n)
		}
		if _, ok := opts["strict"]; ok {
			req.ShareAcquireMode = 1
		}
		if v, ok := opts["epoch"]; ok {
			n, _ := strconv.Atoi(v)
			req.ShareSessionEpoch = int32(n)
		}
		for _, tp := range strings.Split(f[2], ",") {
			topic, p := parseTP(t, tp)
			tid := s.topics[topic].id
			if n := len(req.Topics); n == 0 || req.Topics[n-1].TopicID != tid {
				req.Topics = append(req.Topics, kmsg.ShareFetchRequestTopic{TopicID: tid})
			}
			req.Topics[len(req.Topics)-1].Partitions = append(req.Topics[len(req.Topics)-1].Partitions, kmsg.ShareFetchRequestTopicPartition{Partition: p, PartitionMaxBytes: 1 << 20})
		}
		resp := handle(req).(*kmsg.ShareFetchResponse)
		if resp.ErrorCode != 0 {
			return fmt.Sprintf("%s: %s\n", f[1], errName(resp.ErrorCode))
		}
		m.session = req.ShareSessionEpoch + 1
		var out strings.Builder
		for _, rt := range resp.Topics {
			name, _ := s.topics.TopicName(rt.TopicID)
			for _, rp := range rt.Partitions {
				fmt.Fprintf(&out, "%s/%d:", name, rp.Partition)
				if rp.ErrorCode != 0 {
					fmt.Fprintf(&out, " error=%s", errName(rp.ErrorCode))
				}
				for _, a := range rp.AcquiredRecords {
					fmt.Fprintf(&out, " %d-%d(dc=%d)", a.FirstOffset, a.LastOffset, a.DeliveryCount)
				}
				if len(rp.AcquiredRecords) == 0 && rp.ErrorCode == 0 {
					out.WriteString(" nothing")
				}
				out.WriteString("\n")
			}
		}
		if out.Len() == 0 {
			return fmt.Sprintf("%s: nothing\n", f[1])
		}
		return out.String()
	case "ack", "close":
		m := s.member(f[1])
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.Version = 2
		g, id := "g", f[1]
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &id, m.session
		if f[0] == "close" {
			req.ShareSessionEpoch = -1
		} else {
			topic, p := parseTP(t, f[2])
			rp := kmsg.ShareAcknowledgeRequestTopicPartition{Partition: p}
			for _, a := range f[3:] {
				if strings.Contains(a, "=") {
					continue
				}
				rng, typ, _ := strings.Cut(a, ":")
				lo, hi, _ := strings.Cut(rng, "-")
				if hi == "" {
					hi = lo
				}
				first, _ := strconv.ParseInt(lo, 10, 64)
				last, _ := strconv.ParseInt(hi, 10, 64)
				at, ok := ackTypes[typ]
				if !ok {
					t.Fatalf("ack type %q", typ)
				}
				if at == AckRenew {
					req.IsRenewAck = true
				}
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{at}})
			}
			req.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: s.topics[topic].id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{rp}}}
		}
		if v, ok := opts["epoch"]; ok {
			n, _ := strconv.Atoi(v)
			req.ShareSessionEpoch = int32(n)
		}
		resp := handle(req).(*kmsg.ShareAcknowledgeResponse)
		if resp.ErrorCode != 0 {
			return fmt.Sprintf("%s: %s\n", f[1], errName(resp.ErrorCode))
		}
		if f[0] == "close" {
			m.session = 0
			return fmt.Sprintf("%s: closed\n", f[1])
		}
		m.session = req.ShareSessionEpoch + 1
		return fmt.Sprintf("%s: %s\n", f[1], errName(resp.Topics[0].Partitions[0].ErrorCode))
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			t.Fatal(err)
		}
		s.now = s.now.Add(d)
		s.c.Tick()
		return ""
	case "state":
		topic, p := parseTP(t, f[1])
		s.c.mu.Lock()
		defer s.c.mu.Unlock()
		sp := s.c.parts[partKey{"g", s.topics[topic].id, p}]
		if sp == nil {
			return "no state\n"
		}
		return describePartition(sp)
	case "config":
		if err := s.c.SetGroupConfigs(ctx, "g", opts); err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		return ""
	case "offsets":
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Version = 1
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "g"}}
		resp := handle(req).(*kmsg.DescribeShareGroupOffsetsResponse)
		var out strings.Builder
		for _, g := range resp.Groups {
			if g.ErrorCode != 0 {
				fmt.Fprintf(&out, "%s: %s\n", g.GroupID, errName(g.ErrorCode))
			}
			for _, rt := range g.Topics {
				for _, rp := range rt.Partitions {
					fmt.Fprintf(&out, "%s/%d: start=%d lag=%d\n", rt.Topic, rp.Partition, rp.StartOffset, rp.Lag)
				}
			}
		}
		return out.String()
	case "restart":
		s.c.Close()
		s.start(t)
		for _, m := range s.members {
			m.epoch, m.session = 0, 0
		}
		return ""
	}
	t.Fatalf("unknown command %q", f[0])
	return ""
}

// describePartition prints start, end and runs of equal states.
func describePartition(p *sharePartition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "start=%d end=%d", p.start, p.end())
	type run struct {
		first, last int64
		r           inflight
	}
	var runs []run
	for i, r := range p.recs {
		o := p.start + int64(i)
		if n := len(runs); n > 0 && runs[n-1].r.state == r.state && runs[n-1].r.count == r.count && runs[n-1].r.member == r.member {
			runs[n-1].last = o
			continue
		}
		runs = append(runs, run{o, o, r})
	}
	for _, r := range runs {
		fmt.Fprintf(&b, " %d-%d:%s(dc=%d", r.first, r.last, r.r.state, r.r.count)
		if r.r.member != "" {
			fmt.Fprintf(&b, ",%s", r.r.member)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	return b.String()
}
