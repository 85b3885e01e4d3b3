package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceTimestampBounds: message.timestamp.before/after.max.ms are
// enforced with INVALID_TIMESTAMP (v8+: the record named in RecordErrors),
// nothing of the partition appended; the after-bound defaults to an hour;
// LogAppendTime topics are not checked (the broker stamps them).
func TestProduceTimestampBounds(t *testing.T) {
	now := testNow()
	b, _ := testBroker(t, func(c *Config) { c.Now = func() time.Time { return now } })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "def", 1)
	mustCreate(t, ctx, b, "day", 1, "message.timestamp.before.max.ms", "86400000", "message.timestamp.after.max.ms", "0")
	mustCreate(t, ctx, b, "lat", 1, "message.timestamp.type", "LogAppendTime", "message.timestamp.before.max.ms", "0", "message.timestamp.after.max.ms", "0")
	c := dialRaw(t, b)
	ms := now.UnixMilli()
	const y1970, y2100 = 0, 4_102_444_800_000
	hour := int64(time.Hour / time.Millisecond)
	cases := []struct {
		topic   string
		version int16
		ts0     int64
		values  []string
		want    int16
		index   int32 // of the offending record (v8+)
	}{
		{"def", 9, y1970, []string{"a"}, 0, 0},
		{"def", 9, ms + hour - 1, []string{"a", "b"}, 0, 0},
		{"def", 9, ms + hour - 1, []string{"a", "b", "c"}, kerr.InvalidTimestamp.Code, 2},
		{"def", 9, y2100, []string{"a"}, kerr.InvalidTimestamp.Code, 0},
		{"def", 7, y2100, []string{"a"}, kerr.InvalidTimestamp.Code, 0},
		{"day", 9, ms, []string{"a"}, 0, 0},
		{"day", 9, ms - 86400000, []string{"a"}, 0, 0},
		{"day", 9, y1970, []string{"a"}, kerr.InvalidTimestamp.Code, 0},
		{"day", 9, ms, []string{"a", "b"}, kerr.InvalidTimestamp.Code, 1},
		{"lat", 9, y1970, []string{"a"}, 0, 0},
		{"lat", 9, y2100, []string{"a"}, 0, 0},
	}
	stored := map[string]int64{}
	for i, tc := range cases {
		resp := c.roundTrip(produceReq(tc.version, -1, tc.topic, 0, makeBatch(tc.ts0, tc.values...)), int32(i)).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != tc.want {
			t.Errorf("case %d (%s, ts %d, %d records): error %d, want %d", i, tc.topic, tc.ts0, len(tc.values), p.ErrorCode, tc.want)
			continue
		}
		if tc.want == 0 {
			stored[tc.topic] += int64(len(tc.values))
			continue
		}
		if tc.version >= 8 {
			if len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != tc.index || p.ErrorMessage == nil ||
				!strings.Contains(*p.ErrorMessage, "out of range") {
				t.Errorf("case %d: record errors %+v, message %v; want record %d out of range", i, p.ErrorRecords, p.ErrorMessage, tc.index)
			}
		}
	}
	for _, name := range []string{"def", "day", "lat"} {
		tp, _ := b.topics.get(name)
		l, _ := tp.partition(0)
		if hw := l.HighWatermark(); hw != stored[name] {
			t.Errorf("%s: %d records stored, want %d (refused batches must append nothing)", name, hw, stored[name])
		}
	}
}

// TestProduceMinInsyncReplicas: min.insync.replicas above the replication
// factor (1) is accepted as a setting, as in Kafka, and makes acks=all
// produces fail with NOT_ENOUGH_REPLICAS without appending; acks=1 and 0
// still succeed; back at 1, acks=all works again.
func TestProduceMinInsyncReplicas(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "isr", 1, "min.insync.replicas", "2")
	c := dialRaw(t, b)
	ts := time.Now().UnixMilli()
	resp := c.roundTrip(produceReq(9, -1, "isr", 0, makeBatch(ts, "a")), 1).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.NotEnoughReplicas.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "min.isr requirement of 2") {
		t.Fatalf("acks=all: error %d (%v), want NOT_ENOUGH_REPLICAS", p.ErrorCode, p.ErrorMessage)
	}
	resp = c.roundTrip(produceReq(9, 1, "isr", 0, makeBatch(ts, "b")), 2).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("acks=1: error %d, base offset %d; want 0, 0 (nothing appended by the refused produce)", p.ErrorCode, p.BaseOffset)
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "isr"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "min.insync.replicas", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("1")
	res.Configs = append(res.Configs, cfg)
	alter.Resources = append(alter.Resources, res)
	if ar := c.roundTrip(alter, 3).(*kmsg.IncrementalAlterConfigsResponse); ar.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter: %d", ar.Resources[0].ErrorCode)
	}
	resp = c.roundTrip(produceReq(9, -1, "isr", 0, makeBatch(ts, "c")), 4).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("acks=all at min.insync.replicas=1: error %d, base offset %d", p.ErrorCode, p.BaseOffset)
	}
}

// TestDescribeConfigsMarksNotEnforced: with IncludeDocumentation, every
// topic config weir does not act on says so, and every one it enforces
// does not.
func TestDescribeConfigsMarksNotEnforced(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "d", 1)
	c := dialRaw(t, b)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	req.IncludeDocumentation = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "d"
	req.Resources = append(req.Resources, rr)
	resp := c.roundTrip(req, 1).(*kmsg.DescribeConfigsResponse)
	enforced := map[string]bool{
		"cleanup.policy": true, "retention.ms": true, "retention.bytes": true, "segment.bytes": true, "segment.ms": true,
		"max.message.bytes": true, "message.timestamp.type": true, "index.interval.bytes": true, "min.insync.replicas": true,
		"delete.retention.ms": true, "max.compaction.lag.ms": true, "min.compaction.lag.ms": true, "min.cleanable.dirty.ratio": true,
		"message.timestamp.before.max.ms": true, "message.timestamp.after.max.ms": true,
	}
	var notEnforcedSeen int
	for _, rc := range resp.Resources[0].Configs {
		if rc.Documentation == nil || *rc.Documentation == "" {
			t.Errorf("%s: no documentation", rc.Name)
			continue
		}
		marked := strings.HasPrefix(*rc.Documentation, "NOT ENFORCED by weir")
		if marked == enforced[rc.Name] {
			t.Errorf("%s: documentation %q; enforced by weir: %v", rc.Name, *rc.Documentation, enforced[rc.Name])
		}
		if marked {
			notEnforcedSeen++
		}
	}
	if notEnforcedSeen == 0 || len(resp.Resources[0].Configs) != len(topicConfigDefs) {
		t.Fatalf("%d configs, %d marked not enforced", len(resp.Resources[0].Configs), notEnforcedSeen)
	}
}
