package srcodec

import (
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Avro returns a codec for T (a struct with `avro` field tags, or any type
// hamba/avro maps) written with schema, an Avro schema registered under
// subject. Decode reads records written with any registered Avro schema the
// reader schema can resolve (the Avro specification's resolution rules:
// added fields take their defaults, promotions apply), each resolution
// computed once per writer id.
func Avro[T any](reg *Registry, subject, schema string, opts ...Opt) (*AvroCodec[T], error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	parsed, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("srcodec: avro schema: %w", err)
	}
	return &AvroCodec[T]{reg: reg, subject: subject, text: schema, schema: parsed, register: o.autoRegister}, nil
}

// AvroCodec is the codec Avro returns: a stream.Codec[T]. It is safe for
// concurrent use.
type AvroCodec[T any] struct {
	reg      *Registry
	subject  string
	text     string
	schema   avro.Schema
	register bool
	id       writerID
	readers  perID[avro.Schema]
}

// Encode writes v in the wire format with the codec's schema id.
func (c *AvroCodec[T]) Encode(v T) ([]byte, error) {
	id, err := c.id.get(c.reg, c.subject, sr.Schema{Schema: c.text, Type: sr.TypeAvro}, c.register)
	if err != nil {
		return nil, err
	}
	payload, err := avro.Marshal(c.schema, v)
	if err != nil {
		return nil, fmt.Errorf("srcodec: avro encode: %w", err)
	}
	return append(AppendHeader(make([]byte, 0, 5+len(payload)), id, nil), payload...), nil
}

// Decode reads a record written with any Avro schema of the registry.
func (c *AvroCodec[T]) Decode(b []byte) (T, error) {
	var v T
	id, payload, err := DecodeHeader(b)
	if err != nil {
		return v, err
	}
	reader, err := c.readers.get(id, func() (avro.Schema, error) { return c.resolve(id) })
	if err != nil {
		return v, err
	}
	// avro.Unmarshal reads a truncated payload as zero values without an
	// error; a Reader reports the short read.
	r := avroReaders.Get().(*avro.Reader)
	r.Reset(payload)
	r.Error = nil
	r.ReadVal(reader, &v)
	err = r.Error
	r.Reset(nil)
	avroReaders.Put(r)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("srcodec: avro decode (schema id %d): %w", id, err)
	}
	return v, nil
}

var avroReaders = sync.Pool{New: func() any { return avro.NewReader(nil, 0) }}

// resolve builds the schema that reads data written with schema id into
// the codec's schema.
func (c *AvroCodec[T]) resolve(id int) (avro.Schema, error) {
	ws, err := c.reg.SchemaByID(id)
	if err != nil {
		return nil, err
	}
	if ws.Type != sr.TypeAvro {
		return nil, fmt.Errorf("%w: schema %d is %s, want AVRO", ErrSchemaType, id, ws.Type)
	}
	if len(ws.References) > 0 {
		return nil, fmt.Errorf("srcodec: avro writer schema %d has references, which this codec does not resolve", id)
	}
	writer, err := avro.ParseWithCache(ws.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("srcodec: avro writer schema %d: %w", id, err)
	}
	if writer.Fingerprint() == c.schema.Fingerprint() {
		return c.schema, nil
	}
	resolved, err := avro.NewSchemaCompatibility().Resolve(c.schema, writer)
	if err != nil {
		return nil, fmt.Errorf("srcodec: avro writer schema %d cannot be read as the codec's schema: %w", id, err)
	}
	return resolved, nil
}
