package srcodec

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
)

// JSONSchema returns a codec for T encoded with encoding/json, each value
// validated against schema (a JSON Schema registered under subject) before
// it is written. Decode reads records written with any registered JSON
// schema; with ValidateOnDecode it validates each against its writer
// schema.
func JSONSchema[T any](reg *Registry, subject, schema string, opts ...Opt) (*JSONSchemaCodec[T], error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	compiled, err := compileJSONSchema(schema)
	if err != nil {
		return nil, err
	}
	return &JSONSchemaCodec[T]{reg: reg, subject: subject, text: schema, schema: compiled, opts: o}, nil
}

// JSONSchemaCodec is the codec JSONSchema returns: a stream.Codec[T].
type JSONSchemaCodec[T any] struct {
	reg     *Registry
	subject string
	text    string
	schema  *jsonschema.Schema
	opts    options
	id      writerID
	writers perID[*jsonschema.Schema]
}

func compileJSONSchema(text string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
	if err != nil {
		return nil, fmt.Errorf("srcodec: json schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no network, no files
	const url = "urn:weir:srcodec:schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("srcodec: json schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("srcodec: json schema: %w", err)
	}
	return s, nil
}

func validateJSON(s *jsonschema.Schema, payload []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}

// Encode validates v against the codec's schema and writes it.
func (c *JSONSchemaCodec[T]) Encode(v T) ([]byte, error) {
	id, err := c.id.get(c.reg, c.subject, sr.Schema{Schema: c.text, Type: sr.TypeJSON}, c.opts.autoRegister)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("srcodec: json encode: %w", err)
	}
	if err := validateJSON(c.schema, payload); err != nil {
		return nil, fmt.Errorf("srcodec: value does not match the JSON schema: %w", err)
	}
	return append(AppendHeader(make([]byte, 0, 5+len(payload)), id, nil), payload...), nil
}

// Decode reads a record written with any JSON schema of the registry.
func (c *JSONSchemaCodec[T]) Decode(b []byte) (T, error) {
	var v T
	id, payload, err := DecodeHeader(b)
	if err != nil {
		return v, err
	}
	writer, err := c.writers.get(id, func() (*jsonschema.Schema, error) {
		ws, err := c.reg.SchemaByID(id)
		if err != nil {
			return nil, err
		}
		if ws.Type != sr.TypeJSON {
			return nil, fmt.Errorf("%w: schema %d is %s, want JSON", ErrSchemaType, id, ws.Type)
		}
		if !c.opts.validateOnDecode {
			return nil, nil
		}
		return compileJSONSchema(ws.Schema)
	})
	if err != nil {
		return v, err
	}
	if writer != nil {
		if err := validateJSON(writer, payload); err != nil {
			return v, fmt.Errorf("srcodec: value does not match its writer schema %d: %w", id, err)
		}
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		return v, fmt.Errorf("srcodec: json decode (schema id %d): %w", id, err)
	}
	return v, nil
}
