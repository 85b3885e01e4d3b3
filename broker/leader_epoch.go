package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leader epochs (KIP-101, KIP-320).
//
// A partition's leader epoch counts its leadership changes. This broker is
// the only replica of every partition and has led each one since it was
// created, so every partition is in epoch leaderEpoch (0, Kafka's first
// epoch) for its whole life, across restarts: a restart is not a change of
// leader here (no other replica could have taken over and appended). The
// log stamps the same epoch into every stored batch (PartitionLeaderEpoch
// 0), Metadata answers it, and OffsetForLeaderEpoch answers the end of
// epoch 0 as the high watermark, so a client's view of epochs is
// consistent whichever of those it looks at. A deleted and re-created
// topic starts again at epoch 0 under a new topic ID, as in Kafka.
const leaderEpoch int32 = 0

// currentLeaderEpochError checks a request's CurrentLeaderEpoch against
// the partition's leader epoch as Kafka's Partition.checkCurrentLeaderEpoch
// does: -1 (the client does not know or does not care) passes; an older
// epoch is FENCED_LEADER_EPOCH (the client's metadata is stale: it
// refreshes it); a newer one is UNKNOWN_LEADER_EPOCH (this broker is
// behind the client's metadata: the client retries). It returns 0 if the
// check passes.
func currentLeaderEpochError(current int32) int16 {
	switch {
	case current == -1:
		return 0
	case current < leaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case current > leaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// setFetchEpochErrors gives each partition the request names (v9+, where
// Fetch carries CurrentLeaderEpoch) the result of its epoch check. A
// partition of a fetch session that this request does not name keeps no
// error: its epoch was checked when the client last named it, and a
// partition's epoch never changes.
//
// Fetch reads every negative CurrentLeaderEpoch as "no epoch" (Kafka's
// FetchRequest.optionalEpoch), unlike ListOffsets and OffsetForLeaderEpoch,
// where only -1 is: a Fetch can therefore never be answered
// FENCED_LEADER_EPOCH while every partition is in epoch 0.
func setFetchEpochErrors(req *kmsg.FetchRequest, parts []*fetchPart, keyOf func(string, [16]byte, int32) sessionKey) {
	if req.Version < 9 {
		return
	}
	var failed map[sessionKey]int16
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if ec := currentLeaderEpochError(max(rp.CurrentLeaderEpoch, -1)); ec != 0 {
				if failed == nil {
					failed = map[sessionKey]int16{}
				}
				failed[keyOf(rt.Topic, rt.TopicID, rp.Partition)] = ec
			}
		}
	}
	for _, fp := range parts {
		fp.epochErr = failed[fp.key]
	}
}

// Leader discovery (KIP-951). A Fetch (v16+) partition answered
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, and a Produce (v10+)
// partition answered NOT_LEADER_OR_FOLLOWER, carries the partition's
// current leader and epoch, and the response lists that leader's endpoint,
// so the client can move the partition without a Metadata round trip.
// Every other partition keeps CurrentLeader at its default (-1, -1) and a
// response without such a partition lists no endpoint, as in Kafka
// (KafkaApis.handleFetchRequest / handleProduceRequest). Produce carries no
// leader epoch, so Kafka names the leader there for NOT_LEADER_OR_FOLLOWER
// only.
//
// On this broker the leader of every partition is this node, in epoch
// leaderEpoch, and its endpoint is the one Metadata answers (node ID,
// advertised host and port, no rack). NOT_LEADER_OR_FOLLOWER is answered
// only when a partition's log is closed under a topic that still exists
// (logErrorCode): a request racing the topic's deletion and re-creation
// under the same name. The hint then names this node again, at the epoch
// the client already knows: clients (franz-go, the Java client) move a
// partition only for a newer epoch, so they retry here or refresh Metadata.

// fetchNamesLeader reports whether a Fetch partition error carries
// CurrentLeader (v16+).
func fetchNamesLeader(ec int16) bool {
	return ec == kerr.NotLeaderForPartition.Code || ec == kerr.FencedLeaderEpoch.Code
}

// produceNamesLeader reports whether a Produce partition error carries
// CurrentLeader (v10+).
func produceNamesLeader(ec int16) bool {
	return ec == kerr.NotLeaderForPartition.Code
}

// fetchLeaderEndpoint is this broker as a Fetch response's NodeEndpoints
// entry: the broker Metadata lists.
func (b *Broker) fetchLeaderEndpoint() kmsg.FetchResponseBroker {
	e := kmsg.NewFetchResponseBroker()
	e.NodeID, e.Host, e.Port = b.cfg.NodeID, b.host, b.port
	return e
}

// produceLeaderEndpoint is this broker as a Produce response's
// NodeEndpoints entry: the broker Metadata lists.
func (b *Broker) produceLeaderEndpoint() kmsg.ProduceResponseBroker {
	e := kmsg.NewProduceResponseBroker()
	e.NodeID, e.Host, e.Port = b.cfg.NodeID, b.host, b.port
	return e
}
