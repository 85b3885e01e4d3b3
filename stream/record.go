package stream

import "time"

// Record is one record flowing through a topology.
//
// Timestamp is the record's event time: the Kafka record timestamp, or what
// the source's timestamp extractor returned (see Timestamps). It is never the
// processing clock, so a task given the same input produces the same output.
// Operators carry Timestamp, Headers and Origin from their input to what they
// emit, so a W3C traceparent header follows a record through every hop.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Headers   []Header
	Origin    Origin
}

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Origin says where a record was read: the input (or internal repartition)
// topic, partition and offset of the record that caused this one.
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
}
