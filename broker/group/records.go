package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/recbatch"
)

// Records of "__consumer_offsets", in Kafka's own formats so the partition
// reads the same as a Kafka cluster's (kafka-dump-log, kcat -C work):
//
//	key   OffsetCommitKey   {version=1, group, topic, partition}
//	value OffsetCommitValue {version=3: offset, leader epoch, metadata, commit ts}
//	      (version=1 when the commit carried an explicit expiry, v1-v4 requests)
//	key   GroupMetadataKey  {version=2, group}
//	value GroupMetadataValue{version=3: protocol type, generation, protocol,
//	      leader, state ts, members (id, instance, client, timeouts,
//	      subscription, assignment)}
//
// A nil value is a tombstone (offset deleted or expired; group deleted).
// Offsets committed inside a transaction (TxnOffsetCommit) are written in a
// transactional batch of the producer and take effect when that producer's
// COMMIT control batch (a marker, as in data partitions) follows; an ABORT
// marker discards them.
// Records are written in uncompressed RecordBatch v2 batches (magic 2,
// CRC-32C over attributes..end, producer id -1), one batch per write.
// KIP-848 group membership is kept in weir records (key versions 32001,
// 32002; consumer_persist.go).

const (
	offsetKeyVersion   = 1
	groupKeyVersion    = 2
	offsetValueVersion = 3
	groupValueVersion  = 3
)

// ErrCorruptRecord is a record of the offsets log that cannot be decoded;
// replay logs and skips it.
var ErrCorruptRecord = errors.New("group: corrupt offsets record")

// rec is one key/value pair to write; a nil Value is a tombstone.
type rec = recbatch.Record

// encodeBatch builds one plain RecordBatch v2 (no producer) holding recs,
// timestamped now.
func encodeBatch(recs []rec, now time.Time) []byte {
	return recbatch.Encode(recs, now.UnixMilli(), -1, -1, 0)
}

// decodedRecord is a record read back from the log, with its batch's
// producer and transactional/control attributes.
type decodedRecord struct {
	offset        int64
	key, value    []byte
	tombstone     bool
	producerID    int64
	producerEpoch int16
	txn, control  bool
}

// decodeBatches walks concatenated RecordBatch v2 bytes, calling fn for each
// record. It returns the offset after the last complete batch. A batch that
// fails its CRC or framing, or a partial trailing batch (the log's reads
// return whole batches), ends the walk with ErrCorruptRecord; compressed
// batches are skipped (this package never writes them).
func decodeBatches(data []byte, fn func(decodedRecord)) (next int64, err error) {
	next, consumed, err := recbatch.Walk(data, func(b *recbatch.Batch) error {
		if b.Compressed() {
			return nil // never written by this package
		}
		return b.Records(func(off int64, key, value []byte) error {
			fn(decodedRecord{
				offset:        off,
				key:           key,
				value:         value,
				tombstone:     value == nil,
				producerID:    b.ProducerID,
				producerEpoch: b.ProducerEpoch,
				txn:           b.Transactional(),
				control:       b.Control(),
			})
			return nil
		})
	})
	if err != nil {
		return next, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	if consumed != len(data) {
		return next, fmt.Errorf("%w: partial batch of %d bytes", ErrCorruptRecord, len(data)-consumed)
	}
	return next, nil
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func offsetValue(c committed) []byte {
	v := kmsg.OffsetCommitValue{
		Version:         offsetValueVersion,
		Offset:          c.offset,
		LeaderEpoch:     c.leaderEpoch,
		Metadata:        c.metadata,
		CommitTimestamp: c.commitTime.UnixMilli(),
	}
	if !c.expireTime.IsZero() {
		v.Version = 1
		v.ExpireTimestamp = c.expireTime.UnixMilli()
	}
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// groupValue is the GroupMetadataValue of a classic group.
func groupValue(g *group) []byte {
	v := kmsg.GroupMetadataValue{
		Version:               groupValueVersion,
		ProtocolType:          g.protocolType,
		Generation:            g.generation,
		CurrentStateTimestamp: g.stateSince.UnixMilli(),
	}
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	for _, m := range g.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		if m.instanceID != "" {
			iid := m.instanceID
			vm.InstanceID = &iid
		}
		vm.ClientID, vm.ClientHost = m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// applyRecord applies one replayed record to the in-memory state. Loop (or
// NewCoordinator before the loop starts) only.
func (c *Coordinator) applyRecord(r decodedRecord) error {
	if r.control {
		var k kmsg.ControlRecordKey
		if err := k.ReadFrom(r.key); err != nil {
			return fmt.Errorf("%w: control record at %d: %v", ErrCorruptRecord, r.offset, err)
		}
		switch k.Type {
		case kmsg.ControlRecordKeyTypeCommit:
			c.completeTxn(r.producerID, true)
		case kmsg.ControlRecordKeyTypeAbort:
			c.completeTxn(r.producerID, false)
		}
		return nil
	}
	if len(r.key) < 2 {
		return fmt.Errorf("%w: key of %d bytes at offset %d", ErrCorruptRecord, len(r.key), r.offset)
	}
	version := int16(binary.BigEndian.Uint16(r.key))
	switch version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.key); err != nil {
			return fmt.Errorf("%w: offset key at %d: %v", ErrCorruptRecord, r.offset, err)
		}
		t := tp{k.Topic, k.Partition}
		if r.tombstone {
			if g := c.groups[k.Group]; g != nil {
				delete(g.offsets, t)
			}
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.value); err != nil {
			return fmt.Errorf("%w: offset value at %d: %v", ErrCorruptRecord, r.offset, err)
		}
		cm := committed{
			logOffset:   r.offset,
			offset:      v.Offset,
			leaderEpoch: v.LeaderEpoch,
			metadata:    v.Metadata,
			commitTime:  time.UnixMilli(v.CommitTimestamp),
		}
		if v.Version < 3 {
			cm.leaderEpoch = -1
		}
		if v.Version == 1 && v.ExpireTimestamp > 0 {
			cm.expireTime = time.UnixMilli(v.ExpireTimestamp)
		}
		if r.txn {
			c.stageTxn(r.producerID, r.producerEpoch, k.Group, t, cm)
			return nil
		}
		g := c.groups[k.Group]
		if g == nil {
			g = c.newGroup(k.Group, kindClassic)
		}
		g.offsets[t] = cm
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.key); err != nil {
			return fmt.Errorf("%w: group key at %d: %v", ErrCorruptRecord, r.offset, err)
		}
		if r.tombstone {
			delete(c.groups, k.Group)
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(r.value); err != nil {
			return fmt.Errorf("%w: group value at %d: %v", ErrCorruptRecord, r.offset, err)
		}
		g := c.groups[k.Group]
		if g == nil {
			g = c.newGroup(k.Group, kindClassic)
		}
		c.restoreGroup(g, &v)
	case memberKeyVersion, groupEpochKeyVersion:
		return c.applyConsumerRecord(version, r)
	default:
		// Other Kafka record types (Kafka's own KIP-848 group records,
		// share groups): not written by weir; ignore.
	}
	return nil
}

// restoreGroup rebuilds a classic group from its last metadata record: a
// group with members comes back Stable with fresh session deadlines, so
// members that keep heartbeating never notice the restart.
func (c *Coordinator) restoreGroup(g *group, v *kmsg.GroupMetadataValue) {
	now := c.opts.Now()
	g.kind = kindClassic
	g.cg = nil
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	g.protocol, g.leader = "", ""
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	g.members = make(map[string]*member)
	g.instances = make(map[string]string)
	for _, vm := range v.Members {
		m := &member{
			id:               vm.MemberID,
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			protocolType:     v.ProtocolType,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			assignment:       vm.Assignment,
			synced:           true,
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		m.protocols = []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}}
		m.deadline = now.Add(m.sessionTimeout)
		if vm.InstanceID != nil && *vm.InstanceID != "" {
			m.instanceID = *vm.InstanceID
			g.instances[m.instanceID] = m.id
		}
		g.members[m.id] = m
	}
	g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	if len(g.members) > 0 && g.protocol != "" {
		g.state = stateStable
	} else {
		g.state = stateEmpty
		g.members = make(map[string]*member)
		g.leader, g.protocol = "", ""
	}
}

// replay reads the whole offsets log and rebuilds the groups. Records that
// cannot be decoded are logged and skipped; a corrupt batch ends the replay
// of that read (the log itself truncates torn tails on open).
func (c *Coordinator) replay() (int, error) {
	n := 0
	off := c.store.logStartOffset()
	for range 1 << 30 {
		hw := c.store.highWatermark()
		if off >= hw {
			break
		}
		data, release, err := c.store.read(off, 1<<20, hw)
		if err != nil {
			return n, err
		}
		next, derr := decodeBatches(data, func(r decodedRecord) {
			n++
			if err := c.applyRecord(r); err != nil {
				c.logger.Warn("skipping offsets record", "offset", r.offset, "err", err)
			}
		})
		release()
		if derr != nil {
			c.logger.Warn("offsets log: undecodable batch, replay stops here", "offset", off, "err", derr)
			break
		}
		if next <= off {
			break
		}
		off = next
	}
	// Restored groups have no pending rebalance; their members have fresh
	// deadlines. Drop groups that are only tombstoned shells.
	c.restoreConsumerGroups(c.opts.Now())
	for id, g := range c.groups {
		if g.removable() {
			delete(c.groups, id)
		}
	}
	return n, nil
}
