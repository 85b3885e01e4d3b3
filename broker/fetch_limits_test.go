package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// limitsFixture: topic "lim" with 3 partitions, each holding 3 batches of
// one ~1 KB record; size is the size of one batch.
func limitsFixture(t *testing.T) (b *Broker, c *rawConn, id [16]byte, size int32) {
	t.Helper()
	b, _ = testBroker(t)
	mustCreate(t, testCtx(t), b, "lim", 3)
	tp, _ := b.topics.get("lim")
	c = dialRaw(t, b)
	corr := int32(1)
	for p := range int32(3) {
		for i := range 3 {
			batch := makeBatch(1, fmt.Sprintf("p%d-%d-%s", p, i, strings.Repeat("x", 1000)))
			size = int32(len(batch))
			c.roundTrip(produceReq(9, -1, "lim", p, batch), corr)
			corr++
		}
	}
	return b, c, tp.id, size
}

// limitsFetch fetches partitions 0..2 of "lim" (v13) at offsets, each with
// PartitionMaxBytes partMax, response MaxBytes max; it returns the record
// values per partition and the record bytes in all.
func limitsFetch(t *testing.T, c *rawConn, id [16]byte, corr int32, offsets [3]int64, partMax, max int32) (map[int32][]string, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 13
	req.MaxBytes = max
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	for p, off := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = int32(p), off, partMax, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req, corr).(*kmsg.FetchResponse)
	out := map[int32][]string{}
	total := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			total += len(p.RecordBatches)
			for _, v := range batchValues(p.RecordBatches, 0) {
				out[p.Partition] = append(out[p.Partition], v[:4])
			}
		}
	}
	return out, total
}

func TestFetchByteLimits(t *testing.T) {
	_, c, id, size := limitsFixture(t)
	corr := int32(100)
	type tc struct {
		name          string
		offsets       [3]int64
		partMax, max  int32
		want          map[int32]int // batches per partition
		maxTotalBytes int           // 0: must be <= max
	}
	cases := []tc{
		{"both limits below one batch: one batch of the first (KIP-74)", [3]int64{0, 0, 0}, 100, 100,
			map[int32]int{0: 1}, int(size)},
		{"response limit stops later partitions", [3]int64{0, 0, 0}, 1 << 20, size*2 + size/2,
			map[int32]int{0: 2}, 0},
		{"partition limit per partition", [3]int64{0, 0, 0}, size + size/2, 1 << 20,
			map[int32]int{0: 1, 1: 1, 2: 1}, 0},
		{"partition limit above the response limit: the response limit holds", [3]int64{0, 0, 0}, 1 << 20, size + size/2,
			map[int32]int{0: 1}, 0},
		{"first partition empty: the next one is first with data", [3]int64{3, 0, 0}, 100, 100,
			map[int32]int{1: 1}, int(size)},
		{"later partition gets what remains, whole batches", [3]int64{2, 0, 0}, 1 << 20, size*3 + size/2,
			map[int32]int{0: 1, 1: 2}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, total := limitsFetch(t, c, id, corr, tc.offsets, tc.partMax, tc.max)
			corr++
			for p := range int32(3) {
				if len(got[p]) != tc.want[p] {
					t.Errorf("partition %d: %d batches %v, want %d", p, len(got[p]), got[p], tc.want[p])
				}
			}
			limit := tc.maxTotalBytes
			if limit == 0 {
				limit = int(tc.max)
			}
			if total > limit {
				t.Errorf("%d record bytes, limit %d", total, limit)
			}
		})
	}
}

// Within a fetch session, a partition that returned records moves to the
// end of the order: with room for one batch per response, two partitions
// with data take turns instead of the first one starving the second.
func TestFetchSessionRotatesPartitions(t *testing.T) {
	_, c, id, size := limitsFixture(t)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 13
	req.MaxBytes = size
	req.SessionEpoch = 0
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	for p := range int32(2) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.LogStartOffset = p, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req, 100).(*kmsg.FetchResponse)
	sid := resp.SessionID
	offsets := map[int32]int64{}
	var served []int32
	for epoch := int32(1); ; epoch++ {
		var withData []int32
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if len(p.RecordBatches) > 0 {
					withData = append(withData, p.Partition)
					offsets[p.Partition]++
				}
			}
		}
		if len(withData) != 1 {
			t.Fatalf("fetch %d: partitions with records %v, want exactly one (room for one batch)", epoch, withData)
		}
		served = append(served, withData[0])
		if len(served) == 4 {
			break
		}
		// The client moves the partition it read.
		next := kmsg.NewPtrFetchRequest()
		next.Version = 13
		next.MaxBytes = size
		next.SessionID, next.SessionEpoch = sid, epoch
		mt := kmsg.NewFetchRequestTopic()
		mt.TopicID = id
		mp := kmsg.NewFetchRequestTopicPartition()
		mp.Partition, mp.FetchOffset, mp.PartitionMaxBytes, mp.LogStartOffset = withData[0], offsets[withData[0]], 1<<20, -1
		mt.Partitions = append(mt.Partitions, mp)
		next.Topics = append(next.Topics, mt)
		resp = c.roundTrip(next, 100+epoch).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch %d: error %d", epoch, resp.ErrorCode)
		}
	}
	if want := []int32{0, 1, 0, 1}; fmt.Sprint(served) != fmt.Sprint(want) {
		t.Fatalf("partitions served in turn %v, want %v", served, want)
	}
}

// franz-go with a response limit of about one batch still reads every
// record of every partition.
func TestFetchSmallLimitsNoStarvationFranz(t *testing.T) {
	b, _, _, size := limitsFixture(t)
	cl := newClient(t, b, kgo.ConsumeTopics("lim"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(size), kgo.FetchMaxPartitionBytes(size), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(testCtx(t), 15*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < 9 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 9 records: %v", len(seen), seen)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value[:4])] = true })
	}
}
