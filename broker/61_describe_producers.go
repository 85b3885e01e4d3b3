package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers: v0
//
// Behavior:
// * Lists the producers each partition's log remembers (idempotence and
//   transaction state, kept atomically with the appends): producer ID and
//   epoch, last sequence, last timestamp, coordinator epoch of its last
//   marker, and the first offset of its ongoing transaction (-1 if none).
// * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes:
// * v0: flexible

func init() {
	regAPI(api{key: kmsg.DescribeProducers, min: 0, max: 0, handle: handleDescribeProducers})
}

func handleDescribeProducers(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t, topicOK := b.topics.get(rt.Topic)
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			var ok bool
			if topicOK {
				if pl, found := t.partition(p); found {
					ok = true
					for _, pi := range pl.Producers() {
						ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
						ap.ProducerID = pi.ProducerID
						ap.ProducerEpoch = int32(pi.ProducerEpoch)
						ap.LastSequence = pi.LastSequence
						ap.LastTimestamp = pi.LastTimestamp
						ap.CoordinatorEpoch = pi.CoordinatorEpoch
						ap.CurrentTxnStartOffset = pi.TxnStartOffset
						sp.ActiveProducers = append(sp.ActiveProducers, ap)
					}
				}
			}
			if !ok {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			b.metrics.partitionError("DescribeProducers", sp.ErrorCode)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
