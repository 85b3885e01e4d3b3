package group

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Data-driven scripts for the classic protocol (testdata/classic/*.txt),
// in the style of cockroachdb/datadriven: a block is one or more command
// lines, "----", then the expected output, ended by a blank line. Members
// are named by aliases; their member IDs are learned from responses and
// printed back as aliases. Time only moves with "advance".
//
//	join A [v=N] [instance=I] [protocols=p1,p2] [session=MS] [rebalance=MS]
//	sync A [gen=N] [assign=A:x,B:y]        (gen defaults to A's last)
//	heartbeat A [gen=N]
//	leave A [B...]                          (LeaveGroup v5, batched)
//	forget A                                (A's process restarts: no member ID)
//	advance DURATION
//	pending                                 (answers of parked requests)
//	state
//
// Set WEIR_REWRITE=1 to rewrite the expected outputs.

type script struct {
	h       *harness
	ids     map[string]string // alias -> member ID
	aliases map[string]string // member ID -> alias
	gens    map[string]int32
	joins   map[string]chan *kmsg.JoinGroupResponse
	syncs   map[string]chan *kmsg.SyncGroupResponse
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
	t.Fatalf("unknown command %q", line)
	return ""
}

func TestClassicScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/classic/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	rewrite := os.Getenv("WEIR_REWRITE") == "1"
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s := &script{
				h:       newHarness(t),
				ids:     map[string]string{},
				aliases: map[string]string{},
				gens:    map[string]int32{},
				joins:   map[string]chan *kmsg.JoinGroupResponse{},
				syncs:   map[string]chan *kmsg.SyncGroupResponse{},
			}
			var out strings.Builder
			lines := strings.Split(string(data), "\n")
			for i := 0; i < len(lines); i++ {
				line := lines[i]
				if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
					out.WriteString(line + "\n")
					continue
				}
				// Commands up to "----".
				var cmds []string
				for ; i < len(lines) && lines[i] != "----"; i++ {
					cmds = append(cmds, lines[i])
				}
				if i == len(lines) {
					t.Fatalf("%s: block without ----: %q", file, cmds)
				}
				var want []string
				for i++; i < len(lines) && lines[i] != ""; i++ {
					want = append(want, lines[i])
				}
				var got []string
				for _, c := range cmds {
					got = append(got, strings.Split(s.run(t, c), "\n")...)
				}
				for _, c := range cmds {
					out.WriteString(c + "\n")
				}
				out.WriteString("----\n" + strings.Join(got, "\n") + "\n")
				if i < len(lines) {
					out.WriteString("\n")
				}
				if !rewrite && strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", file, strings.Join(cmds, "; "), strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			if rewrite {
				if err := os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
