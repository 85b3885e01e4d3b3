package schema

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// protoMainFile is the path the schema being parsed compiles under; its
// imports are resolved from the references by name, then from the
// well-known google/protobuf/*.proto files.
const protoMainFile = "weir.registry.schema.proto"

// protoSchema is a parsed Protobuf schema: one .proto file.
type protoSchema struct {
	text       string
	normalized string
	file       protoreflect.FileDescriptor
}

func (s *protoSchema) Type() Type         { return Protobuf }
func (s *protoSchema) Text() string       { return s.text }
func (s *protoSchema) Normalized() string { return s.normalized }

// ProtoFileOf returns the file descriptor of a Protobuf Schema (nil for
// others).
func ProtoFileOf(s Schema) protoreflect.FileDescriptor {
	if p, ok := s.(*protoSchema); ok {
		return p.file
	}
	return nil
}

// protoDescriptor reads a schema given as a base64 FileDescriptorProto (as
// some serializers register them); ok is false for .proto source text.
func protoDescriptor(text string) (*descriptorpb.FileDescriptorProto, bool) {
	t := strings.TrimSpace(text)
	if t == "" || strings.ContainsAny(t, " \n\t;{") {
		return nil, false
	}
	raw, err := base64.StdEncoding.DecodeString(t)
	if err != nil {
		return nil, false
	}
	var fdp descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(raw, &fdp); err != nil {
		return nil, false
	}
	clearEmptyJSONNames(fdp.MessageType)
	return &fdp, true
}

// clearEmptyJSONNames gives every field without a json_name the default
// one, as protoc writes it: descriptors built by some runtimes (Python's
// descriptor_pool) have none, and the linker would read each as the custom
// name "", conflicting between fields.
func clearEmptyJSONNames(ms []*descriptorpb.DescriptorProto) {
	for _, m := range ms {
		for _, f := range m.Field {
			if f.GetJsonName() == "" {
				f.JsonName = proto.String(defaultJSONName(f.GetName()))
			}
		}
		clearEmptyJSONNames(m.NestedType)
	}
}

// defaultJSONName is protoc's JSON name of a field: lowerCamelCase, each
// underscore dropped and the letter after it upper-cased.
func defaultJSONName(name string) string {
	var b strings.Builder
	upper := false
	for _, r := range name {
		switch {
		case r == '_':
			upper = true
		case upper && 'a' <= r && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
			upper = false
		default:
			b.WriteRune(r)
			upper = false
		}
	}
	return b.String()
}

func parseProtobuf(text string, refs []Reference) (Schema, error) {
	sources := map[string]protocompile.SearchResult{}
	add := func(name, text string) {
		if fdp, ok := protoDescriptor(text); ok {
			fdp.Name = proto.String(name)
			sources[name] = protocompile.SearchResult{Proto: fdp}
			return
		}
		sources[name] = protocompile.SearchResult{Source: strings.NewReader(text)}
	}
	for _, r := range refs {
		add(r.Name, r.Schema)
	}
	add(protoMainFile, text)
	resolver := protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
		if r, ok := sources[path]; ok {
			return r, nil
		}
		return protocompile.SearchResult{}, fmt.Errorf("import %q is neither a reference nor a well-known type", path)
	})
	comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(resolver)}
	files, err := comp.Compile(context.Background(), protoMainFile)
	if err != nil {
		return nil, err
	}
	fd := files[0]
	if fd.Messages().Len() == 0 {
		return nil, fmt.Errorf("the schema defines no message")
	}
	fdp := protodesc.ToFileDescriptorProto(fd)
	fdp.Name = nil
	fdp.SourceCodeInfo = nil
	norm, err := proto.MarshalOptions{Deterministic: true}.Marshal(fdp)
	if err != nil {
		return nil, err
	}
	return &protoSchema{text: text, normalized: base64.StdEncoding.EncodeToString(norm), file: fd}, nil
}

// protoChecker applies Confluent's Protobuf rules to the difference from
// the writer's file (original) to the reader's (update).
type protoChecker struct {
	messages []string
}

func checkProto(reader, writer *protoSchema) []string {
	c := &protoChecker{}
	if reader.file.Package() != writer.file.Package() {
		c.fail("PACKAGE_CHANGED", "#/", fmt.Sprintf("the package changed from '%s' to '%s'", writer.file.Package(), reader.file.Package()))
	}
	c.messagesOf(writer.file.Messages(), reader.file, "#/")
	return c.messages
}

func (c *protoChecker) fail(errorType, path, desc string) {
	c.messages = append(c.messages, incompat(errorType, path, desc))
}

func (c *protoChecker) messagesOf(ws protoreflect.MessageDescriptors, reader protoreflect.FileDescriptor, path string) {
	for i := 0; i < ws.Len(); i++ {
		w := ws.Get(i)
		if w.IsMapEntry() {
			continue
		}
		mpath := path + string(w.Name())
		r := findMessage(reader, w.FullName())
		if r == nil {
			// Rule MESSAGE_REMOVED.
			c.fail("MESSAGE_REMOVED", mpath, fmt.Sprintf("message '%s' was removed", w.FullName()))
			continue
		}
		c.message(w, r, mpath)
		c.messagesOf(w.Messages(), reader, mpath+".")
	}
}

func findMessage(f protoreflect.FileDescriptor, name protoreflect.FullName) protoreflect.MessageDescriptor {
	var find func(ms protoreflect.MessageDescriptors) protoreflect.MessageDescriptor
	find = func(ms protoreflect.MessageDescriptors) protoreflect.MessageDescriptor {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			if m.FullName() == name {
				return m
			}
			if strings.HasPrefix(string(name), string(m.FullName())+".") {
				if d := find(m.Messages()); d != nil {
					return d
				}
			}
		}
		return nil
	}
	return find(f.Messages())
}

func (c *protoChecker) message(w, r protoreflect.MessageDescriptor, path string) {
	wf, rf := w.Fields(), r.Fields()
	movedInto := map[protoreflect.Name]int{}
	for i := 0; i < rf.Len(); i++ {
		rfd := rf.Get(i)
		fpath := fmt.Sprintf("%s/%d", path, rfd.Number())
		wfd := wf.ByNumber(rfd.Number())
		if wfd == nil {
			// Rule REQUIRED_FIELD_ADDED (proto2).
			if rfd.Cardinality() == protoreflect.Required {
				c.fail("REQUIRED_FIELD_ADDED", fpath, fmt.Sprintf("required field '%s' was added", rfd.Name()))
			}
			continue
		}
		c.field(wfd, rfd, fpath)
		if ro := rfd.ContainingOneof(); ro != nil && !ro.IsSynthetic() {
			wo := wfd.ContainingOneof()
			if wo == nil || wo.IsSynthetic() {
				movedInto[ro.Name()]++
				// Rule FIELD_MOVED_TO_EXISTING_ONEOF.
				if w.Oneofs().ByName(ro.Name()) != nil {
					c.fail("FIELD_MOVED_TO_EXISTING_ONEOF", fpath, fmt.Sprintf("field '%s' was moved into the existing oneof '%s'", rfd.Name(), ro.Name()))
				}
			}
		}
	}
	for name, n := range movedInto {
		// Rule MULTIPLE_FIELDS_MOVED_TO_ONEOF.
		if n > 1 && w.Oneofs().ByName(name) == nil {
			c.fail("MULTIPLE_FIELDS_MOVED_TO_ONEOF", path, fmt.Sprintf("%d fields were moved into the new oneof '%s'", n, name))
		}
	}
	for i := 0; i < wf.Len(); i++ {
		wfd := wf.Get(i)
		// Rule REQUIRED_FIELD_REMOVED (proto2); removing an optional field is
		// compatible (FIELD_REMOVED).
		if rf.ByNumber(wfd.Number()) == nil && wfd.Cardinality() == protoreflect.Required {
			c.fail("REQUIRED_FIELD_REMOVED", fmt.Sprintf("%s/%d", path, wfd.Number()), fmt.Sprintf("required field '%s' was removed", wfd.Name()))
		}
	}
}

// scalarGroup maps each scalar kind to its wire-compatible group: a change
// within a group reads the old bytes (possibly truncating), a change
// across groups does not.
func scalarGroup(k protoreflect.Kind) string {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.BoolKind:
		return "varint"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "zigzag"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "bytes"
	}
	return k.String()
}

func (c *protoChecker) field(w, r protoreflect.FieldDescriptor, path string) {
	wk, rk := kindClass(w), kindClass(r)
	switch {
	case wk != rk:
		// Rule FIELD_KIND_CHANGED: scalar, enum, message and map do not mix.
		c.fail("FIELD_KIND_CHANGED", path, fmt.Sprintf("field '%s' changed kind from %s to %s", r.Name(), wk, rk))
	case wk == "scalar" && scalarGroup(w.Kind()) != scalarGroup(r.Kind()):
		c.fail("FIELD_SCALAR_KIND_CHANGED", path, fmt.Sprintf("field '%s' changed type from %s to %s", r.Name(), w.Kind(), r.Kind()))
	case wk == "message" && w.Message().FullName() != r.Message().FullName():
		c.fail("FIELD_NAMED_TYPE_CHANGED", path, fmt.Sprintf("field '%s' changed type from %s to %s", r.Name(), w.Message().FullName(), r.Message().FullName()))
	case wk == "enum" && w.Enum().FullName() != r.Enum().FullName():
		c.fail("FIELD_NAMED_TYPE_CHANGED", path, fmt.Sprintf("field '%s' changed type from %s to %s", r.Name(), w.Enum().FullName(), r.Enum().FullName()))
	case wk == "map":
		c.field(w.MapValue(), r.MapValue(), path+"/value")
		c.field(w.MapKey(), r.MapKey(), path+"/key")
	}
	if wk == rk && (w.Cardinality() == protoreflect.Repeated) != (r.Cardinality() == protoreflect.Repeated) {
		// Rule FIELD_LABEL_CHANGED: repeated vs singular.
		c.fail("FIELD_LABEL_CHANGED", path, fmt.Sprintf("field '%s' changed between repeated and singular", r.Name()))
	}
	if (w.Cardinality() == protoreflect.Required) != (r.Cardinality() == protoreflect.Required) {
		c.fail("REQUIRED_FIELD_CHANGED", path, fmt.Sprintf("field '%s' changed between required and optional", r.Name()))
	}
}

func kindClass(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return "map"
	case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
		return "message"
	case f.Kind() == protoreflect.EnumKind:
		return "enum"
	}
	return "scalar"
}

// checkProtoHistory applies the rule about the order of versions rather
// than reader and writer: RESERVED_FIELD_REUSED, a field of next using a
// number or name that old reserved (it belonged to a removed field, whose
// data may still be in the topic, with another type).
func checkProtoHistory(next, old *protoSchema) []string {
	c := &protoChecker{}
	var walk func(ms protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			if o := findMessage(old.file, m.FullName()); o != nil {
				fs := m.Fields()
				for j := 0; j < fs.Len(); j++ {
					f := fs.Get(j)
					path := fmt.Sprintf("#/%s/%d", m.FullName(), f.Number())
					if o.ReservedRanges().Has(f.Number()) {
						c.fail("RESERVED_FIELD_REUSED", path, fmt.Sprintf("field '%s' uses number %d, reserved in the old schema", f.Name(), f.Number()))
					} else if o.ReservedNames().Has(f.Name()) {
						c.fail("RESERVED_FIELD_REUSED", path, fmt.Sprintf("field '%s' uses a name reserved in the old schema", f.Name()))
					}
				}
			}
			walk(m.Messages())
		}
	}
	walk(next.file.Messages())
	return c.messages
}
