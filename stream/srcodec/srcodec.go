// Package srcodec holds stream codecs that write and read the Confluent
// Schema Registry wire format: Avro (Go structs, github.com/hamba/avro/v2),
// JSON Schema (Go values through encoding/json, validated) and Protobuf
// (generated messages). They work with weir's registry (package registry)
// or any Confluent-compatible one, through franz-go's pkg/sr client.
//
// The wire format (Confluent's; the constants are part of the format):
//
//	+------+-------------------+------------------------+----------------+
//	| 0x00 | schema id (int32, | Protobuf only: message | payload        |
//	| magic| big endian)       | indexes (zigzag varint | (Avro binary,  |
//	|      |                   | count, then indexes;   |  JSON, or      |
//	|      |                   | [0] is the single 0x00)|  Protobuf)     |
//	+------+-------------------+------------------------+----------------+
//
// Schemas are cached: a codec resolves its own schema's id once (looked up,
// or registered on first use with AutoRegister), and a Registry caches the
// writer schemas it fetched by id, so steady-state encoding and decoding
// make no registry requests and allocate no schema objects. A record that
// does not decode — wrong magic byte, an id the registry does not know, a
// writer schema of another format or that the reader cannot resolve, a
// payload that does not match — makes Decode fail, and the stream library
// sends the record to the input's dead-letter topic with the error as the
// reason, as for any codec error.
package srcodec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Errors of the wire format and of schema resolution, matched with
// errors.Is.
var (
	ErrShort         = errors.New("srcodec: record shorter than the wire-format header")
	ErrMagic         = errors.New("srcodec: wrong magic byte (not the schema registry wire format)")
	ErrUnknownSchema = errors.New("srcodec: schema id not known to the registry")
	ErrSchemaType    = errors.New("srcodec: writer schema is of another format")
	ErrIndexes       = errors.New("srcodec: malformed protobuf message indexes")
)

// maxIndexes bounds the message indexes read from a record (nesting depth
// of the message in its .proto file).
const maxIndexes = 64

// AppendHeader appends the wire-format header: magic byte, id and, when
// indexes is not nil (Protobuf), the message indexes.
func AppendHeader(b []byte, id int, indexes []int) []byte {
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(id))
	if indexes == nil {
		return b
	}
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(b, 0) // the common first message: count 0 stands for [0]
	}
	b = binary.AppendVarint(b, int64(len(indexes)))
	for _, i := range indexes {
		b = binary.AppendVarint(b, int64(i))
	}
	return b
}

// DecodeHeader reads the magic byte and schema id and returns the rest.
func DecodeHeader(b []byte) (id int, rest []byte, err error) {
	if len(b) < 5 {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	if b[0] != 0 {
		return 0, nil, fmt.Errorf("%w: 0x%02x", ErrMagic, b[0])
	}
	return int(binary.BigEndian.Uint32(b[1:5])), b[5:], nil
}

// DecodeIndexes reads Protobuf message indexes (zigzag varints, a count
// then the indexes; a count of 0 means [0]) and returns the rest.
func DecodeIndexes(b []byte) (indexes []int, rest []byte, err error) {
	n, k := binary.Varint(b)
	if k <= 0 || n < 0 || n > maxIndexes {
		return nil, nil, fmt.Errorf("%w: count", ErrIndexes)
	}
	b = b[k:]
	if n == 0 {
		return []int{0}, b, nil
	}
	indexes = make([]int, n)
	for i := range indexes {
		v, k := binary.Varint(b)
		if k <= 0 || v < 0 || v > 1<<20 {
			return nil, nil, fmt.Errorf("%w: index %d", ErrIndexes, i)
		}
		indexes[i], b = int(v), b[k:]
	}
	return indexes, b, nil
}

// Registry is a schema registry client shared by codecs: it caches writer
// schemas by id. It is safe for concurrent use.
type Registry struct {
	cl      *sr.Client
	timeout time.Duration

	mu   sync.RWMutex
	byID map[int]sr.Schema
}

// NewRegistry returns a Registry for the registry at urls (for example
// "http://127.0.0.1:8081").
func NewRegistry(urls ...string) (*Registry, error) {
	cl, err := sr.NewClient(sr.URLs(urls...))
	if err != nil {
		return nil, err
	}
	return NewRegistryClient(cl), nil
}

// NewRegistryClient returns a Registry using cl.
func NewRegistryClient(cl *sr.Client) *Registry {
	return &Registry{cl: cl, timeout: 30 * time.Second, byID: map[int]sr.Schema{}}
}

// Client is the underlying pkg/sr client.
func (r *Registry) Client() *sr.Client { return r.cl }

// SchemaByID returns the schema with id, from the cache or the registry.
// An id the registry does not know is ErrUnknownSchema (not cached: it may
// be registered later).
func (r *Registry) SchemaByID(id int) (sr.Schema, error) {
	r.mu.RLock()
	s, ok := r.byID[id]
	r.mu.RUnlock()
	if ok {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.ErrorCode == 40403 {
			return sr.Schema{}, fmt.Errorf("%w: id %d", ErrUnknownSchema, id)
		}
		return sr.Schema{}, fmt.Errorf("srcodec: fetch schema %d: %w", id, err)
	}
	r.mu.Lock()
	r.byID[id] = s
	r.mu.Unlock()
	return s, nil
}

// resolveID finds (or, with register, registers) s under subject.
func (r *Registry) resolveID(subject string, s sr.Schema, register bool) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	var (
		ss  sr.SubjectSchema
		err error
	)
	if register {
		ss, err = r.cl.CreateSchema(ctx, subject, s)
	} else {
		ss, err = r.cl.LookupSchema(ctx, subject, s)
	}
	if err != nil {
		verb := "look up"
		if register {
			verb = "register"
		}
		return 0, fmt.Errorf("srcodec: %s schema under subject %q: %w", verb, subject, err)
	}
	r.mu.Lock()
	r.byID[ss.ID] = s
	r.mu.Unlock()
	return ss.ID, nil
}

// Opt configures a codec.
type Opt func(*options)

type options struct {
	autoRegister     bool
	validateOnDecode bool
}

// AutoRegister registers the codec's schema under its subject on first
// use. Default: the schema must already be registered (it is looked up).
func AutoRegister() Opt { return func(o *options) { o.autoRegister = true } }

// ValidateOnDecode makes the JSON Schema codec validate every decoded
// value against its writer schema. Default: values are validated when
// encoded only.
func ValidateOnDecode() Opt { return func(o *options) { o.validateOnDecode = true } }

// writerID resolves a codec's own schema id once; a failure is not cached
// (the registry may be back, or the schema registered, on the next try).
type writerID struct {
	id atomic.Int64 // 0 until resolved
	mu sync.Mutex   // serializes resolving
}

func (w *writerID) get(reg *Registry, subject string, s sr.Schema, register bool) (int, error) {
	if id := w.id.Load(); id != 0 {
		return int(id), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if id := w.id.Load(); id != 0 {
		return int(id), nil
	}
	id, err := reg.resolveID(subject, s, register)
	if err != nil {
		return 0, err
	}
	w.id.Store(int64(id))
	return id, nil
}

// perID caches what a codec derived from a writer schema (a resolved Avro
// reader, a compiled JSON schema), by id.
type perID[V any] struct {
	mu sync.RWMutex
	m  map[int]V
}

func (c *perID[V]) get(id int, derive func() (V, error)) (V, error) {
	c.mu.RLock()
	v, ok := c.m[id]
	c.mu.RUnlock()
	if ok {
		return v, nil
	}
	v, err := derive()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[int]V{}
	}
	c.m[id] = v
	c.mu.Unlock()
	return v, nil
}
