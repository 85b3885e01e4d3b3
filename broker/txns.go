package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/broker/txn"
)

// Transaction coordinator wiring. The coordinator (broker/txn) keeps the
// transactional-id state machine in the single partition of the compacted
// internal topic "__transaction_state", created on first start; per
// partition producer state (sequences, ongoing transactions, LSO, aborted
// index) lives in the logs, atomic with appends. The broker
//
//   - routes InitProducerId (all producers: ids never repeat),
//     AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
//     DescribeTransactions, ListTransactions and WriteTxnMarkers to it
//     (FindCoordinator stays with the group coordinator, which answers
//     key type 1 with this broker too);
//   - writes the markers it asks for (brokerPartitions.WriteMarker);
//   - has Produce verify transactional batches with it (KIP-890) before
//     appending them (see 00_produce.go).

// txnHandler is the part of *txn.Coordinator the broker uses.
type txnHandler interface {
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Verify(ctx context.Context, txnID string, pid int64, epoch int16, parts []txn.TopicPartition, implicitAdd bool) ([]int16, func(), error)
	Close() error
}

// The transaction coordinator's APIs, at the versions broker/txn registers
// next to their handlers, except FindCoordinator, which the group
// coordinator's registration serves for both key types (groups.go).
func init() {
	for _, v := range txn.APIVersions() {
		if kmsg.Key(v.ApiKey) == kmsg.FindCoordinator {
			continue
		}
		regAPI(api{key: kmsg.Key(v.ApiKey), min: v.MinVersion, max: v.MaxVersion, handle: handleTxn})
	}
}

// startTxns opens (creating on first start) __transaction_state and builds
// the coordinator. The group coordinator must be up (it commits offsets of
// transactions).
func (b *Broker) startTxns() error {
	t, ok := b.topics.get(txn.StateTopic)
	if !ok {
		var err error
		t, err = b.topics.create(txn.StateTopic, 1, map[string]string{
			"cleanup.policy":  "compact",
			"segment.bytes":   "104857600",
			"retention.ms":    "-1",
			"retention.bytes": "-1",
		}, false)
		if err != nil {
			return fmt.Errorf("create %s: %w", txn.StateTopic, err)
		}
	}
	opts := txn.Options{
		NodeID:     b.cfg.NodeID,
		Host:       b.host,
		Port:       b.port,
		State:      txn.WrapLog(t.parts[0]),
		Partitions: brokerPartitions{b},
		Now:        b.cfg.Now,
		Logger:     b.cfg.Logger.With("component", "txn"),
		Registerer: b.cfg.Registerer,
	}
	if oc, ok := b.groups.(txn.OffsetCommitter); ok {
		opts.Offsets = oc
	}
	coord, err := txn.NewCoordinator(opts)
	if err != nil {
		return fmt.Errorf("start transaction coordinator: %w", err)
	}
	b.txns = coord
	return nil
}

// handleTxn routes a transaction API request to the coordinator.
func handleTxn(b *Broker, ctx context.Context, _ *slot, req kmsg.Request) (kmsg.Response, error) {
	return b.txns.Handle(ctx, req)
}

// brokerPartitions implements txn.Partitions over the registry.
type brokerPartitions struct{ b *Broker }

var _ txn.Partitions = brokerPartitions{}

func (bp brokerPartitions) Exists(topic string, partition int32) bool {
	t, ok := bp.b.topics.get(topic)
	if !ok {
		return false
	}
	_, ok = t.partition(partition)
	return ok
}

// WriteMarker appends a COMMIT or ABORT control batch durably. A marker
// whose producer epoch the partition has already seen superseded
// (INVALID_PRODUCER_EPOCH) is obsolete: the newer epoch ended that
// transaction already, so it succeeds without writing (idempotence across
// coordinator restarts).
func (bp brokerPartitions) WriteMarker(_ context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	t, ok := bp.b.topics.get(topic)
	if !ok {
		return fmt.Errorf("write marker to %s-%d: %w", topic, partition, kerr.UnknownTopicOrPartition)
	}
	l, ok := t.partition(partition)
	if !ok {
		return fmt.Errorf("write marker to %s-%d: %w", topic, partition, kerr.UnknownTopicOrPartition)
	}
	_, err := l.Append(txn.MarkerBatch(pid, epoch, commit, coordinatorEpoch, bp.b.cfg.Now().UnixMilli()), true)
	switch {
	case err == nil, errors.Is(err, wlog.ErrInvalidProducerEpoch):
		return nil
	case errors.Is(err, wlog.ErrClosed):
		if _, still := bp.b.topics.get(topic); !still {
			return fmt.Errorf("write marker to %s-%d: %w", topic, partition, kerr.UnknownTopicOrPartition)
		}
	}
	return fmt.Errorf("write marker to %s-%d: %w", topic, partition, err)
}

// txnBatch reports the producer of the first batch of records if it is
// transactional. Framing errors are left to the log.
func txnBatch(records []byte) (pid int64, epoch int16, ok bool) {
	h, ok := wlog.ReadBatchHeader(records)
	if !ok || !h.Transactional() {
		return 0, 0, false
	}
	return h.ProducerID, h.ProducerEpoch, true
}
