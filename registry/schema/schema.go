// Package schema parses Avro, JSON Schema and Protobuf schemas as the
// Confluent Schema Registry receives them (text plus named references),
// gives each a normalized form used to decide whether two registrations
// are the same schema, and checks whether data written with one schema can
// be read with another (Check), the rule behind every compatibility level.
//
// Parsing uses well-kept libraries (github.com/hamba/avro/v2,
// github.com/santhosh-tekuri/jsonschema/v6, github.com/bufbuild/protocompile);
// the compatibility rules are written here, one function per rule, each
// reporting a Confluent-style message naming the rule (errorType) and the
// path in the schema where it was broken.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Type is a schema format as named by the registry API ("schemaType").
type Type string

const (
	Avro     Type = "AVRO"
	JSON     Type = "JSON"
	Protobuf Type = "PROTOBUF"
)

// Types lists the supported formats, as GET /schemas/types answers.
var Types = []Type{JSON, Protobuf, Avro}

// ParseType reads the API's schemaType: empty means AVRO, case is ignored.
func ParseType(s string) (Type, error) {
	switch strings.ToUpper(s) {
	case "", "AVRO":
		return Avro, nil
	case "JSON":
		return JSON, nil
	case "PROTOBUF":
		return Protobuf, nil
	}
	return "", fmt.Errorf("unknown schema type %q (want AVRO, JSON or PROTOBUF)", s)
}

// Reference is a resolved schema reference: the name the referencing
// schema uses (an Avro full name, a JSON Schema $ref URL, a .proto import
// path) and the referenced schema's text. A referenced schema's own
// references come in the same list (the registry flattens them,
// dependencies first).
type Reference struct {
	Name   string
	Schema string
}

// Schema is a parsed schema. It is immutable and safe for concurrent use.
type Schema interface {
	Type() Type
	// Text is the schema as registered.
	Text() string
	// Normalized is a deterministic rendering: two registrations with the
	// same Normalized (and references) are the same schema.
	Normalized() string
}

// ErrInvalid wraps every parse failure.
var ErrInvalid = errors.New("invalid schema")

// Parse parses text as a schema of type t with its references.
func Parse(t Type, text string, refs []Reference) (Schema, error) {
	var (
		s   Schema
		err error
	)
	switch t {
	case Avro:
		s, err = parseAvro(text, refs)
	case JSON:
		s, err = parseJSON(text, refs)
	case Protobuf:
		s, err = parseProtobuf(text, refs)
	default:
		return nil, fmt.Errorf("%w: unknown schema type %q", ErrInvalid, t)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return s, nil
}

// Check reports why data written with writer cannot be read with reader:
// no messages means compatible. Both must be of one type.
func Check(reader, writer Schema) []string {
	if reader.Type() != writer.Type() {
		return []string{incompat("TYPE_MISMATCH", "", fmt.Sprintf("schema type changed from %s to %s", writer.Type(), reader.Type()))}
	}
	switch r := reader.(type) {
	case *avroSchema:
		return checkAvro(r, writer.(*avroSchema))
	case *jsonSchema:
		return checkJSON(r, writer.(*jsonSchema))
	case *protoSchema:
		return checkProto(r, writer.(*protoSchema))
	}
	return nil
}

// incompat formats one finding as Confluent's verbose compatibility
// messages do.
func incompat(errorType, path, description string) string {
	if path == "" {
		path = "/"
	}
	return fmt.Sprintf("{errorType:'%s', path:'%s', description:'%s'}", errorType, path, description)
}

// normalizeJSON renders a JSON document compactly with object keys sorted
// (encoding/json sorts map keys), numbers kept as written.
func normalizeJSON(text string) (string, any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", nil, err
	}
	if dec.More() {
		return "", nil, errors.New("trailing data after the JSON document")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", nil, err
	}
	return strings.TrimSuffix(buf.String(), "\n"), v, nil
}
