package schema

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/hamba/avro/v2"
)

// avroSchema is a parsed Avro schema. Named types from references are
// resolved through one SchemaCache per parse, never the package default.
type avroSchema struct {
	text       string
	normalized string
	parsed     avro.Schema
}

func (s *avroSchema) Type() Type         { return Avro }
func (s *avroSchema) Text() string       { return s.text }
func (s *avroSchema) Normalized() string { return s.normalized }

// Avro returns the hamba/avro schema of an Avro Schema (nil for others).
func AvroOf(s Schema) avro.Schema {
	if a, ok := s.(*avroSchema); ok {
		return a.parsed
	}
	return nil
}

func parseAvro(text string, refs []Reference) (Schema, error) {
	norm, _, err := normalizeJSON(text)
	if err != nil {
		return nil, fmt.Errorf("avro schema is not JSON: %v", err)
	}
	cache := &avro.SchemaCache{}
	for _, r := range refs {
		if _, err := avro.ParseWithCache(r.Schema, "", cache); err != nil {
			return nil, fmt.Errorf("reference %q: %v", r.Name, err)
		}
	}
	p, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, err
	}
	return &avroSchema{text: text, normalized: norm, parsed: p}, nil
}

// avroChecker applies the Avro specification's schema resolution rules
// (reader vs writer). seen breaks recursion through named types: a pair of
// named types already under check is assumed compatible, its findings are
// reported where it was first reached.
type avroChecker struct {
	seen     map[[2]string]bool
	messages []string
}

func checkAvro(reader, writer *avroSchema) []string {
	c := &avroChecker{seen: map[[2]string]bool{}}
	c.check(reader.parsed, writer.parsed, "")
	return c.messages
}

func (c *avroChecker) fail(errorType, path, desc string) {
	c.messages = append(c.messages, incompat(errorType, path, desc))
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// readable reports, without recording findings, whether data of writer
// can be read as reader (used to choose a union branch).
func (c *avroChecker) readable(reader, writer avro.Schema) bool {
	sub := &avroChecker{seen: c.seen}
	sub.check(reader, writer, "")
	return len(sub.messages) == 0
}

func (c *avroChecker) check(reader, writer avro.Schema, path string) {
	reader, writer = deref(reader), deref(writer)
	rt, wt := reader.Type(), writer.Type()

	// Rule: a writer union is readable when every branch is readable.
	if wt == avro.Union {
		for i, b := range writer.(*avro.UnionSchema).Types() {
			if ru, ok := reader.(*avro.UnionSchema); ok {
				if !slices.ContainsFunc(ru.Types(), func(r avro.Schema) bool { return c.readable(r, b) }) {
					c.fail("MISSING_UNION_BRANCH", path+"/"+strconv.Itoa(i),
						fmt.Sprintf("the new schema is missing a type inside a union field at path '%s/%d' in the old schema", path, i))
				}
				continue
			}
			c.check(reader, b, path+"/"+strconv.Itoa(i))
		}
		return
	}
	// Rule: a reader union reads a writer type one of its branches reads.
	if rt == avro.Union {
		for _, b := range reader.(*avro.UnionSchema).Types() {
			if c.readable(b, writer) {
				return
			}
		}
		c.fail("MISSING_UNION_BRANCH", path, fmt.Sprintf("the new schema has a union at path '%s' with no branch reading the old type %s", path, wt))
		return
	}
	if rt != wt {
		if avroPromotes(wt, rt) {
			return
		}
		c.fail("TYPE_MISMATCH", path, fmt.Sprintf("the type (path '%s') of a field in the new schema (%s) does not match with the old schema (%s)", path, rt, wt))
		return
	}
	switch r := reader.(type) {
	case *avro.ArraySchema:
		c.check(r.Items(), writer.(*avro.ArraySchema).Items(), path+"/items")
	case *avro.MapSchema:
		c.check(r.Values(), writer.(*avro.MapSchema).Values(), path+"/values")
	case *avro.FixedSchema:
		w := writer.(*avro.FixedSchema)
		if c.sameName(r, w, path) && r.Size() != w.Size() {
			c.fail("FIXED_SIZE_MISMATCH", path+"/size", fmt.Sprintf("the size of FIXED type field at path '%s/size' in the new schema (%d) does not match the old schema (%d)", path, r.Size(), w.Size()))
		}
	case *avro.EnumSchema:
		w := writer.(*avro.EnumSchema)
		if !c.sameName(r, w, path) || r.HasDefault() {
			return // Rule: a reader enum default absorbs unknown symbols.
		}
		var missing []string
		for _, s := range w.Symbols() {
			if !slices.Contains(r.Symbols(), s) {
				missing = append(missing, s)
			}
		}
		if len(missing) > 0 {
			c.fail("MISSING_ENUM_SYMBOLS", path+"/symbols", fmt.Sprintf("the new schema is missing enum symbols '%v' at path '%s/symbols' in the old schema", missing, path))
		}
	case *avro.RecordSchema:
		w := writer.(*avro.RecordSchema)
		if !c.sameName(r, w, path) {
			return
		}
		key := [2]string{r.FullName(), w.FullName()}
		if c.seen[key] {
			return
		}
		c.seen[key] = true
		for i, rf := range r.Fields() {
			fpath := path + "/fields/" + strconv.Itoa(i)
			wf := writerField(w, rf)
			if wf == nil {
				// Rule: a reader field the writer lacks needs a default.
				if !rf.HasDefault() {
					c.fail("READER_FIELD_MISSING_DEFAULT_VALUE", fpath, fmt.Sprintf("the field '%s' at path '%s' in the new schema has no default value and is missing in the old schema", rf.Name(), fpath))
				}
				continue
			}
			c.check(rf.Type(), wf.Type(), fpath+"/type")
		}
	}
}

// writerField finds the writer's field for a reader field: same name, or a
// name listed in the reader field's aliases.
func writerField(w *avro.RecordSchema, rf *avro.Field) *avro.Field {
	for _, f := range w.Fields() {
		if f.Name() == rf.Name() {
			return f
		}
	}
	for _, f := range w.Fields() {
		if slices.Contains(rf.Aliases(), f.Name()) {
			return f
		}
	}
	return nil
}

// sameName applies the rule that named types resolve by full name or by an
// alias of the reader naming the writer.
func (c *avroChecker) sameName(r, w avro.NamedSchema, path string) bool {
	if r.FullName() == w.FullName() || r.Name() == w.Name() && (r.Namespace() == "" || w.Namespace() == "") ||
		slices.Contains(r.Aliases(), w.FullName()) || slices.Contains(r.Aliases(), w.Name()) {
		return true
	}
	c.fail("NAME_MISMATCH", path+"/name", fmt.Sprintf("the name of the schema has changed (path '%s/name'): '%s' was '%s'", path, r.FullName(), w.FullName()))
	return false
}

// avroPromotes is the specification's table of promotions a reader may
// apply to a writer's primitive.
func avroPromotes(writer, reader avro.Type) bool {
	switch writer {
	case avro.Int:
		return reader == avro.Long || reader == avro.Float || reader == avro.Double
	case avro.Long:
		return reader == avro.Float || reader == avro.Double
	case avro.Float:
		return reader == avro.Double
	case avro.String:
		return reader == avro.Bytes
	case avro.Bytes:
		return reader == avro.String
	}
	return false
}
