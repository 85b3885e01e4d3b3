package schema

import "testing"

// FuzzParse parses arbitrary text as each format and checks any two that
// parse against each other: errors, never panics.
func FuzzParse(f *testing.F) {
	f.Add(`{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"]}]}`, `"string"`)
	f.Add(`{"type":"object","properties":{"a":{"$ref":"#/definitions/x"}},"definitions":{"x":{"type":"integer"}}}`, `{"enum":[1,2]}`)
	f.Add(`syntax = "proto3"; message M { int32 a = 1; oneof o { string b = 2; } }`, `syntax = "proto2"; message M { required int32 a = 1; }`)
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, typ := range Types {
			x, err1 := Parse(typ, a, nil)
			y, err2 := Parse(typ, b, nil)
			if err1 != nil || err2 != nil {
				continue
			}
			_ = CheckLevel(FullTransitive, x, []Schema{y, x})
		}
	})
}
