package stream

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// A Codec turns a key or value of type T into record bytes and back.
//
// Encode and Decode must be safe for concurrent use: one Codec value is shared
// by every task of an App. The bytes Encode returns are retained (as a record
// value until it is acknowledged, and by a store's cache): Encode must return
// a new slice each time, never a buffer it reuses. Decode must not retain b
// (the buffer may be reused by the client); it must return an error, never
// panic, on malformed input — the record then goes to the dead-letter topic
// at once.
//
// Avro, Protobuf or schema-registry codecs implement this interface outside
// this package.
type Codec[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// DecodeError reports that a record's key or value could not be decoded. Such
// a record is not retried: it goes to the input's dead-letter topic at once.
type DecodeError struct {
	Part string // "key" or "value"
	Err  error
}

func (e *DecodeError) Error() string { return "decode " + e.Part + ": " + e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// String returns a codec for UTF-8 strings (the bytes as they are). A null
// key or value decodes to "".
func String() Codec[string] { return stringCodec{} }

type stringCodec struct{}

func (stringCodec) Encode(v string) ([]byte, error) { return []byte(v), nil }
func (stringCodec) Decode(b []byte) (string, error) { return string(b), nil }

func (stringCodec) appender() appendEncoder[string]        { return stringCodec{} }
func (stringCodec) encodeSize(v string) int                { return len(v) }
func (stringCodec) appendEncode(b []byte, v string) []byte { return append(b, v...) }

// appendEncoder is implemented by this package's codecs that can append an
// encoding to a buffer the caller owns: String, Int64, and the windowed
// codecs of such keys. A sink writes a record's key and value into its
// task's output slab with it (task.outBytes) instead of allocating for
// each, twice for a windowed key (the key's bytes, then the key and the
// window).
//
// Invariant: for every v, encodeSize(v) == len(Encode(v)) and
// appendEncode(b, v) == append(b, Encode(v)...) byte for byte, and Encode
// returns no error.
type appendEncoder[T any] interface {
	encodeSize(v T) int
	appendEncode(b []byte, v T) []byte
}

// appenderOf returns c's appendEncoder; nil if it has none (a codec from
// outside the package, or a windowed codec of such a key).
func appenderOf[T any](c Codec[T]) appendEncoder[T] {
	if a, ok := c.(interface{ appender() appendEncoder[T] }); ok {
		return a.appender()
	}
	return nil
}

// Bytes returns a codec passing raw bytes through. Decode copies, so the
// result may be retained.
func Bytes() Codec[[]byte] { return bytesCodec{} }

type bytesCodec struct{}

func (bytesCodec) Encode(v []byte) ([]byte, error) { return v, nil }
func (bytesCodec) Decode(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	return append([]byte(nil), b...), nil
}

// Int64 returns a codec for int64 as 8 big-endian bytes, the format of Java's
// LongSerializer, so Kafka Streams and Kafka tools read the values.
func Int64() Codec[int64] { return int64Codec{} }

type int64Codec struct{}

// errInt64Len is returned by the Int64 codec for input that is not 8 bytes.
var errInt64Len = errors.New("int64: want 8 bytes")

func (int64Codec) Encode(v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(v)), nil
}

func (int64Codec) appender() appendEncoder[int64] { return int64Codec{} }
func (int64Codec) encodeSize(int64) int           { return 8 }
func (int64Codec) appendEncode(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

func (int64Codec) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w, got %d", errInt64Len, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// JSON returns a codec encoding T with encoding/json. A null (nil) key or
// value decodes to T's zero value.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

func (jsonCodec[T]) Decode(b []byte) (T, error) {
	var v T
	if b == nil {
		return v, nil
	}
	err := json.Unmarshal(b, &v)
	return v, err
}

// InferCodec returns the codec the operators use for T when none is given:
// String for string, Bytes for []byte, Int64 for int64, and JSON for a
// struct, map, slice, array or pointer type. Any other type (int, a named
// string type, an interface, ...) has no inferred codec: the operator's
// declaration fails and asks for one (see Codecs).
func InferCodec[T any]() (Codec[T], error) {
	var zero T
	var c any
	switch any(zero).(type) {
	case string:
		c = String()
	case []byte:
		c = Bytes()
	case int64:
		c = Int64()
	}
	if c != nil {
		return c.(Codec[T]), nil
	}
	t := reflect.TypeFor[T]()
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array, reflect.Pointer:
		return JSON[T](), nil
	}
	return nil, fmt.Errorf("%w for %v: pass one with stream.Codecs", errNoCodec, t)
}

// errNoCodec is the declaration error of an operator that needs a codec for
// a type it cannot infer one for.
var errNoCodec = errors.New("no codec inferred")

// CodecOpt gives an operator the key and value codecs of its records (see
// Codecs). It configures GroupByKey, GroupBy, Stream.ToTable and Aggregate.
type CodecOpt[K, V any] struct {
	key   Codec[K]
	value Codec[V]
}

// Codecs gives the key and value codecs an operator writes its records with
// (to a repartition topic, a store and its changelog), overriding the
// inferred ones (InferCodec). A nil codec keeps the inferred one.
func Codecs[K, V any](key Codec[K], value Codec[V]) CodecOpt[K, V] {
	return CodecOpt[K, V]{key: key, value: value}
}

// resolveCodecs returns the codecs opts give, else the inferred ones; an
// error names what is missing.
func resolveCodecs[K, V any](opts []CodecOpt[K, V]) (Codec[K], Codec[V], error) {
	var key Codec[K]
	var value Codec[V]
	for _, o := range opts {
		if o.key != nil {
			key = o.key
		}
		if o.value != nil {
			value = o.value
		}
	}
	var errs []error
	if key == nil {
		c, err := InferCodec[K]()
		key = c
		errs = append(errs, err)
	}
	if value == nil {
		c, err := InferCodec[V]()
		value = c
		errs = append(errs, err)
	}
	return key, value, errors.Join(errs...)
}
