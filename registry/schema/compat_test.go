package schema

import (
	"strings"
	"testing"
)

// compatCase is one documented compatibility case: the schemas registered
// so far (oldest first), the new schema, the level, and whether the
// registry must accept it. rule names the errorType expected when refused.
type compatCase struct {
	name     string
	typ      Type
	previous []string
	next     string
	level    Level
	ok       bool
	rule     string
}

func runCompat(t *testing.T, cases []compatCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parse := func(s string) Schema {
				t.Helper()
				p, err := Parse(c.typ, s, nil)
				if err != nil {
					t.Fatalf("parse %s: %v", s, err)
				}
				return p
			}
			var prev []Schema
			for _, s := range c.previous {
				prev = append(prev, parse(s))
			}
			msgs := CheckLevel(c.level, parse(c.next), prev)
			if c.ok != (len(msgs) == 0) {
				t.Fatalf("%s: compatible=%v, want %v; messages: %v", c.level, len(msgs) == 0, c.ok, msgs)
			}
			if !c.ok && c.rule != "" && !strings.Contains(strings.Join(msgs, " "), "'"+c.rule+"'") {
				t.Fatalf("messages %v do not name rule %s", msgs, c.rule)
			}
		})
	}
}

func avroRecord(fields string) string {
	return `{"type":"record","name":"R","namespace":"ex","fields":[` + fields + `]}`
}

func TestAvroCompatibility(t *testing.T) {
	const (
		a        = `{"name":"a","type":"int"}`
		aLong    = `{"name":"a","type":"long"}`
		aString  = `{"name":"a","type":"string"}`
		aBytes   = `{"name":"a","type":"bytes"}`
		aUnion   = `{"name":"a","type":["null","int"]}`
		bDefault = `{"name":"b","type":"string","default":"x"}`
		bNoDef   = `{"name":"b","type":"string"}`
		enum2    = `{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}`
		enum3    = `{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}}`
		enum3Def = `{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}}`
		fixed4   = `{"name":"f","type":{"type":"fixed","name":"F","size":4}}`
		fixed8   = `{"name":"f","type":{"type":"fixed","name":"F","size":8}}`
	)
	r := avroRecord
	cases := []compatCase{
		{"adding a field with a default is backward compatible", Avro, []string{r(a)}, r(a + "," + bDefault), Backward, true, ""},
		{"adding a field without a default is backward incompatible", Avro, []string{r(a)}, r(a + "," + bNoDef), Backward, false, "READER_FIELD_MISSING_DEFAULT_VALUE"},
		{"adding a field without a default is forward compatible", Avro, []string{r(a)}, r(a + "," + bNoDef), Forward, true, ""},
		{"removing a field is backward compatible", Avro, []string{r(a + "," + bNoDef)}, r(a), Backward, true, ""},
		{"removing a field without a default is forward incompatible", Avro, []string{r(a + "," + bNoDef)}, r(a), Forward, false, "READER_FIELD_MISSING_DEFAULT_VALUE"},
		{"removing a field with a default is forward compatible", Avro, []string{r(a + "," + bDefault)}, r(a), Forward, true, ""},
		{"removing a field with a default is fully compatible", Avro, []string{r(a + "," + bDefault)}, r(a), Full, true, ""},
		{"adding a field without a default is not fully compatible", Avro, []string{r(a)}, r(a + "," + bNoDef), Full, false, "READER_FIELD_MISSING_DEFAULT_VALUE"},
		{"int promoted to long is backward compatible", Avro, []string{r(a)}, r(aLong), Backward, true, ""},
		{"long narrowed to int is backward incompatible", Avro, []string{r(aLong)}, r(a), Backward, false, "TYPE_MISMATCH"},
		{"int promoted to long is forward incompatible", Avro, []string{r(a)}, r(aLong), Forward, false, "TYPE_MISMATCH"},
		{"string to bytes is fully compatible", Avro, []string{r(aString)}, r(aBytes), Full, true, ""},
		{"int to string is backward incompatible", Avro, []string{r(a)}, r(aString), Backward, false, "TYPE_MISMATCH"},
		{"a type widened to a union with it is backward compatible", Avro, []string{r(a)}, r(aUnion), Backward, true, ""},
		{"a union narrowed to one branch is backward incompatible", Avro, []string{r(aUnion)}, r(a), Backward, false, "TYPE_MISMATCH"},
		{"removing a union branch is backward incompatible", Avro, []string{r(`{"name":"a","type":["null","int","string"]}`)}, r(aUnion), Backward, false, "MISSING_UNION_BRANCH"},
		{"adding a union branch is backward compatible", Avro, []string{r(aUnion)}, r(`{"name":"a","type":["null","int","string"]}`), Backward, true, ""},
		{"adding an enum symbol is backward compatible", Avro, []string{r(enum2)}, r(enum3), Backward, true, ""},
		{"adding an enum symbol is forward incompatible", Avro, []string{r(enum2)}, r(enum3), Forward, false, "MISSING_ENUM_SYMBOLS"},
		{"removing an enum symbol is backward incompatible", Avro, []string{r(enum3)}, r(enum2), Backward, false, "MISSING_ENUM_SYMBOLS"},
		{"an enum default absorbs removed symbols", Avro, []string{r(enum3)}, r(enum3Def), Backward, true, ""},
		{"changing a fixed size is incompatible", Avro, []string{r(fixed4)}, r(fixed8), Backward, false, "FIXED_SIZE_MISMATCH"},
		{"renaming a field with an alias is backward compatible", Avro, []string{r(a)}, r(`{"name":"z","aliases":["a"],"type":"int"}`), Backward, true, ""},
		{"renaming a field without an alias or default is backward incompatible", Avro, []string{r(a)}, r(`{"name":"z","type":"int"}`), Backward, false, "READER_FIELD_MISSING_DEFAULT_VALUE"},
		{"renaming a record is incompatible", Avro, []string{r(a)}, `{"type":"record","name":"Q","namespace":"ex","fields":[` + a + `]}`, Backward, false, "NAME_MISMATCH"},
		{"renaming a record with an alias is backward compatible", Avro, []string{r(a)}, `{"type":"record","name":"Q","namespace":"ex","aliases":["ex.R"],"fields":[` + a + `]}`, Backward, true, ""},
		{"changing a primitive schema's type is incompatible", Avro, []string{`"string"`}, `"int"`, Backward, false, "TYPE_MISMATCH"},
		{"NONE accepts anything", Avro, []string{`"string"`}, `"int"`, None, true, ""},
		// Confluent's transitive example: v3 drops the default v2 added.
		{"BACKWARD checks only the latest version", Avro, []string{r(a), r(a + "," + bDefault)}, r(a + "," + bNoDef), Backward, true, ""},
		{"BACKWARD_TRANSITIVE checks every version", Avro, []string{r(a), r(a + "," + bDefault)}, r(a + "," + bNoDef), BackwardTransitive, false, "READER_FIELD_MISSING_DEFAULT_VALUE"},
		{"FORWARD_TRANSITIVE checks every version", Avro, []string{r(a + "," + bNoDef), r(a + "," + bDefault)}, r(a), ForwardTransitive, false, "READER_FIELD_MISSING_DEFAULT_VALUE"},
		{"FORWARD checks only the latest version", Avro, []string{r(a + "," + bNoDef), r(a + "," + bDefault)}, r(a), Forward, true, ""},
		{"FULL_TRANSITIVE checks both ways against every version", Avro, []string{r(a), r(a + "," + bDefault)}, r(a + "," + bNoDef), FullTransitive, false, "READER_FIELD_MISSING_DEFAULT_VALUE"},
		{"recursive records compare without looping", Avro,
			[]string{`{"type":"record","name":"N","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","N"]}]}`},
			`{"type":"record","name":"N","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","N"]}]}`, Backward, true, ""},
		{"arrays compare their items", Avro, []string{`{"type":"array","items":"long"}`}, `{"type":"array","items":"int"}`, Backward, false, "TYPE_MISMATCH"},
		{"maps compare their values", Avro, []string{`{"type":"map","values":"int"}`}, `{"type":"map","values":"double"}`, Backward, true, ""},
	}
	runCompat(t, cases)
}

func TestJSONSchemaCompatibility(t *testing.T) {
	obj := func(props, extra string) string {
		return `{"type":"object","properties":{` + props + `}` + extra + `}`
	}
	const (
		a       = `"a":{"type":"string"}`
		b       = `"b":{"type":"integer"}`
		closed  = `,"additionalProperties":false`
		reqB    = `,"required":["b"]`
		partial = `,"additionalProperties":{"type":"integer"}`
	)
	cases := []compatCase{
		{"adding an optional property to a closed content model is backward compatible", JSON, []string{obj(a, closed)}, obj(a+","+b, closed), Backward, true, ""},
		{"adding a property to an open content model is backward incompatible", JSON, []string{obj(a, "")}, obj(a+","+b, ""), Backward, false, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"},
		{"removing a property from an open content model is backward compatible", JSON, []string{obj(a+","+b, "")}, obj(a, ""), Backward, true, ""},
		{"removing a property from a closed content model is backward incompatible", JSON, []string{obj(a+","+b, closed)}, obj(a, closed), Backward, false, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"},
		{"removing a property covered by a partially open model is backward compatible", JSON, []string{obj(a+","+b, partial)}, obj(a, partial), Backward, true, ""},
		{"adding a property covered by a partially open model is backward compatible", JSON, []string{obj(a, partial)}, obj(a+","+b, partial), Backward, true, ""},
		{"adding a property not covered by a partially open model is backward incompatible", JSON, []string{obj(a, partial)}, obj(a+`,"c":{"type":"string"}`, partial), Backward, false, "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"},
		{"adding a required property is backward incompatible", JSON, []string{obj(a+","+b, closed)}, obj(a+","+b, closed+reqB), Backward, false, "REQUIRED_PROPERTY_ADDED"},
		{"removing a required constraint is backward compatible", JSON, []string{obj(a+","+b, closed+reqB)}, obj(a+","+b, closed), Backward, true, ""},
		{"narrowing a type is backward incompatible", JSON, []string{`{"type":["string","null"]}`}, `{"type":"string"}`, Backward, false, "TYPE_NARROWED"},
		{"extending a type is backward compatible", JSON, []string{`{"type":"string"}`}, `{"type":["string","null"]}`, Backward, true, ""},
		{"integer to number is backward compatible", JSON, []string{`{"type":"integer"}`}, `{"type":"number"}`, Backward, true, ""},
		{"number to integer is backward incompatible", JSON, []string{`{"type":"number"}`}, `{"type":"integer"}`, Backward, false, "TYPE_NARROWED"},
		{"extending an enum is backward compatible", JSON, []string{`{"enum":["a","b"]}`}, `{"enum":["a","b","c"]}`, Backward, true, ""},
		{"narrowing an enum is backward incompatible", JSON, []string{`{"enum":["a","b"]}`}, `{"enum":["a"]}`, Backward, false, "ENUM_ARRAY_NARROWED"},
		{"narrowing an enum is forward compatible", JSON, []string{`{"enum":["a","b"]}`}, `{"enum":["a"]}`, Forward, true, ""},
		{"decreasing maxLength is backward incompatible", JSON, []string{`{"type":"string","maxLength":10}`}, `{"type":"string","maxLength":5}`, Backward, false, "MAX_LENGTH_DECREASED"},
		{"increasing maxLength is backward compatible", JSON, []string{`{"type":"string","maxLength":5}`}, `{"type":"string","maxLength":10}`, Backward, true, ""},
		{"increasing minimum is backward incompatible", JSON, []string{`{"type":"integer","minimum":0}`}, `{"type":"integer","minimum":1}`, Backward, false, "MINIMUM_INCREASED"},
		{"closing an open content model is backward incompatible", JSON, []string{obj(a, "")}, obj(a, closed), Backward, false, "ADDITIONAL_PROPERTIES_REMOVED"},
		{"opening a closed content model is backward compatible", JSON, []string{obj(a, closed)}, obj(a, ""), Backward, true, ""},
		{"a changed property type is backward incompatible", JSON, []string{obj(a, "")}, obj(`"a":{"type":"integer"}`, ""), Backward, false, "TYPE_NARROWED"},
		{"properties behind $ref are compared", JSON,
			[]string{`{"definitions":{"A":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/definitions/A"}}}`},
			`{"definitions":{"A":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/definitions/A"}}}`, Backward, false, "TYPE_NARROWED"},
		{"array items are compared", JSON, []string{`{"type":"array","items":{"type":"number"}}`}, `{"type":"array","items":{"type":"integer"}}`, Backward, false, "TYPE_NARROWED"},
		{"a oneOf that keeps every branch is backward compatible", JSON, []string{`{"oneOf":[{"type":"string"},{"type":"integer"}]}`}, `{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]}`, Backward, true, ""},
		{"a oneOf that drops a branch is backward incompatible", JSON, []string{`{"oneOf":[{"type":"string"},{"type":"integer"}]}`}, `{"oneOf":[{"type":"string"}]}`, Backward, false, "COMBINED_TYPE_SUBSCHEMAS_CHANGED"},
		{"FULL refuses a change incompatible one way", JSON, []string{`{"enum":["a","b"]}`}, `{"enum":["a","b","c"]}`, Full, false, "ENUM_ARRAY_NARROWED"},
	}
	runCompat(t, cases)
}

func TestProtobufCompatibility(t *testing.T) {
	msg := func(body string) string {
		return `syntax = "proto3"; package ex; message M { ` + body + ` }`
	}
	const (
		a = `int32 a = 1;`
		b = `string b = 2;`
	)
	cases := []compatCase{
		{"adding a field is backward compatible", Protobuf, []string{msg(a)}, msg(a + b), Backward, true, ""},
		{"removing a field is backward compatible", Protobuf, []string{msg(a + b)}, msg(a), Backward, true, ""},
		{"adding and removing fields is fully compatible", Protobuf, []string{msg(a + b)}, msg(a + `bool c = 3;`), FullTransitive, true, ""},
		{"renaming a field is compatible", Protobuf, []string{msg(a)}, msg(`int32 renamed = 1;`), Full, true, ""},
		{"int32 to int64 is compatible", Protobuf, []string{msg(a)}, msg(`int64 a = 1;`), Full, true, ""},
		{"int32 to string is incompatible", Protobuf, []string{msg(a)}, msg(`string a = 1;`), Backward, false, "FIELD_SCALAR_KIND_CHANGED"},
		{"int32 to sint32 is incompatible", Protobuf, []string{msg(a)}, msg(`sint32 a = 1;`), Backward, false, "FIELD_SCALAR_KIND_CHANGED"},
		{"string to bytes is compatible", Protobuf, []string{msg(b)}, msg(`bytes b = 2;`), Backward, true, ""},
		{"a scalar to a message is incompatible", Protobuf, []string{msg(a)}, msg(`N a = 1; message N { int32 x = 1; }`), Backward, false, "FIELD_KIND_CHANGED"},
		{"changing a field's message type is incompatible", Protobuf,
			[]string{msg(`N a = 1; message N { int32 x = 1; } message O { int32 y = 1; }`)},
			msg(`O a = 1; message N { int32 x = 1; } message O { int32 y = 1; }`), Backward, false, "FIELD_NAMED_TYPE_CHANGED"},
		{"removing a message is incompatible", Protobuf, []string{msg(a) + ` message Other { int32 x = 1; }`}, msg(a), Backward, false, "MESSAGE_REMOVED"},
		{"adding a message is backward compatible", Protobuf, []string{msg(a)}, msg(a) + ` message Other { int32 x = 1; }`, Backward, true, ""},
		{"reusing a reserved field number is incompatible", Protobuf, []string{msg(a + `reserved 2;`)}, msg(a + `bool c = 2;`), Backward, false, "RESERVED_FIELD_REUSED"},
		{"reusing a reserved field name is incompatible", Protobuf, []string{msg(a + `reserved "old";`)}, msg(a + `bool old = 3;`), Backward, false, "RESERVED_FIELD_REUSED"},
		{"a removed field's number reserved is compatible", Protobuf, []string{msg(a + b)}, msg(a + `reserved 2;`), Full, true, ""},
		{"moving a field into an existing oneof is incompatible", Protobuf, []string{msg(a + `oneof o { string x = 5; }`)}, msg(`oneof o { string x = 5; int32 a = 1; }`), Backward, false, "FIELD_MOVED_TO_EXISTING_ONEOF"},
		{"moving one field into a new oneof is compatible", Protobuf, []string{msg(a)}, msg(`oneof o { int32 a = 1; }`), Backward, true, ""},
		{"moving several fields into a new oneof is incompatible", Protobuf, []string{msg(a + b)}, msg(`oneof o { int32 a = 1; string b = 2; }`), Backward, false, "MULTIPLE_FIELDS_MOVED_TO_ONEOF"},
		{"changing the package is incompatible", Protobuf, []string{msg(a)}, `syntax = "proto3"; package other; message M { int32 a = 1; }`, Backward, false, "PACKAGE_CHANGED"},
		{"repeated to singular is incompatible", Protobuf, []string{msg(`repeated int32 a = 1;`)}, msg(a), Backward, false, "FIELD_LABEL_CHANGED"},
		{"adding a required field is incompatible (proto2)", Protobuf, []string{`syntax = "proto2"; message M { optional int32 a = 1; }`}, `syntax = "proto2"; message M { optional int32 a = 1; required int32 b = 2; }`, Backward, false, "REQUIRED_FIELD_ADDED"},
		{"removing a required field is incompatible (proto2)", Protobuf, []string{`syntax = "proto2"; message M { optional int32 a = 1; required int32 b = 2; }`}, `syntax = "proto2"; message M { optional int32 a = 1; }`, Backward, false, "REQUIRED_FIELD_REMOVED"},
		{"adding an enum value is compatible", Protobuf, []string{msg(`E e = 1; enum E { A = 0; }`)}, msg(`E e = 1; enum E { A = 0; B = 1; }`), Full, true, ""},
		{"a map's value type change is incompatible", Protobuf, []string{msg(`map<string, int32> m = 1;`)}, msg(`map<string, string> m = 1;`), Backward, false, "FIELD_SCALAR_KIND_CHANGED"},
		{"nested messages are compared", Protobuf, []string{msg(`N n = 1; message N { int32 x = 1; }`)}, msg(`N n = 1; message N { string x = 1; }`), Backward, false, "FIELD_SCALAR_KIND_CHANGED"},
	}
	runCompat(t, cases)
}

func TestParseReferencesAndNormalize(t *testing.T) {
	// Avro: a named type from a reference.
	addr := `{"type":"record","name":"Address","namespace":"ex","fields":[{"name":"city","type":"string"}]}`
	if _, err := Parse(Avro, `{"type":"record","name":"P","fields":[{"name":"a","type":"ex.Address"}]}`, []Reference{{Name: "ex.Address", Schema: addr}}); err != nil {
		t.Fatalf("avro with a reference: %v", err)
	}
	if _, err := Parse(Avro, `{"type":"record","name":"P","fields":[{"name":"a","type":"ex.Address"}]}`, nil); err == nil {
		t.Fatal("avro with an unresolved name parsed")
	}
	// JSON Schema: $ref to a referenced document by name.
	if _, err := Parse(JSON, `{"type":"object","properties":{"a":{"$ref":"address.json"}}}`, []Reference{{Name: "address.json", Schema: `{"type":"string"}`}}); err != nil {
		t.Fatalf("json with a reference: %v", err)
	}
	if _, err := Parse(JSON, `{"type":"object","properties":{"a":{"$ref":"missing.json"}}}`, nil); err == nil {
		t.Fatal("json with a missing reference parsed")
	}
	// Protobuf: an import from a reference.
	dep := `syntax = "proto3"; package dep; message D { int32 x = 1; }`
	if _, err := Parse(Protobuf, `syntax = "proto3"; import "dep.proto"; import "google/protobuf/timestamp.proto"; message M { dep.D d = 1; google.protobuf.Timestamp t = 2; }`, []Reference{{Name: "dep.proto", Schema: dep}}); err != nil {
		t.Fatalf("protobuf with a reference: %v", err)
	}
	if _, err := Parse(Protobuf, `syntax = "proto3"; import "dep.proto"; message M { dep.D d = 1; }`, nil); err == nil {
		t.Fatal("protobuf with a missing import parsed")
	}
	// Normalized forms ignore whitespace and key order.
	x, _ := Parse(Avro, `{"type": "record", "name": "R", "fields": []}`, nil)
	y, _ := Parse(Avro, `{"fields":[],"name":"R","type":"record"}`, nil)
	if x.Normalized() != y.Normalized() {
		t.Fatalf("normalized forms differ: %q vs %q", x.Normalized(), y.Normalized())
	}
	p1, _ := Parse(Protobuf, `syntax = "proto3"; message M { int32 a = 1; }`, nil)
	p2, _ := Parse(Protobuf, "syntax = \"proto3\";\n// comment\nmessage M {\n  int32 a = 1;\n}\n", nil)
	if p1.Normalized() != p2.Normalized() {
		t.Fatal("protobuf normalized forms differ for the same file")
	}
}

// TestProtobufDescriptorSchema: a schema given as a base64
// FileDescriptorProto (as some serializers register them) parses, and is
// the same schema as its .proto text.
func TestProtobufDescriptorSchema(t *testing.T) {
	// message M { int64 id = 1; string item = 2; } in package weir.compat,
	// proto3, serialized by Python's descriptor_pool (no json_name).
	const b64 = "CgtvcmRlci5wcm90bxILd2Vpci5jb21wYXQiIQoFT3JkZXISCgoCaWQYASABKAMSDAoEaXRlbRgCIAEoCWIGcHJvdG8z"
	d, err := Parse(Protobuf, b64, nil)
	if err != nil {
		t.Fatalf("descriptor schema: %v", err)
	}
	if m := ProtoFileOf(d).Messages().Get(0); m.FullName() != "weir.compat.Order" || m.Fields().Len() != 2 {
		t.Fatalf("descriptor schema parsed as %s with %d fields", m.FullName(), m.Fields().Len())
	}
	text, err := Parse(Protobuf, `syntax = "proto3"; package weir.compat; message Order { int64 id = 1; string item = 2; }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := CheckLevel(FullTransitive, d, []Schema{text}); len(msgs) > 0 {
		t.Fatalf("descriptor and text of one file differ: %v", msgs)
	}
	if d.Normalized() != text.Normalized() {
		t.Fatal("descriptor and text of one file normalize differently")
	}
}
