package stream

import (
	"encoding/binary"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter headers. A record that cannot be processed is written to the
// App's dead-letter topic (DLQTopic; "<input topic>.dlq" with DLQPerTopic)
// with its key, value, timestamp and headers, plus these headers. Header
// names are part of the public contract.
//
// The topic, partition and offset are those of the original input record,
// also when the record failed after a repartition (the repartition topic's
// record carries its origin, see Record.Origin); the key and value are those
// of the record that failed (after a KeyBy, the new key).
const (
	HeaderDLQReason       = "weir.dlq.reason"        // the error text
	HeaderDLQKind         = "weir.dlq.kind"          // "decode", "panic" or "error"
	HeaderDLQOperator     = "weir.dlq.operator"      // the operator that failed (see Named); "source" for a decode error
	HeaderDLQAttempts     = "weir.dlq.attempts"      // decimal count of processing attempts
	HeaderDLQFirstFailure = "weir.dlq.first-failure" // RFC 3339 (nanoseconds), processing clock
	HeaderDLQLastFailure  = "weir.dlq.last-failure"  // RFC 3339 (nanoseconds), processing clock
	HeaderDLQApp          = "weir.dlq.app"           // application id
	HeaderDLQTopic        = "weir.dlq.topic"         // original topic
	HeaderDLQPartition    = "weir.dlq.partition"     // original partition, decimal
	HeaderDLQOffset       = "weir.dlq.offset"        // original offset, decimal
)

// DLQTopic is the dead-letter topic of an App: "<app id>.dlq". With
// DLQPerTopic, each input topic has its own (see InputDLQTopic).
func DLQTopic(appID string) string { return appID + ".dlq" }

// InputDLQTopic is the dead-letter topic of an input topic under
// DLQPerTopic: "<input>.dlq".
func InputDLQTopic(input string) string { return input + ".dlq" }

// dlqTopic is where a failed record of input goes.
func (a *App) dlqTopic(input string) string {
	if a.cfg.errors.perTopicDLQ {
		return InputDLQTopic(input)
	}
	return DLQTopic(a.id)
}

// deadLetter writes kr to the dead-letter topic. It goes through the same
// producer as every output, so the input offset is committed only once the
// DLQ record is acknowledged: nothing is lost.
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
	op := operatorOf(cause)
	if op == "" && de != nil {
		op = "source"
	}
	o := Origin{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset}
	hs := make([]kgo.RecordHeader, 0, len(kr.Headers)+10)
	for _, h := range kr.Headers {
		if h.Key == headerOrigin {
			if orig, ok := decodeOrigin(h.Value); ok {
				o = orig
			}
			continue
		}
		hs = append(hs, h)
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(cause.Error())},
		kgo.RecordHeader{Key: HeaderDLQKind, Value: []byte(kind)},
		kgo.RecordHeader{Key: HeaderDLQOperator, Value: []byte(op)},
		kgo.RecordHeader{Key: HeaderDLQAttempts, Value: []byte(strconv.Itoa(attempts))},
		kgo.RecordHeader{Key: HeaderDLQFirstFailure, Value: []byte(first.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: HeaderDLQLastFailure, Value: []byte(last.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: HeaderDLQApp, Value: []byte(t.app.id)},
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(o.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(int(o.Partition)))},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(o.Offset, 10))},
	)
	if pe != nil {
		t.app.cfg.logger.Warn("record sent to dead-letter topic", "task", t.id.String(), "topic", o.Topic,
			"partition", o.Partition, "offset", o.Offset, "operator", op, "kind", kind, "attempts", attempts,
			"err", cause, "stack", string(pe.Stack))
	} else {
		t.app.cfg.logger.Warn("record sent to dead-letter topic", "task", t.id.String(), "topic", o.Topic,
			"partition", o.Partition, "offset", o.Offset, "operator", op, "kind", kind, "attempts", attempts,
			"err", cause)
	}
	t.app.metrics.dlq.Inc()
	t.m.dlq.Inc()
	t.produce(&kgo.Record{Topic: t.app.dlqTopic(kr.Topic), Partition: -1, Key: kr.Key, Value: kr.Value,
		Timestamp: kr.Timestamp, Headers: hs})
}

// headerOrigin is the header a repartition record carries its Origin in:
// partition (4 bytes, big-endian), offset (8 bytes), topic. Internal to the
// App's topics: the source reading a repartition topic strips it.
const headerOrigin = "weir.origin"

// markOrigin adds o, encoded, to the record just emitted (a repartition
// record).
func (t *task) markOrigin(o Origin) {
	r := t.pending[len(t.pending)-1]
	v := make([]byte, 12, 12+len(o.Topic))
	binary.BigEndian.PutUint32(v, uint32(o.Partition))
	binary.BigEndian.PutUint64(v[4:], uint64(o.Offset))
	v = append(v, o.Topic...)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: headerOrigin, Value: v})
}

func decodeOrigin(v []byte) (Origin, bool) {
	if len(v) < 13 {
		return Origin{}, false
	}
	return Origin{Partition: int32(binary.BigEndian.Uint32(v)), Offset: int64(binary.BigEndian.Uint64(v[4:])),
		Topic: string(v[12:])}, true
}

// originOf returns the origin a repartition record carries and its headers
// without the origin header; kr's own position if it carries none (or a
// malformed one).
func originOf(kr *kgo.Record, hs []Header) (Origin, []Header) {
	o := Origin{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset}
	for i, h := range hs {
		if h.Key != headerOrigin {
			continue
		}
		if orig, ok := decodeOrigin(h.Value); ok {
			o = orig
		}
		hs = append(hs[:i:i], hs[i+1:]...)
		if len(hs) == 0 {
			hs = nil
		}
		break
	}
	return o, hs
}
