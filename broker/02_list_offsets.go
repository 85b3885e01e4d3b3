package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-10
//
// Behavior:
// * Timestamp -2 (earliest): the log start offset; -1 (latest): the high
//   watermark, or for read_committed (v2+) the last stable offset; -3 (max timestamp, v7+): the
//   offset and timestamp of the record with the largest timestamp;
//   -4 (earliest local, v8+): the log start offset (no tiered storage);
//   -5 (latest tiered, v9+): -1 (nothing is tiered).
// * Any other timestamp T >= 0: the earliest offset whose record timestamp
//   is >= T, with that timestamp; -1/-1 if none (as Kafka).
// * Answered timestamps are -1 except for the timestamp lookups.
// * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; a log I/O error:
//   KAFKA_STORAGE_ERROR.
// * CurrentLeaderEpoch (v4+) is checked after the partition lookup
//   (leader_epoch.go): -1 passes, older is FENCED_LEADER_EPOCH, newer
//   UNKNOWN_LEADER_EPOCH. Answers carry the leader epoch (0).
// * A partition named twice in one request is INVALID_REQUEST for both.
//
// Version notes:
// * v1: a single offset per partition (v0, with MaxNumOffsets, is not served)
// * v2: IsolationLevel
// * v4: CurrentLeaderEpoch, LeaderEpoch in the response
// * v6: flexible
// * v7: -3 max timestamp
// * v10: TimeoutMillis (remote storage; ignored)

func init() { regAPI(api{key: kmsg.ListOffsets, min: 1, max: 10, handle: handleListOffsets}) }

func handleListOffsets(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)

	type tp struct {
		t string
		p int32
	}
	seen := map[tp]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[tp{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t, topicOK := b.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset, sp.Timestamp = -1, -1
			sp.LeaderEpoch = leaderEpoch
			if seen[tp{rt.Topic, rp.Partition}] > 1 {
				sp.ErrorCode = kerr.InvalidRequest.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			var l interface {
				LogStartOffset() int64
				HighWatermark() int64
				LastStableOffset() int64
				MaxTimestamp() (int64, int64)
				OffsetForTimestamp(int64) (int64, int64, error)
			}
			if topicOK {
				if pl, ok := t.partition(rp.Partition); ok {
					l = pl
				}
			}
			if l == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				b.metrics.partitionError("ListOffsets", sp.ErrorCode)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if req.Version >= 4 {
				if ec := currentLeaderEpochError(rp.CurrentLeaderEpoch); ec != 0 {
					sp.ErrorCode = ec
					b.metrics.partitionError("ListOffsets", sp.ErrorCode)
					st.Partitions = append(st.Partitions, sp)
					continue
				}
			}
			switch ts := rp.Timestamp; {
			case ts == -2 || ts == -4:
				sp.Offset = l.LogStartOffset()
			case ts == -1 && req.IsolationLevel == 1:
				sp.Offset = l.LastStableOffset()
			case ts == -1:
				sp.Offset = l.HighWatermark()
			case ts == -3:
				sp.Offset, sp.Timestamp = l.MaxTimestamp()
			case ts == -5:
				sp.Offset = -1
			case ts >= 0:
				off, mts, err := l.OffsetForTimestamp(ts)
				if err != nil {
					sp.ErrorCode = logErrorCode(err, false)
				} else {
					sp.Offset, sp.Timestamp = off, mts
				}
			default:
				sp.ErrorCode = kerr.InvalidRequest.Code
			}
			b.metrics.partitionError("ListOffsets", sp.ErrorCode)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
