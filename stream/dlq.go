package stream

import (
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter headers. A record that cannot be processed is written to
// "<input topic>.dlq" with its original key, value, timestamp and headers,
// plus these headers. Header names are part of the public contract.
const (
	HeaderDLQReason       = "weir.dlq.reason"        // the error text
	HeaderDLQKind         = "weir.dlq.kind"          // "decode", "panic" or "error"
	HeaderDLQAttempts     = "weir.dlq.attempts"      // decimal count of processing attempts
	HeaderDLQFirstFailure = "weir.dlq.first-failure" // RFC 3339 (nanoseconds), processing clock
	HeaderDLQLastFailure  = "weir.dlq.last-failure"  // RFC 3339 (nanoseconds), processing clock
	HeaderDLQApp          = "weir.dlq.app"           // application id
	HeaderDLQTopic        = "weir.dlq.topic"         // original topic
	HeaderDLQPartition    = "weir.dlq.partition"     // original partition, decimal
	HeaderDLQOffset       = "weir.dlq.offset"        // original offset, decimal
)

// DLQTopic is the dead-letter topic of an input topic.
func DLQTopic(input string) string { return input + ".dlq" }

// deadLetter writes kr to its topic's DLQ. It goes through the same producer
// as every output, so the input offset is committed only once the DLQ record
// is acknowledged: nothing is lost.
func (t *task) deadLetter(kr *kgo.Record, cause error, attempts int, first, last time.Time) {
	kind := "error"
	var de *DecodeError
	var pe *PanicError
	switch {
	case errors.As(cause, &de):
		kind = "decode"
	case errors.As(cause, &pe):
		kind = "panic"
	default:
		pe = nil
	}
	hs := make([]kgo.RecordHeader, 0, len(kr.Headers)+9)
	hs = append(hs, kr.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(cause.Error())},
		kgo.RecordHeader{Key: HeaderDLQKind, Value: []byte(kind)},
		kgo.RecordHeader{Key: HeaderDLQAttempts, Value: []byte(strconv.Itoa(attempts))},
		kgo.RecordHeader{Key: HeaderDLQFirstFailure, Value: []byte(first.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: HeaderDLQLastFailure, Value: []byte(last.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: HeaderDLQApp, Value: []byte(t.app.id)},
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(kr.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(int(kr.Partition)))},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(kr.Offset, 10))},
	)
	if pe != nil {
		t.app.cfg.logger.Warn("record sent to dead-letter topic", "task", t.id.String(), "offset", kr.Offset,
			"kind", kind, "attempts", attempts, "err", cause, "stack", string(pe.Stack))
	} else {
		t.app.cfg.logger.Warn("record sent to dead-letter topic", "task", t.id.String(), "offset", kr.Offset,
			"kind", kind, "attempts", attempts, "err", cause)
	}
	t.app.metrics.dlq.Inc()
	t.m.dlq.Inc()
	t.produce(&kgo.Record{Topic: DLQTopic(kr.Topic), Partition: -1, Key: kr.Key, Value: kr.Value,
		Timestamp: kr.Timestamp, Headers: hs})
}
