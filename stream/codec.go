package stream

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
