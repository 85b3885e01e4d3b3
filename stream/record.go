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
	Key   K
	Value V
	// Tombstone marks the deletion of Key in a table's stream of updates
	// (Table.ToStream: Kafka Streams' null value); Value is then the zero
	// V. A sink writes it with a null value; MapValues and FlatMapValues
	// pass it on without calling their function; stream aggregations and
	// stream-table joins ignore it; ToTable deletes the key.
	Tombstone bool
	Timestamp time.Time
	Headers   []Header
	Origin    Origin

	// old is, in a table's stream of updates when an operator wants it
	// (Changes), the value the table forwarded before for the key; nil if
	// none (an insert) or not wanted.
	old *V

	// keyEnc and valueEnc carry the encoding of Key and Value while the
	// operators pass them on unchanged (see encoded).
	keyEnc, valueEnc encoded
}

// encoded is the encoding of a record's key or value by a codec, carried
// with the record so that an operator needing the bytes by the same codec
// (a store key, a sink) does not encode again: the source carries the input
// record's key bytes, an aggregate the key and value bytes it stored.
//
// Invariant: codec is set only for a carryingCodec, whose Encode is a pure
// function of an immutable value (string, int64) and whose Decode(Encode(v))
// == v and Encode(Decode(b)) == b byte for byte; so b always equals what
// codec.Encode would return for the value the record holds. An operator that
// may change the key (KeyBy) or the value (Map, Aggregate, Join) drops or
// replaces what it carries; one that passes a record on unchanged (Filter,
// Peek, Branch, Merge) carries both. A record built without it (the zero
// encoded) is simply encoded.
//
// b may alias a fetched record's bytes: the App never recycles fetched
// records (kgo.Record.Recycle), so they stay valid for as long as anything
// retains them. Nothing modifies b.
type encoded struct {
	b     []byte
	codec any
}

// carryingCodec marks the codecs whose encodings records carry (see encoded).
type carryingCodec interface{ carriesEncoding() }

func (stringCodec) carriesEncoding() {}
func (int64Codec) carriesEncoding()  {}

// carries reports whether records carry encodings made by c.
func carries(c any) bool {
	_, ok := c.(carryingCodec)
	return ok
}

// carry returns b as made by c, for a record to carry; the zero encoded if
// records do not carry c's encodings (carriesC = carries(c), computed once).
func carry(c any, carriesC bool, b []byte) encoded {
	if !carriesC {
		return encoded{}
	}
	return encoded{b: b, codec: c}
}

// encodeCarried returns v's encoding by c: the bytes e carries when c made
// them, else c.Encode(v). carriesC = carries(c): only then is c compared
// (a carryingCodec is comparable; an arbitrary codec may not be).
func encodeCarried[T any](c Codec[T], carriesC bool, e encoded, v T) ([]byte, error) {
	if carriesC && e.codec != nil && e.codec == any(c) {
		return e.b, nil
	}
	return c.Encode(v)
}

// sinkEncode is encodeCarried for a sink writing with task t: when c
// appends (a = appenderOf(c), computed once) and e carries nothing c made,
// v is encoded into t's output slab (task.outBytes).
func sinkEncode[T any](t *task, c Codec[T], carriesC bool, a appendEncoder[T], e encoded, v T) ([]byte, error) {
	if carriesC && e.codec != nil && e.codec == any(c) {
		return e.b, nil
	}
	if a != nil {
		return a.appendEncode(t.outBytes(a.encodeSize(v)), v), nil
	}
	return c.Encode(v)
}

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Origin says where a record was read: the input topic, partition and offset
// of the record that caused this one. After a repartition it is still the
// original input record's (the repartition record carries it in an internal
// header), so a dead letter names the record a user can find.
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
}
