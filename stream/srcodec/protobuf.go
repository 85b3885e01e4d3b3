package srcodec

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protobuf returns a codec for the generated message type T (a pointer,
// such as *pb.Order), registered under subject as its .proto file (a
// base64 FileDescriptorProto, which Confluent-compatible registries
// accept). The file may import only the well-known google/protobuf types.
// Decode reads any record whose writer schema is Protobuf and whose
// payload T's type parses; the message indexes are checked for form.
func Protobuf[T proto.Message](reg *Registry, subject string, opts ...Opt) (*ProtobufCodec[T], error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var zero T
	md := zero.ProtoReflect().Descriptor()
	file := md.ParentFile()
	for i := 0; i < file.Imports().Len(); i++ {
		if p := file.Imports().Get(i).Path(); !strings.HasPrefix(p, "google/protobuf/") {
			return nil, fmt.Errorf("srcodec: %s imports %s: only well-known types are supported as imports", file.Path(), p)
		}
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(protodesc.ToFileDescriptorProto(file))
	if err != nil {
		return nil, err
	}
	return &ProtobufCodec[T]{
		reg: reg, subject: subject, opts: o,
		schema:  sr.Schema{Schema: base64.StdEncoding.EncodeToString(raw), Type: sr.TypeProtobuf},
		indexes: messageIndexes(md),
		newT:    func() T { return zero.ProtoReflect().Type().New().Interface().(T) },
	}, nil
}

// messageIndexes is the path of md in its file: the index of each
// enclosing message, outermost first.
func messageIndexes(md protoreflect.MessageDescriptor) []int {
	var idx []int
	for d := protoreflect.Descriptor(md); ; {
		idx = append(idx, d.Index())
		parent, ok := d.Parent().(protoreflect.MessageDescriptor)
		if !ok {
			break
		}
		d = parent
	}
	slices.Reverse(idx)
	return idx
}

// ProtobufCodec is the codec Protobuf returns: a stream.Codec[T].
type ProtobufCodec[T proto.Message] struct {
	reg     *Registry
	subject string
	opts    options
	schema  sr.Schema
	indexes []int
	newT    func() T
	id      writerID
	writers perID[struct{}]
}

// Encode writes v with the codec's schema id and message indexes.
func (c *ProtobufCodec[T]) Encode(v T) ([]byte, error) {
	id, err := c.id.get(c.reg, c.subject, c.schema, c.opts.autoRegister)
	if err != nil {
		return nil, err
	}
	b := AppendHeader(make([]byte, 0, 16+proto.Size(v)), id, c.indexes)
	b, err = proto.MarshalOptions{}.MarshalAppend(b, v)
	if err != nil {
		return nil, fmt.Errorf("srcodec: protobuf encode: %w", err)
	}
	return b, nil
}

// Decode reads a record written with a Protobuf schema of the registry.
func (c *ProtobufCodec[T]) Decode(b []byte) (T, error) {
	var zero T
	id, rest, err := DecodeHeader(b)
	if err != nil {
		return zero, err
	}
	if _, err := c.writers.get(id, func() (struct{}, error) {
		ws, err := c.reg.SchemaByID(id)
		if err == nil && ws.Type != sr.TypeProtobuf {
			err = fmt.Errorf("%w: schema %d is %s, want PROTOBUF", ErrSchemaType, id, ws.Type)
		}
		return struct{}{}, err
	}); err != nil {
		return zero, err
	}
	_, payload, err := DecodeIndexes(rest)
	if err != nil {
		return zero, err
	}
	v := c.newT()
	if err := proto.Unmarshal(payload, v); err != nil {
		return zero, fmt.Errorf("srcodec: protobuf decode (schema id %d): %w", id, err)
	}
	return v, nil
}
