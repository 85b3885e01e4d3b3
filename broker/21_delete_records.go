package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords: v0-2
//
// Behavior:
// * Advances a partition's log start offset to Offset (-1: the high
//   watermark); records below it are no longer served (the log removes
//   whole segments below it). The new log start offset is persisted by the
//   log before the response and returned as LowWatermark.
// * Offset above the high watermark or below -1: OFFSET_OUT_OF_RANGE; an
//   offset at or below the current log start offset changes nothing.
// * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes:
// * v1: ThrottleMillis semantics
// * v2: flexible

func init() { regAPI(api{key: kmsg.DeleteRecords, min: 0, max: 2, handle: handleDeleteRecords}) }

func handleDeleteRecords(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t, topicOK := b.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			switch {
			case !topicOK:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				l, ok := t.partition(rp.Partition)
				if !ok {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					break
				}
				off := rp.Offset
				hw := l.HighWatermark()
				if off == -1 {
					off = hw
				}
				if off < 0 || off > hw {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
					break
				}
				start, err := l.DeleteRecords(off)
				if err != nil {
					sp.ErrorCode = logErrorCode(err, false)
					break
				}
				sp.LowWatermark = start
			}
			b.metrics.partitionError("DeleteRecords", sp.ErrorCode)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
