package main

// Schema-aware produce and consume: weir produce --value-subject /
// --value-schema encodes each JSON line with a registered schema, and
// weir consume -f json --registry adds each wire-format value decoded to
// JSON, with its schema id. The hooks in produce.go and consume.go are a
// few lines; the work is here.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/weirhq/weir/registry/schema"
	"github.com/weirhq/weir/stream/srcodec"
)

// registryTimeout bounds each registry request of produce and consume.
const registryTimeout = 30 * time.Second

// registrySchema is a registered schema, parsed.
type registrySchema struct {
	id     int
	parsed schema.Schema
}

// fetchParsed parses s, fetching its references (recursively) from the
// registry.
func fetchParsed(ctx context.Context, cl *sr.Client, s sr.Schema) (schema.Schema, error) {
	t, err := schema.ParseType(s.Type.String())
	if err != nil {
		return nil, err
	}
	var refs []schema.Reference
	seen := map[string]bool{}
	var walk func(rs []sr.SchemaReference, depth int) error
	walk = func(rs []sr.SchemaReference, depth int) error {
		if depth > 32 {
			return errors.New("references nest too deep")
		}
		for _, r := range rs {
			if seen[r.Name] {
				continue
			}
			seen[r.Name] = true
			ss, err := cl.SchemaByVersion(ctx, r.Subject, r.Version)
			if err != nil {
				return fmt.Errorf("reference %s (%s version %d): %w", r.Name, r.Subject, r.Version, err)
			}
			if err := walk(ss.References, depth+1); err != nil {
				return err
			}
			refs = append(refs, schema.Reference{Name: r.Name, Schema: ss.Schema.Schema})
		}
		return nil
	}
	if err := walk(s.References, 0); err != nil {
		return nil, err
	}
	return schema.Parse(t, s.Schema, refs)
}

// valueSchemaFlags are produce's flags for schema-encoded values.
type valueSchemaFlags struct {
	registry, subject, file, typ string
}

func (f *valueSchemaFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.registry, "registry", defaultRegistryURL(), "schema registry URL for --value-subject / --value-schema (WEIR_REGISTRY sets the default)")
	fs.StringVar(&f.subject, "value-subject", "", "encode each line (a JSON value) with the latest schema of this subject (Confluent wire format)")
	fs.StringVar(&f.file, "value-schema", "", "encode each line with the schema in this file, registered under --value-subject (default TOPIC-value)")
	fs.StringVar(&f.typ, "value-type", "AVRO", "type of --value-schema: AVRO, JSON or PROTOBUF")
}

// valueEncoder encodes JSON lines with one registered schema.
type valueEncoder struct {
	registrySchema
	message protoreflect.MessageDescriptor // Protobuf: the file's first message
}

// encoder returns nil when no value schema was asked for.
func (f *valueSchemaFlags) encoder(ctx context.Context, topic string) (*valueEncoder, error) {
	if f.subject == "" && f.file == "" {
		return nil, nil
	}
	cl, err := sr.NewClient(sr.URLs(splitList(f.registry)...))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, registryTimeout)
	defer cancel()
	subject := f.subject
	if subject == "" {
		subject = topic + "-value"
	}
	var ss sr.SubjectSchema
	if f.file != "" {
		text, err := os.ReadFile(f.file)
		if err != nil {
			return nil, err
		}
		var typ sr.SchemaType
		if err := typ.UnmarshalText([]byte(strings.ToUpper(f.typ))); err != nil {
			return nil, fmt.Errorf("--value-type: %w", err)
		}
		if ss, err = cl.CreateSchema(ctx, subject, sr.Schema{Schema: string(text), Type: typ}); err != nil {
			return nil, registryError(fmt.Errorf("register --value-schema under %s: %w", subject, err))
		}
	} else if ss, err = cl.SchemaByVersion(ctx, subject, -1); err != nil {
		return nil, registryError(fmt.Errorf("--value-subject %s: %w", subject, err))
	}
	parsed, err := fetchParsed(ctx, cl, ss.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema %d of %s: %w", ss.ID, subject, err)
	}
	e := &valueEncoder{registrySchema: registrySchema{id: ss.ID, parsed: parsed}}
	if f := schema.ProtoFileOf(parsed); f != nil {
		e.message = f.Messages().Get(0)
	}
	return e, nil
}

// encode turns one JSON value into the wire format.
func (e *valueEncoder) encode(line []byte) ([]byte, error) {
	switch e.parsed.Type() {
	case schema.Avro:
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		s := schema.AvroOf(e.parsed)
		native, err := avroNative(s, v)
		if err != nil {
			return nil, err
		}
		payload, err := avro.Marshal(s, native)
		if err != nil {
			return nil, err
		}
		return append(srcodec.AppendHeader(nil, e.id, nil), payload...), nil
	case schema.JSON:
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		if err := schema.ValidateJSON(e.parsed, v); err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, line); err != nil {
			return nil, err
		}
		return append(srcodec.AppendHeader(nil, e.id, nil), buf.Bytes()...), nil
	default:
		m := dynamicpb.NewMessage(e.message)
		if err := protojson.Unmarshal(line, m); err != nil {
			return nil, err
		}
		return proto.MarshalOptions{}.MarshalAppend(srcodec.AppendHeader(nil, e.id, []int{0}), m)
	}
}

// avroNative converts a JSON value (numbers as json.Number) into what
// hamba/avro encodes for schema s.
func avroNative(s avro.Schema, v any) (any, error) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	bad := func() (any, error) { return nil, fmt.Errorf("%v does not fit Avro type %s", v, s.Type()) }
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return bad()
		}
		return nil, nil
	case avro.Boolean:
		if _, ok := v.(bool); !ok {
			return bad()
		}
		return v, nil
	case avro.Int, avro.Long, avro.Float, avro.Double:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		switch s.Type() {
		case avro.Int:
			i, err := n.Int64()
			if err != nil || int64(int32(i)) != i {
				return bad()
			}
			return int32(i), nil
		case avro.Long:
			i, err := n.Int64()
			if err != nil {
				return bad()
			}
			return i, nil
		case avro.Float:
			f, err := n.Float64()
			return float32(f), err
		default:
			return n.Float64()
		}
	case avro.String, avro.Enum:
		if _, ok := v.(string); !ok {
			return bad()
		}
		return v, nil
	case avro.Bytes, avro.Fixed:
		str, ok := v.(string)
		if !ok {
			return bad()
		}
		return []byte(str), nil
	case avro.Array:
		l, ok := v.([]any)
		if !ok {
			return bad()
		}
		out := make([]any, len(l))
		for i, x := range l {
			var err error
			if out[i], err = avroNative(s.(*avro.ArraySchema).Items(), x); err != nil {
				return nil, err
			}
		}
		return out, nil
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			var err error
			if out[k], err = avroNative(s.(*avro.MapSchema).Values(), x); err != nil {
				return nil, err
			}
		}
		return out, nil
	case avro.Record:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		out := make(map[string]any, len(m))
		for _, f := range s.(*avro.RecordSchema).Fields() {
			x, ok := m[f.Name()]
			if !ok {
				if !f.HasDefault() {
					return nil, fmt.Errorf("field %q is missing and has no default", f.Name())
				}
				out[f.Name()] = f.Default()
				continue
			}
			var err error
			if out[f.Name()], err = avroNative(f.Type(), x); err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name(), err)
			}
		}
		return out, nil
	case avro.Union:
		// The first branch the value fits (Avro's JSON union wrapping,
		// {"type": value}, is accepted too).
		types := s.(*avro.UnionSchema).Types()
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			for name, x := range m {
				for _, t := range types {
					if n, ok := t.(avro.NamedSchema); (ok && n.FullName() == name) || string(t.Type()) == name {
						return avroNative(t, x)
					}
				}
			}
		}
		for _, t := range types {
			if out, err := avroNative(t, v); err == nil {
				return out, nil
			}
		}
		return bad()
	}
	return bad()
}

// valueDecoder decodes wire-format values for consume -f json, caching
// parsed schemas by id. A nil *valueDecoder decodes nothing.
type valueDecoder struct {
	cl  *sr.Client
	mu  sync.Mutex
	ids map[int]*registrySchema // nil entry: the id failed to load
}

// schemaValue is the value_schema field of consume -f json.
type schemaValue struct {
	ID    int             `json:"id"`
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
}

func newValueDecoder(url string) (*valueDecoder, error) {
	if url == "" {
		return nil, nil
	}
	cl, err := sr.NewClient(sr.URLs(splitList(url)...))
	if err != nil {
		return nil, err
	}
	return &valueDecoder{cl: cl, ids: map[int]*registrySchema{}}, nil
}

// decode returns the schema id and JSON of a wire-format value, nil for a
// value not in the wire format (or without a decoder).
func (d *valueDecoder) decode(b []byte) *schemaValue {
	if d == nil {
		return nil
	}
	id, payload, err := srcodec.DecodeHeader(b)
	if err != nil {
		return nil
	}
	out := &schemaValue{ID: id}
	s, err := d.schema(id)
	if err == nil {
		out.Value, err = decodeToJSON(s, payload)
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

func (d *valueDecoder) schema(id int) (*registrySchema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.ids[id]; ok {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	ss, err := d.cl.SchemaByID(ctx, id)
	if err != nil {
		return nil, registryError(err)
	}
	parsed, err := fetchParsed(ctx, d.cl, ss)
	if err != nil {
		return nil, err
	}
	s := &registrySchema{id: id, parsed: parsed}
	d.ids[id] = s
	return s, nil
}

func decodeToJSON(s *registrySchema, payload []byte) (json.RawMessage, error) {
	switch s.parsed.Type() {
	case schema.Avro:
		var v any
		r := avro.NewReader(nil, 0).Reset(payload)
		r.ReadVal(schema.AvroOf(s.parsed), &v)
		if r.Error != nil {
			return nil, r.Error
		}
		return json.Marshal(v)
	case schema.JSON:
		if !json.Valid(payload) {
			return nil, errors.New("the value is not JSON")
		}
		return payload, nil
	default:
		indexes, rest, err := srcodec.DecodeIndexes(payload)
		if err != nil {
			return nil, err
		}
		md, err := messageAt(schema.ProtoFileOf(s.parsed), indexes)
		if err != nil {
			return nil, err
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(rest, m); err != nil {
			return nil, err
		}
		return protojson.Marshal(m)
	}
}

// messageAt finds the message that Protobuf message indexes name.
func messageAt(f protoreflect.FileDescriptor, indexes []int) (protoreflect.MessageDescriptor, error) {
	ms := f.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range indexes {
		if i < 0 || i >= ms.Len() {
			return nil, fmt.Errorf("message index %v names no message", indexes)
		}
		md = ms.Get(i)
		ms = md.Messages()
	}
	return md, nil
}

// envRegistry is WEIR_REGISTRY: consume decodes values only when a
// registry is named.
func envRegistry() string { return os.Getenv("WEIR_REGISTRY") }
