package group

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/ilog"
)

// The script commands for KIP-848 groups, offsets and the offsets log (see
// script_test.go for the list).

// runConsumer runs a KIP-848 command; ok is false for other commands.
func (s *script) runConsumer(t *testing.T, f []string, a map[string]string) (string, bool) {
	switch f[0] {
	case "cg-heartbeat":
		alias := f[1]
		s.learn(alias, alias)
		m := s.cmems[alias]
		if m == nil {
			m = &scriptMember{}
			s.cmems[alias] = m
		}
		keep := slices.Contains(f, "keep") // still owns what it was told to revoke
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "g", alias, m.epoch
		if x, ok := a["epoch"]; ok {
			req.MemberEpoch = int32(atoi(t, x))
		}
		if x, ok := a["instance"]; ok {
			req.InstanceID = &x
		}
		if x, ok := a["topics"]; ok {
			req.SubscribedTopicNames = strings.Split(x, ",")
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if req.MemberEpoch == 0 {
			req.RebalanceTimeoutMillis = 30000
			if x, ok := a["rebalance"]; ok {
				req.RebalanceTimeoutMillis = int32(atoi(t, x))
			}
			if req.SubscribedTopicNames == nil {
				req.SubscribedTopicNames = []string{"t"}
			}
		} else {
			owned := m.owned
			if keep {
				owned = m.prevOwned
			}
			if x, ok := a["owned"]; ok {
				owned = parseParts(t, x)
			}
			byTopic := map[string][]int32{}
			for p := range owned {
				byTopic[p.topic] = append(byTopic[p.topic], p.partition)
			}
			for _, name := range sortedKeys(byTopic) {
				ps := byTopic[name]
				slices.Sort(ps)
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicIDOf(name), Partitions: ps})
			}
		}
		r := s.h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			// The client starts over, as franz-go does on a fenced or
			// unknown member: epoch 0, nothing owned.
			*m = scriptMember{}
			return fmt.Sprintf("%s: cg-heartbeat %s", alias, codeName(r.ErrorCode)), true
		}
		m.epoch = r.MemberEpoch
		out := fmt.Sprintf("%s: epoch=%d", alias, r.MemberEpoch)
		if r.Assignment != nil && !keep {
			m.prevOwned = m.owned
			m.owned = assignedParts(s.h.topics, r.Assignment)
		}
		if r.Assignment != nil {
			out += " assigned=[" + formatAssignment(s.h.topics, r.Assignment) + "]"
		}
		return out + fmt.Sprintf(" interval=%dms", r.HeartbeatIntervalMillis), true
	case "cg-leave":
		alias := f[1]
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "g", alias, -1
		if x, ok := a["instance"]; ok {
			req.InstanceID = &x
		}
		if slices.Contains(f, "static") {
			req.MemberEpoch = -2
		}
		r := s.h.handle(req).(*kmsg.ConsumerGroupHeartbeatResponse)
		delete(s.cmems, alias)
		return fmt.Sprintf("%s: cg-leave %s", alias, codeName(r.ErrorCode)), true
	case "cg-state":
		var out []string
		_ = s.h.c.do(s.h.ctx(), func() {
			g := s.h.c.groups["g"]
			if g == nil || g.cg == nil {
				out = append(out, "no consumer group")
				return
			}
			cg := g.cg
			out = append(out, fmt.Sprintf("state=%s epoch=%d assignment-epoch=%d", cg.stateName(), cg.epoch, cg.assignmentEpoch))
			for _, id := range sortedKeys(cg.members) {
				m := cg.members[id]
				line := fmt.Sprintf("%s: epoch=%d %s assigned=[%s]", s.alias(id), m.epoch, memberStateName(m.state), formatParts(m.assigned))
				if len(m.revoking) > 0 {
					line += " revoking=[" + formatParts(m.revoking) + "]"
				}
				line += " target=[" + formatParts(cg.target[id]) + "]"
				if m.leftStatic {
					line += " left-static"
				}
				out = append(out, line)
			}
		})
		return strings.Join(out, "\n"), true
	}
	return "", false
}

func memberStateName(st memberState) string {
	switch st {
	case mUnrevoked:
		return "unrevoked"
	case mUnreleased:
		return "unreleased"
	}
	return "stable"
}

// runOffsets runs an offsets command; ok is false for other commands.
func (s *script) runOffsets(t *testing.T, f []string, a map[string]string) (string, bool) {
	switch f[0] {
	case "commit":
		alias := f[1]
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.Generation = "g", -1
		if alias != "-" {
			req.MemberID = s.ids[alias]
			req.Generation = s.gens[alias]
			if m := s.cmems[alias]; m != nil {
				req.Generation = m.epoch
			}
		}
		if x, ok := a["gen"]; ok {
			req.Generation = int32(atoi(t, x))
		}
		if x, ok := a["v"]; ok {
			req.Version = int16(atoi(t, x))
		}
		for _, c := range parseOffsets(t, f[2:]) {
			req.Topics = append(req.Topics, kmsg.OffsetCommitRequestTopic{Topic: c.topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: c.partition, Offset: c.offset, LeaderEpoch: -1}}})
		}
		r := s.h.handle(req).(*kmsg.OffsetCommitResponse)
		var out []string
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s:%d=%s", rt.Topic, rp.Partition, codeName(rp.ErrorCode)))
			}
		}
		return fmt.Sprintf("%s: commit %s", alias, strings.Join(out, " ")), true
	case "txn-commit":
		pid := int64(atoi(t, f[1]))
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 3
		req.TransactionalID, req.Group, req.ProducerID, req.Generation = "tx", "g", pid, -1
		if x, ok := a["epoch"]; ok {
			req.ProducerEpoch = int16(atoi(t, x))
		}
		if x, ok := a["v"]; ok {
			req.Version = int16(atoi(t, x))
		}
		if x, ok := a["member"]; ok {
			req.MemberID = s.ids[x]
			req.Generation = s.gens[x]
		}
		if x, ok := a["gen"]; ok {
			req.Generation = int32(atoi(t, x))
		}
		for _, c := range parseOffsets(t, f[2:]) {
			req.Topics = append(req.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: c.topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: c.partition, Offset: c.offset, LeaderEpoch: -1}}})
		}
		r, err := s.h.c.TxnOffsetCommit(s.h.ctx(), req)
		if err != nil {
			return fmt.Sprintf("txn-commit %d: %v", pid, err), true
		}
		var out []string
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s:%d=%s", rt.Topic, rp.Partition, codeName(rp.ErrorCode)))
			}
		}
		return fmt.Sprintf("txn-commit %d: %s", pid, strings.Join(out, " ")), true
	case "marker":
		pid := int64(atoi(t, f[1]))
		commit := f[2] == "commit"
		var epoch int16
		if x, ok := a["epoch"]; ok {
			epoch = int16(atoi(t, x))
		}
		if err := s.h.c.WriteMarker(s.h.ctx(), pid, epoch, commit, 0); err != nil {
			return fmt.Sprintf("marker %d %s: %v", pid, f[2], err), true
		}
		return fmt.Sprintf("marker %d %s: OK", pid, f[2]), true
	case "fetch":
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		req.RequireStable = slices.Contains(f, "stable")
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
		r := s.h.handle(req).(*kmsg.OffsetFetchResponse)
		rg := r.Groups[0]
		if rg.ErrorCode != 0 {
			return "fetch " + codeName(rg.ErrorCode), true
		}
		var out []string
		for _, rt := range rg.Topics {
			for _, rp := range rt.Partitions {
				v := strconv.FormatInt(rp.Offset, 10)
				if rp.ErrorCode != 0 {
					v = codeName(rp.ErrorCode)
				}
				out = append(out, fmt.Sprintf("%s:%d=%s", rt.Topic, rp.Partition, v))
			}
		}
		if len(out) == 0 {
			return "fetch: none", true
		}
		return "fetch: " + strings.Join(out, " "), true
	}
	return "", false
}

// runLog runs "records" and "restart"; ok is false for other commands.
func (s *script) runLog(t *testing.T, f []string) (string, bool) {
	switch f[0] {
	case "records":
		s.flush(t)
		s.h.st.mu.Lock()
		batches := slices.Clone(s.h.st.batches[s.logged:])
		s.logged = len(s.h.st.batches)
		s.h.st.mu.Unlock()
		var out []string
		for _, b := range batches {
			if _, err := decodeBatches(b, func(r decodedRecord) { out = append(out, s.describeRecord(r)) }); err != nil {
				t.Fatal(err)
			}
		}
		if len(out) == 0 {
			return "none", true
		}
		return strings.Join(out, "\n"), true
	case "restart":
		s.h.restart(s.h.st.crash())
		s.logged = len(s.h.st.batches)
		clear(s.joins)
		clear(s.syncs)
		return "ok", true
	}
	return "", false
}

// flush waits until every write queued so far is appended: the writer
// appends in queue order, so a write queued now is appended after them.
func (s *script) flush(t *testing.T) {
	done := make(chan error, 1)
	err := s.h.c.do(s.h.ctx(), func() {
		s.h.c.w.Enqueue(ilog.Write{Done: func(_ int64, err error) { done <- err }})
	})
	if err == nil {
		err = <-done
	}
	if err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// describeRecord is one line per record of the offsets log.
func (s *script) describeRecord(r decodedRecord) string {
	prefix := ""
	if r.txn {
		prefix = fmt.Sprintf("txn pid=%d epoch=%d ", r.producerID, r.producerEpoch)
	}
	if r.control {
		var k kmsg.ControlRecordKey
		_ = k.ReadFrom(r.key)
		kind := "ABORT"
		if k.Type == kmsg.ControlRecordKeyTypeCommit {
			kind = "COMMIT"
		}
		return prefix + "marker " + kind
	}
	switch version := int16(binary.BigEndian.Uint16(r.key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		_ = k.ReadFrom(r.key)
		if r.tombstone {
			return prefix + fmt.Sprintf("offset %s %s:%d tombstone", k.Group, k.Topic, k.Partition)
		}
		var v kmsg.OffsetCommitValue
		_ = v.ReadFrom(r.value)
		return prefix + fmt.Sprintf("offset %s %s:%d=%d", k.Group, k.Topic, k.Partition, v.Offset)
	case 2:
		var k kmsg.GroupMetadataKey
		_ = k.ReadFrom(r.key)
		if r.tombstone {
			return fmt.Sprintf("group %s tombstone", k.Group)
		}
		var v kmsg.GroupMetadataValue
		_ = v.ReadFrom(r.value)
		var ms []string
		for _, m := range v.Members {
			ms = append(ms, s.alias(m.MemberID))
		}
		slices.Sort(ms)
		deref := func(p *string) string {
			if p == nil {
				return ""
			}
			return s.alias(*p)
		}
		protocol := ""
		if v.Protocol != nil {
			protocol = *v.Protocol
		}
		return fmt.Sprintf("group %s gen=%d protocol=%s leader=%s members=[%s]", k.Group, v.Generation, protocol, deref(v.Leader), strings.Join(ms, " "))
	case memberKeyVersion:
		group, rest, _ := readStr(r.key[2:])
		member, _, _ := readStr(rest)
		if r.tombstone {
			return fmt.Sprintf("member %s/%s tombstone", group, s.alias(member))
		}
		var v cmemberRecord
		_ = json.Unmarshal(r.value, &v)
		line := fmt.Sprintf("member %s/%s epoch=%d assigned=[%s]", group, s.alias(member), v.Epoch, formatParts(partsFromJSON(v.Assigned)))
		if len(v.Revoking) > 0 {
			line += " revoking=[" + formatParts(partsFromJSON(v.Revoking)) + "]"
		}
		return line
	case groupEpochKeyVersion:
		group, _, _ := readStr(r.key[2:])
		return fmt.Sprintf("group-epoch %s %s", group, r.value)
	default:
		return fmt.Sprintf("record key version %d", version)
	}
}

func assignedParts(topics *fakeTopics, a *kmsg.ConsumerGroupHeartbeatResponseAssignment) map[tp]bool {
	out := map[tp]bool{}
	for _, at := range a.Topics {
		name, _ := topics.TopicName(at.TopicID)
		for _, p := range at.Partitions {
			out[tp{name, p}] = true
		}
	}
	return out
}

func formatAssignment(topics *fakeTopics, a *kmsg.ConsumerGroupHeartbeatResponseAssignment) string {
	return formatParts(assignedParts(topics, a))
}

// formatParts is "t:0 t:1 u:0" (sorted).
func formatParts(m map[tp]bool) string {
	var out []string
	for _, p := range sortedTPs(m) {
		out = append(out, fmt.Sprintf("%s:%d", p.topic, p.partition))
	}
	return strings.Join(out, " ")
}

// parseParts reads "t:0,t:1".
func parseParts(t *testing.T, s string) map[tp]bool {
	out := map[tp]bool{}
	if s == "" {
		return out
	}
	for _, x := range strings.Split(s, ",") {
		name, p, ok := strings.Cut(x, ":")
		if !ok {
			t.Fatalf("bad partition %q", x)
		}
		out[tp{name, int32(atoi(t, p))}] = true
	}
	return out
}

type scriptOffset struct {
	tp
	offset int64
}

// parseOffsets reads the "t:P=OFFSET" fields (others are ignored).
func parseOffsets(t *testing.T, fields []string) []scriptOffset {
	var out []scriptOffset
	for _, f := range fields {
		part, off, ok := strings.Cut(f, "=")
		name, p, isTP := strings.Cut(part, ":")
		if !ok || !isTP {
			continue
		}
		out = append(out, scriptOffset{tp{name, int32(atoi(t, p))}, int64(atoi(t, off))})
	}
	return out
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}
