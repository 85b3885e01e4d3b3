package group

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Persistence of KIP-848 group membership, so members keep heartbeating
// (same member ID, same epoch, same partitions) across a coordinator
// restart instead of being fenced and losing every partition.
//
// kmsg has no codec for Kafka's own KIP-848 records, so these are weir
// records with key versions Kafka does not use (Kafka tools skip them):
//
//	key   int16 32001 | group str | member str     value: JSON cmemberRecord
//	key   int16 32002 | group str                  value: JSON {"epoch": N}
//
// (str = int16 length + bytes.) A nil value deletes the member. Written
// without waiting (like classic group metadata): a lost record only means
// a member rejoins. The target assignment is not stored; after a restart
// the group epoch is bumped once and the assignor recomputes it, sticky to
// what members own.

const (
	memberKeyVersion     = 32001
	groupEpochKeyVersion = 32002
)

type cmemberRecord struct {
	Epoch            int32              `json:"epoch"`
	PrevEpoch        int32              `json:"prev_epoch"`
	State            int8               `json:"state"`
	Instance         string             `json:"instance,omitempty"`
	Rack             string             `json:"rack,omitempty"`
	Client           string             `json:"client,omitempty"`
	Host             string             `json:"host,omitempty"`
	Principal        string             `json:"principal,omitempty"`
	Subscribed       []string           `json:"subscribed,omitempty"`
	Regex            string             `json:"regex,omitempty"`
	RebalanceTimeout int64              `json:"rebalance_timeout_ms"`
	Assigned         map[string][]int32 `json:"assigned,omitempty"`
	Revoking         map[string][]int32 `json:"revoking,omitempty"`
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readStr(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

func memberKey(group, member string) []byte {
	b := binary.BigEndian.AppendUint16(nil, memberKeyVersion)
	return appendStr(appendStr(b, group), member)
}

func groupEpochKey(group string) []byte {
	return appendStr(binary.BigEndian.AppendUint16(nil, groupEpochKeyVersion), group)
}

func partsJSON(m map[tp]bool) map[string][]int32 {
	if len(m) == 0 {
		return nil
	}
	out := map[string][]int32{}
	for p := range m {
		out[p.topic] = append(out[p.topic], p.partition)
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

func partsFromJSON(m map[string][]int32) map[tp]bool {
	out := map[tp]bool{}
	for t, ps := range m {
		for _, p := range ps {
			out[tp{t, p}] = true
		}
	}
	return out
}

// persist writes what changed in the group since the last call: m's
// record (if m is not nil and changed), tombstones for removed members,
// the group epoch. Loop only.
func (cg *consumerGroup) persist(m *cmember) {
	var recs []rec
	for id := range cg.persisted {
		if _, ok := cg.members[id]; !ok {
			recs = append(recs, rec{Key: memberKey(cg.g.id, id)})
			delete(cg.persisted, id)
		}
	}
	if m != nil && cg.members[m.id] == m {
		v, _ := json.Marshal(cmemberRecord{
			Epoch: m.epoch, PrevEpoch: m.prevEpoch, State: int8(m.state),
			Instance: m.instanceID, Rack: m.rackID, Client: m.clientID, Host: m.clientHost, Principal: m.principal,
			Subscribed: m.subscribed, Regex: m.regex, RebalanceTimeout: m.rebalanceTimeout.Milliseconds(),
			Assigned: partsJSON(m.assigned), Revoking: partsJSON(m.revoking),
		})
		if cg.persisted[m.id] != string(v) {
			cg.persisted[m.id] = string(v)
			recs = append(recs, rec{Key: memberKey(cg.g.id, m.id), Value: v})
		}
	}
	if cg.epoch != cg.persistedEpoch {
		cg.persistedEpoch = cg.epoch
		v, _ := json.Marshal(map[string]int32{"epoch": cg.epoch})
		recs = append(recs, rec{Key: groupEpochKey(cg.g.id), Value: v})
	}
	if len(recs) > 0 {
		cg.g.c.writeRecords(cg.g, recs, false, nil)
	}
}

// applyConsumerRecord replays a record written by persist.
func (c *Coordinator) applyConsumerRecord(version int16, r decodedRecord) error {
	group, rest, ok := readStr(r.key[2:])
	if !ok {
		return fmt.Errorf("%w: consumer group key at %d", ErrCorruptRecord, r.offset)
	}
	g := c.groups[group]
	if g == nil {
		if r.tombstone {
			return nil
		}
		g = c.newGroup(group, kindConsumer)
	}
	if g.kind != kindConsumer {
		g.convertTo(kindConsumer)
	}
	cg := g.cg
	if version == groupEpochKeyVersion {
		if r.tombstone {
			return nil
		}
		var v struct {
			Epoch int32 `json:"epoch"`
		}
		if err := json.Unmarshal(r.value, &v); err != nil {
			return fmt.Errorf("%w: consumer group epoch at %d: %v", ErrCorruptRecord, r.offset, err)
		}
		cg.epoch, cg.persistedEpoch = v.Epoch, v.Epoch
		return nil
	}
	member, _, ok := readStr(rest)
	if !ok {
		return fmt.Errorf("%w: consumer member key at %d", ErrCorruptRecord, r.offset)
	}
	if r.tombstone {
		if m := cg.members[member]; m != nil && m.instanceID != "" {
			delete(cg.static, m.instanceID)
		}
		delete(cg.members, member)
		delete(cg.persisted, member)
		return nil
	}
	var v cmemberRecord
	if err := json.Unmarshal(r.value, &v); err != nil {
		return fmt.Errorf("%w: consumer member at %d: %v", ErrCorruptRecord, r.offset, err)
	}
	m := &cmember{
		id: member, instanceID: v.Instance, rackID: v.Rack, clientID: v.Client, clientHost: v.Host, principal: v.Principal,
		epoch: v.Epoch, prevEpoch: v.PrevEpoch, state: memberState(v.State),
		subscribed: v.Subscribed, regex: v.Regex,
		rebalanceTimeout: time.Duration(v.RebalanceTimeout) * time.Millisecond,
		assigned:         partsFromJSON(v.Assigned), revoking: partsFromJSON(v.Revoking),
	}
	if m.state < mStable || m.state > mUnreleased {
		m.state = mStable
	}
	cg.members[member] = m
	if m.instanceID != "" {
		cg.static[m.instanceID] = member
	}
	cg.persisted[member] = string(r.value)
	return nil
}

// restoreConsumerGroups finishes the replay of KIP-848 groups: fresh
// deadlines, ownership from what members hold, the previous target taken
// as what they hold, and one epoch bump so the assignor runs again.
func (c *Coordinator) restoreConsumerGroups(now time.Time) {
	for _, g := range c.groups {
		if g.kind != kindConsumer {
			continue
		}
		cg := g.cg
		for id, m := range cg.members {
			if m.regex != "" {
				// An expression that no longer compiles (cannot happen for
				// records this package wrote) drops the regex.
				if re, err := compileRegex(m.regex); err == nil {
					m.re = re
				} else {
					m.regex = ""
				}
			}
			m.deadline = now.Add(c.opts.ConsumerSessionTimeout)
			if m.state == mUnrevoked {
				m.revokeDeadline = now.Add(max(m.rebalanceTimeout, time.Second))
			}
			cg.target[id] = maps2(m.assigned)
			for p := range m.assigned {
				cg.owners[p] = id
			}
			for p := range m.revoking {
				cg.owners[p] = id
			}
			cg.epoch = max(cg.epoch, m.epoch)
		}
		if len(cg.members) == 0 {
			continue
		}
		cg.assignmentEpoch = cg.epoch
		cg.topicSig = cg.topicSignature(cg.effectiveSubscriptions())
		cg.bump("coordinator restarted")
	}
}

func maps2(m map[tp]bool) map[tp]bool {
	out := make(map[tp]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
