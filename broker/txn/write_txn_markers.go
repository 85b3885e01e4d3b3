package txn

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteTxnMarkers: v0-2
//
// Behavior: Kafka's coordinator-to-leader marker API, which KIP-664's
// admin "abort transaction" also uses to end a hanging transaction in a
// partition. Each requested marker is written through Partitions (or
// Offsets for __consumer_offsets) with the given producer id, epoch,
// outcome and coordinator epoch; the coordinator's own state is not
// touched.
//   - A partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION.
//   - A write error carrying a Kafka code (e.g. the log rejecting a stale
//     epoch) is answered with it; any other failure is
//     KAFKA_STORAGE_ERROR.

func init() {
	regAPI(kmsg.WriteTxnMarkers, 0, 2, func(c *Coordinator, ctx context.Context, req *kmsg.WriteTxnMarkersRequest) (kmsg.Response, error) {
		return c.writeTxnMarkers(ctx, req), nil
	})
}

func (c *Coordinator) writeTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, mk := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = mk.ProducerID
		for _, t := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				rp.ErrorCode = c.writeOneMarker(ctx, t.Topic, p, mk)
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

func (c *Coordinator) writeOneMarker(ctx context.Context, topic string, partition int32, mk kmsg.WriteTxnMarkersRequestMarker) int16 {
	var err error
	switch {
	case topic == OffsetsTopic && partition == 0 && c.opts.Offsets != nil:
		err = c.opts.Offsets.WriteMarker(ctx, mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch)
	case !c.opts.Partitions.Exists(topic, partition):
		return kerr.UnknownTopicOrPartition.Code
	default:
		err = c.opts.Partitions.WriteMarker(ctx, topic, partition, mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch)
	}
	if err == nil {
		c.logger.Info("marker written by request", "topic", topic, "partition", partition,
			"producer_id", mk.ProducerID, "epoch", mk.ProducerEpoch, "commit", mk.Committed)
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	c.logger.Warn("marker write by request failed", "topic", topic, "partition", partition, "err", err)
	return kerr.KafkaStorageError.Code
}
