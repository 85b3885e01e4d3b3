package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v0-4
//
// Behavior:
// * Every partition has had one leader epoch, 0. Asking for epoch 0 (or
//   any lower epoch) answers epoch 0 ending at the high watermark, so a
//   consumer validating its position after a restart truncates to what is
//   durable. A requested epoch above 0 answers -1/-1 (UNDEFINED).
// * CurrentLeaderEpoch (v2+) is checked as Kafka does (leader_epoch.go):
//   -1 and 0 pass, an older epoch is FENCED_LEADER_EPOCH, a newer one
//   UNKNOWN_LEADER_EPOCH (both with -1/-1).
// * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (checked before
//   the epoch).
//
// Version notes:
// * v1: LeaderEpoch in the response
// * v2: CurrentLeaderEpoch
// * v3: ReplicaID
// * v4: flexible

func init() {
	regAPI(api{key: kmsg.OffsetForLeaderEpoch, min: 0, max: 4, handle: handleOffsetForLeaderEpoch})
}

func handleOffsetForLeaderEpoch(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t, topicOK := b.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			var l interface{ HighWatermark() int64 }
			if topicOK {
				if pl, ok := t.partition(rp.Partition); ok {
					l = pl
				}
			}
			switch {
			case l == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case req.Version >= 2 && currentLeaderEpochError(rp.CurrentLeaderEpoch) != 0:
				sp.ErrorCode = currentLeaderEpochError(rp.CurrentLeaderEpoch)
			case rp.LeaderEpoch <= leaderEpoch:
				sp.LeaderEpoch, sp.EndOffset = leaderEpoch, l.HighWatermark()
			}
			b.metrics.partitionError("OffsetForLeaderEpoch", sp.ErrorCode)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
