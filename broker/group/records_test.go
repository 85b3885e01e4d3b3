package group

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/recbatch"
	wlog "github.com/weirhq/weir/broker/log"
)

func seedBatches() [][]byte {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := &group{id: "g", protocolType: "consumer", protocol: "range", generation: 3, leader: "m1", stateSince: now,
		members: map[string]*member{"m1": {id: "m1", instanceID: "i1", clientID: "c", clientHost: "h",
			sessionTimeout: 10 * time.Second, rebalanceTimeout: 20 * time.Second,
			protocols:  []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}},
			assignment: []byte{9}}}}
	return [][]byte{
		encodeBatch([]rec{{Key: offsetKey("g", "t", 0), Value: offsetValue(committed{offset: 5, leaderEpoch: -1, metadata: "m", commitTime: now})}}, now),
		encodeBatch([]rec{{Key: groupKey("g"), Value: groupValue(g)}, {Key: offsetKey("g", "t", 0)}}, now),
		encodeBatch([]rec{{Key: offsetKey("s", "u", 1), Value: offsetValue(committed{offset: 1, expireTime: now.Add(time.Hour), commitTime: now})}, {Key: groupKey("s")}}, now),
		recbatch.Encode([]rec{{Key: offsetKey("x", "t", 2), Value: offsetValue(committed{offset: 9, leaderEpoch: -1, commitTime: now})}}, now.UnixMilli(), 7, 1, wlog.AttrTransactional),
		recbatch.Marker(7, 1, true, 0, now.UnixMilli()),
	}
}

func fuzzCoordinator() *Coordinator {
	c := &Coordinator{groups: map[string]*group{}, txns: map[int64]*txnOffsets{}}
	c.opts.Now = func() time.Time { return time.Unix(0, 0) }
	c.opts.Topics = newFakeTopics(map[string]int32{"t": 3})
	c.opts.ensureDefaults()
	c.logger = c.opts.Logger
	return c
}

func TestRecordsRoundTrip(t *testing.T) {
	c := fuzzCoordinator()
	var all []byte
	for _, b := range seedBatches() {
		all = append(all, b...)
	}
	var n int
	if _, err := decodeBatches(all, func(r decodedRecord) {
		n++
		if err := c.applyRecord(r); err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if n != 7 {
		t.Fatalf("%d records", n)
	}
	if x := c.groups["x"]; x == nil || x.offsets[tp{"t", 2}].offset != 9 || len(c.txns) != 0 {
		t.Fatalf("transactional offset not committed by its marker: %+v", x)
	}
	g := c.groups["g"]
	if g == nil || g.state != stateStable || g.generation != 3 || g.members["m1"].instanceID != "i1" || len(g.offsets) != 0 {
		t.Fatalf("group g after replay: %+v", g)
	}
	if _, ok := c.groups["s"]; ok {
		t.Fatal("group s was tombstoned")
	}
	// A flipped bit is caught by the CRC.
	bad := append([]byte(nil), seedBatches()[0]...)
	bad[len(bad)-3] ^= 0x40
	if _, err := decodeBatches(bad, func(decodedRecord) {}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("corrupt batch: %v", err)
	}
}

// FuzzDecodeRecords feeds arbitrary bytes to the offsets-log decoder and
// the record applier: errors are fine, panics are not.
func FuzzDecodeRecords(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	now := time.Unix(0, 0)
	f.Add(encodeBatch([]rec{
		{Key: memberKey("cg", "m1"), Value: []byte(`{"epoch":3,"prev_epoch":2,"state":1,"subscribed":["t"],"regex":"^t","assigned":{"t":[0,1]},"revoking":{"t":[2]}}`)},
		{Key: groupEpochKey("cg"), Value: []byte(`{"epoch":4}`)},
		{Key: memberKey("cg", "m0")},
	}, now))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := fuzzCoordinator()
		_, _ = decodeBatches(data, func(r decodedRecord) { _ = c.applyRecord(r) })
		c.met, _ = newMetrics(c, nil)
		c.restoreConsumerGroups(time.Unix(0, 0))
		// Also as a bare record key/value.
		_ = c.applyRecord(decodedRecord{key: data, value: data})
		if len(data) > 2 {
			_ = c.applyRecord(decodedRecord{key: data[:len(data)/2], value: data[len(data)/2:]})
		}
	})
}
