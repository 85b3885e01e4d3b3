package group

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Data-driven scripts (github.com/cockroachdb/datadriven) for the
// coordinator's state machines: testdata/classic (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup; eager and cooperative clients, static members),
// testdata/consumer (KIP-848 ConsumerGroupHeartbeat) and testdata/offsets
// (OffsetCommit, TxnOffsetCommit, markers). A block is one or more command
// lines, "----", then the expected output (one or more lines per command).
// Members are named by aliases: classic member IDs are learned from
// responses and printed back as aliases; KIP-848 members use their alias
// as member ID. Time only moves with "advance" (a fake clock, then the
// loop's Tick).
//
// Classic:
//
//	join A [v=N] [instance=I] [protocols=p1,p2] [session=MS] [rebalance=MS]
//	sync A [gen=N] [assign=A:x,B:y]        (gen defaults to A's last)
//	heartbeat A [gen=N]
//	leave A [B...]                          (LeaveGroup v5, batched)
//	forget A                                (A's process restarts: no member ID)
//	pending                                 (answers of parked requests)
//	state
//
// KIP-848 (a simulated client: it reports as owned what it was last
// assigned, so revocations are acknowledged on its next heartbeat):
//
//	cg-heartbeat A [epoch=N] [topics=t,u] [instance=I] [owned=t:0,t:1] [keep]
//	                                        (keep: report the partitions owned
//	                                        before the last assignment)
//	cg-leave A [static]                     (epoch -1, or -2 for a static member)
//	cg-state
//
// Offsets:
//
//	commit A [gen=N] [v=N] t:P=OFFSET...    (A "-": no member, generation -1)
//	txn-commit PID [epoch=N] [v=N] [member=A gen=N] t:P=OFFSET...
//	marker PID commit|abort
//	fetch [stable]                          (OffsetFetch v8 of the group)
//
// Any script:
//
//	advance DURATION
//	records                                 (what was appended to the offsets
//	                                        log since the last "records")
//	restart                                 (crash: a new coordinator replays
//	                                        what was durable)
//
// The group is "g"; topics "t" (4 partitions) and "u" (2). Rewrite the
// expected outputs with: go test ./broker/group -run Scripts -rewrite

type script struct {
	h       *harness
	ids     map[string]string // alias -> member ID
	aliases map[string]string // member ID -> alias
	gens    map[string]int32
	protos  map[string]string // alias -> protocol of its last join
	joins   map[string]chan *kmsg.JoinGroupResponse
	syncs   map[string]chan *kmsg.SyncGroupResponse
	cmems   map[string]*scriptMember
	logged  int // batches of h.st already printed by "records"
}

// scriptMember is a simulated KIP-848 client.
type scriptMember struct {
	epoch     int32
	owned     map[tp]bool
	prevOwned map[tp]bool
}

func newScript(t *testing.T) *script {
	return &script{
		h:       newHarness(t),
		ids:     map[string]string{},
		aliases: map[string]string{},
		gens:    map[string]int32{},
		protos:  map[string]string{},
		joins:   map[string]chan *kmsg.JoinGroupResponse{},
		syncs:   map[string]chan *kmsg.SyncGroupResponse{},
		cmems:   map[string]*scriptMember{},
	}
}

func (s *script) alias(id string) string {
	if a, ok := s.aliases[id]; ok {
		return a
	}
	if id == "" {
		return `""`
	}
	return "?" + id
}

func (s *script) learn(alias, id string) {
	if id == "" {
		return
	}
	s.ids[alias] = id
	s.aliases[id] = alias
}

func args(fields []string) map[string]string {
	out := map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = v
		}
	}
	return out
}

func codeName(code int16) string {
	if code == 0 {
		return "OK"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return strconv.Itoa(int(code))
}

func (s *script) joinOut(alias string, r *kmsg.JoinGroupResponse) string {
	if r.ErrorCode != 0 {
		s.learn(alias, r.MemberID)
		return fmt.Sprintf("%s: join %s", alias, codeName(r.ErrorCode))
	}
	s.learn(alias, r.MemberID)
	s.gens[alias] = r.Generation
	s.protos[alias] = *r.Protocol
	var ms []string
	for _, m := range r.Members {
		ms = append(ms, s.alias(m.MemberID))
	}
	slices.Sort(ms)
	out := fmt.Sprintf("%s: joined gen=%d leader=%s protocol=%s", alias, r.Generation, s.alias(r.LeaderID), *r.Protocol)
	if len(ms) > 0 {
		out += " members=[" + strings.Join(ms, " ") + "]"
	}
	if r.SkipAssignment {
		out += " skip-assignment"
	}
	return out
}

func (s *script) syncOut(alias string, r *kmsg.SyncGroupResponse) string {
	if r.ErrorCode != 0 {
		return fmt.Sprintf("%s: sync %s", alias, codeName(r.ErrorCode))
	}
	return fmt.Sprintf("%s: synced assignment=%q", alias, r.MemberAssignment)
}

func (s *script) run(t *testing.T, line string) string {
	f := strings.Fields(line)
	a := args(f)
	switch f[0] {
	case "join":
		alias := f[1]
		v := int16(9)
		if x, ok := a["v"]; ok {
			n, _ := strconv.Atoi(x)
			v = int16(n)
		}
		protos := []string{"range"}
		if x, ok := a["protocols"]; ok {
			protos = strings.Split(x, ",")
		}
		req := joinReq(v, "g", s.ids[alias], a["instance"], protos...)
		if x, ok := a["session"]; ok {
			n, _ := strconv.Atoi(x)
			req.SessionTimeoutMillis = int32(n)
		}
		if x, ok := a["rebalance"]; ok {
			n, _ := strconv.Atoi(x)
			req.RebalanceTimeoutMillis = int32(n)
		}
		imm, wait := s.h.join(req)
		if imm != nil {
			return s.joinOut(alias, imm)
		}
		s.joins[alias] = wait
		return alias + ": join waiting"
	case "sync":
		alias := f[1]
		gen := s.gens[alias]
		if x, ok := a["gen"]; ok {
			n, _ := strconv.Atoi(x)
			gen = int32(n)
		}
		assign := map[string]string{}
		if x, ok := a["assign"]; ok {
			for _, kv := range strings.Split(x, ",") {
				k, v, _ := strings.Cut(kv, ":")
				assign[s.ids[k]] = v
			}
		}
		req := syncReq("g", s.ids[alias], gen, nil)
		if p, ok := s.protos[alias]; ok {
			req.Protocol = &p
		}
		for id, v := range assign {
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(v)})
		}
		imm, wait := s.h.sync(req)
		if imm != nil {
			return s.syncOut(alias, imm)
		}
		s.syncs[alias] = wait
		return alias + ": sync waiting"
	case "heartbeat":
		alias := f[1]
		gen := s.gens[alias]
		if x, ok := a["gen"]; ok {
			n, _ := strconv.Atoi(x)
			gen = int32(n)
		}
		r := s.h.handle(hbReq("g", s.ids[alias], gen)).(*kmsg.HeartbeatResponse)
		return fmt.Sprintf("%s: heartbeat %s", alias, codeName(r.ErrorCode))
	case "leave":
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = 5
		req.Group = "g"
		for _, alias := range f[1:] {
			req.Members = append(req.Members, kmsg.LeaveGroupRequestMember{MemberID: s.ids[alias]})
		}
		r := s.h.handle(req).(*kmsg.LeaveGroupResponse)
		var out []string
		for i, m := range r.Members {
			out = append(out, fmt.Sprintf("%s: leave %s", f[1+i], codeName(m.ErrorCode)))
		}
		return strings.Join(out, "\n")
	case "forget":
		delete(s.ids, f[1])
		return "ok"
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			t.Fatal(err)
		}
		s.h.advance(d)
		return "ok"
	case "pending":
		var out []string
		// Learn every answered member ID first, so member lists print
		// aliases.
		answered := map[string]*kmsg.JoinGroupResponse{}
		for _, alias := range sortedKeys(s.joins) {
			if r, ok := ready(s.joins[alias]); ok {
				answered[alias] = r
				s.learn(alias, r.MemberID)
				delete(s.joins, alias)
			}
		}
		for _, alias := range sortedKeys(answered) {
			out = append(out, s.joinOut(alias, answered[alias]))
		}
		for _, alias := range sortedKeys(s.syncs) {
			if r, ok := ready(s.syncs[alias]); ok {
				out = append(out, s.syncOut(alias, r))
				delete(s.syncs, alias)
			}
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "\n")
	case "state":
		var out string
		_ = s.h.c.do(s.h.ctx(), func() {
			g := s.h.c.groups["g"]
			if g == nil {
				out = "no group"
				return
			}
			var ms []string
			for id := range g.members {
				ms = append(ms, s.alias(id))
			}
			slices.Sort(ms)
			out = fmt.Sprintf("state=%s gen=%d leader=%s protocol=%s members=[%s]", g.stateName(), g.generation, s.alias(g.leader), g.protocol, strings.Join(ms, " "))
		})
		return out
	}
	if out, ok := s.runConsumer(t, f, a); ok {
		return out
	}
	if out, ok := s.runOffsets(t, f, a); ok {
		return out
	}
	if out, ok := s.runLog(t, f); ok {
		return out
	}
	t.Fatalf("unknown command %q", line)
	return ""
}

// runScripts runs every script under dir, each on a fresh coordinator.
func runScripts(t *testing.T, dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in %s: %v", dir, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			s := newScript(t)
			datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
				var out []string
				for _, line := range append([]string{d.FullCmd()}, inputLines(d.Input)...) {
					out = append(out, s.run(t, line))
				}
				return strings.Join(out, "\n") + "\n"
			})
		})
	}
}

// inputLines are the lines of a block after its first: more commands.
func inputLines(input string) []string {
	if input == "" {
		return nil
	}
	return strings.Split(input, "\n")
}

func TestClassicScripts(t *testing.T)  { runScripts(t, "testdata/classic") }
func TestConsumerScripts(t *testing.T) { runScripts(t, "testdata/consumer") }
func TestOffsetScripts(t *testing.T)   { runScripts(t, "testdata/offsets") }
