package schema

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// defaultJSONBase is the base URL of a JSON schema without "$id": a
// reference named "address.json" resolves to defaultJSONBase's sibling.
const defaultJSONBase = "https://schema-registry.weir.invalid/schema.json"

// jsonSchema is a parsed JSON Schema: the decoded document (numbers as
// json.Number) and the documents of its references by resolved URL.
type jsonSchema struct {
	text       string
	normalized string
	doc        any
	compiled   *jsonschema.Schema
	refs       map[string]any
}

func (s *jsonSchema) Type() Type         { return JSON }
func (s *jsonSchema) Text() string       { return s.text }
func (s *jsonSchema) Normalized() string { return s.normalized }

// Validate checks a decoded JSON value (from jsonschema.UnmarshalJSON or
// json.Decoder with UseNumber) against a JSON Schema.
func ValidateJSON(s Schema, v any) error {
	js, ok := s.(*jsonSchema)
	if !ok {
		return fmt.Errorf("not a JSON schema: %s", s.Type())
	}
	return js.compiled.Validate(v)
}

func parseJSON(text string, refs []Reference) (Schema, error) {
	norm, doc, err := normalizeJSON(text)
	if err != nil {
		return nil, fmt.Errorf("json schema is not JSON: %v", err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("a JSON schema is an object or a boolean, got %T", doc)
	}
	base := defaultJSONBase
	if m, ok := doc.(map[string]any); ok {
		if id, ok := m["$id"].(string); ok && id != "" {
			base = id
		}
	}
	baseURL, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("$id %q: %v", base, err)
	}
	c := jsonschema.NewCompiler()
	// No loader: a schema may only reference what the request carries.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	docs := map[string]any{}
	for _, r := range refs {
		_, rdoc, err := normalizeJSON(r.Schema)
		if err != nil {
			return nil, fmt.Errorf("reference %q is not JSON: %v", r.Name, err)
		}
		u, err := baseURL.Parse(r.Name)
		if err != nil {
			return nil, fmt.Errorf("reference name %q: %v", r.Name, err)
		}
		if err := c.AddResource(u.String(), rdoc); err != nil {
			return nil, fmt.Errorf("reference %q: %v", r.Name, err)
		}
		docs[u.String()] = rdoc
		docs[r.Name] = rdoc
	}
	if err := c.AddResource(base, doc); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(base)
	if err != nil {
		return nil, err
	}
	return &jsonSchema{text: text, normalized: norm, doc: doc, compiled: compiled, refs: docs}, nil
}

// jsonChecker applies Confluent's JSON Schema compatibility rules: can
// every document valid under the writer schema be read under the reader
// schema? A missing keyword is the most permissive value (no type = any
// type; no additionalProperties = an open content model).
type jsonChecker struct {
	reader, writer *jsonSchema
	messages       []string
}

// maxJSONDepth bounds recursion through $ref cycles.
const maxJSONDepth = 64

func checkJSON(reader, writer *jsonSchema) []string {
	c := &jsonChecker{reader: reader, writer: writer}
	c.check(writer.doc, writer.doc, reader.doc, reader.doc, "#", 0)
	return c.messages
}

func (c *jsonChecker) fail(errorType, path, desc string) {
	c.messages = append(c.messages, incompat(errorType, path, desc))
}

// resolve follows $ref (a local JSON pointer or a reference's document)
// and returns the schema object (nil for the schema true) and its root.
func (c *jsonChecker) resolve(s *jsonSchema, v, root any) (map[string]any, any, bool) {
	for range maxJSONDepth {
		switch t := v.(type) {
		case bool:
			if t {
				return nil, root, true
			}
			return nil, root, false
		case map[string]any:
			ref, ok := t["$ref"].(string)
			if !ok {
				return t, root, true
			}
			if doc, ok := s.refs[ref]; ok {
				v, root = doc, doc
				continue
			}
			file, frag, _ := strings.Cut(ref, "#")
			if file != "" {
				doc, ok := s.refs[file]
				if !ok {
					return t, root, true
				}
				root = doc
			}
			v = jsonPointer(root, frag)
			if v == nil {
				return t, root, true
			}
		default:
			return nil, root, true
		}
	}
	return nil, root, true
}

func jsonPointer(root any, frag string) any {
	v := root
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[tok]
	}
	return v
}

func jsonTypes(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func jsonNumber(m map[string]any, key string) (float64, bool) {
	n, ok := m[key].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func canonical(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (c *jsonChecker) check(wv, wroot, rv, rroot any, path string, depth int) {
	if depth > maxJSONDepth {
		return
	}
	w, wroot, wok := c.resolve(c.writer, wv, wroot)
	r, rroot, rok := c.resolve(c.reader, rv, rroot)
	if !wok || (rok && r == nil) {
		return // the writer writes nothing, or the reader accepts anything
	}
	if !rok {
		c.fail("TYPE_NARROWED", path, "the new schema is false: it accepts no document the old schema allowed")
		return
	}
	if w == nil {
		w = map[string]any{}
	}

	// Rule TYPE_NARROWED: the reader must accept every type the writer may
	// write ("integer" is a "number").
	if rt := jsonTypes(r); rt != nil {
		wt := jsonTypes(w)
		if wt == nil {
			c.fail("TYPE_NARROWED", path, fmt.Sprintf("the new schema restricts the type to %v where the old schema allowed any", rt))
		} else {
			for _, t := range wt {
				if !slices.Contains(rt, t) && !(t == "integer" && slices.Contains(rt, "number")) {
					c.fail("TYPE_NARROWED", path, fmt.Sprintf("the new schema's type %v does not include the old schema's %q", rt, t))
				}
			}
		}
	}
	// Rule ENUM_ARRAY_NARROWED: every value the writer's enum allows.
	if renum, ok := r["enum"].([]any); ok {
		wenum, ok := w["enum"].([]any)
		if !ok {
			c.fail("ENUM_ARRAY_NARROWED", path+"/enum", "the new schema adds an enum where the old schema allowed any value")
		} else {
			for _, x := range wenum {
				if !slices.ContainsFunc(renum, func(y any) bool { return canonical(x) == canonical(y) }) {
					c.fail("ENUM_ARRAY_NARROWED", path+"/enum", fmt.Sprintf("the new schema's enum lacks %s", canonical(x)))
				}
			}
		}
	}
	if rc, ok := r["const"]; ok {
		if wc, ok := w["const"]; !ok || canonical(wc) != canonical(rc) {
			c.fail("CONST_CHANGED", path+"/const", "the new schema's const differs from the old schema")
		}
	}
	// Rules *_DECREASED / *_INCREASED / *_ADDED: bounds may only widen.
	for _, k := range []string{"maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum"} {
		if rn, ok := jsonNumber(r, k); ok {
			if wn, ok := jsonNumber(w, k); !ok {
				c.fail(strings.ToUpper(camelToSnake(k))+"_ADDED", path+"/"+k, fmt.Sprintf("the new schema adds %s", k))
			} else if rn < wn {
				c.fail(strings.ToUpper(camelToSnake(k))+"_DECREASED", path+"/"+k, fmt.Sprintf("the new schema decreases %s from %v to %v", k, wn, rn))
			}
		}
	}
	for _, k := range []string{"minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum"} {
		if rn, ok := jsonNumber(r, k); ok {
			if wn, ok := jsonNumber(w, k); !ok {
				c.fail(strings.ToUpper(camelToSnake(k))+"_ADDED", path+"/"+k, fmt.Sprintf("the new schema adds %s", k))
			} else if rn > wn {
				c.fail(strings.ToUpper(camelToSnake(k))+"_INCREASED", path+"/"+k, fmt.Sprintf("the new schema increases %s from %v to %v", k, wn, rn))
			}
		}
	}
	if rp, ok := r["pattern"].(string); ok {
		if wp, ok := w["pattern"].(string); !ok {
			c.fail("PATTERN_ADDED", path+"/pattern", "the new schema adds a pattern")
		} else if wp != rp {
			c.fail("PATTERN_CHANGED", path+"/pattern", "the new schema changes the pattern")
		}
	}
	c.checkObject(w, wroot, r, rroot, path, depth)
	if ri, ok := r["items"]; ok {
		wi, ok := w["items"]
		if !ok {
			wi = true
		}
		c.check(wi, wroot, ri, rroot, path+"/items", depth+1)
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		rs, ok := r[k].([]any)
		if !ok {
			continue
		}
		ws, ok := w[k].([]any)
		if !ok {
			ws = []any{w}
		}
		for i, wb := range ws {
			found := false
			for _, rb := range rs {
				sub := &jsonChecker{reader: c.reader, writer: c.writer}
				sub.check(wb, wroot, rb, rroot, path, depth+1)
				if len(sub.messages) == 0 {
					found = true
					break
				}
			}
			if !found {
				c.fail("COMBINED_TYPE_SUBSCHEMAS_CHANGED", fmt.Sprintf("%s/%s/%d", path, k, i), fmt.Sprintf("no branch of the new schema's %s reads the old schema's branch %d", k, i))
			}
		}
	}
}

// checkObject applies the rules of properties, required and
// additionalProperties ("content model": open when additionalProperties is
// absent or true, closed when false, partially open when a schema).
func (c *jsonChecker) checkObject(w map[string]any, wroot any, r map[string]any, rroot any, path string, depth int) {
	wprops, _ := w["properties"].(map[string]any)
	rprops, _ := r["properties"].(map[string]any)
	wadd, hasWAdd := w["additionalProperties"]
	radd, hasRAdd := r["additionalProperties"]
	if !hasWAdd {
		wadd = true
	}
	if !hasRAdd {
		radd = true
	}
	wclosed := wadd == false
	rclosed := radd == false

	wreq := map[string]bool{}
	if l, ok := w["required"].([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				wreq[s] = true
			}
		}
	}
	if l, ok := r["required"].([]any); ok {
		for _, x := range l {
			s, _ := x.(string)
			if !wreq[s] {
				if p, ok := rprops[s].(map[string]any); ok && p["default"] != nil {
					continue
				}
				c.fail("REQUIRED_PROPERTY_ADDED", path+"/required", fmt.Sprintf("the new schema requires property '%s' the old schema did not", s))
			}
		}
	}
	for _, name := range sortedKeys(rprops) {
		if _, ok := wprops[name]; ok {
			c.check(wprops[name], wroot, rprops[name], rroot, path+"/properties/"+name, depth+1)
			continue
		}
		switch {
		case wclosed:
			// The writer never wrote this property.
		case wadd == true:
			if rp, _, _ := c.resolve(c.reader, rprops[name], rroot); rp != nil && len(rp) > 0 {
				c.fail("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", path+"/properties/"+name, fmt.Sprintf("the new schema adds property '%s', which the old open content model allowed with any value", name))
			}
		default:
			sub := &jsonChecker{reader: c.reader, writer: c.writer}
			sub.check(wadd, wroot, rprops[name], rroot, path+"/properties/"+name, depth+1)
			if len(sub.messages) > 0 {
				c.fail("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path+"/properties/"+name, fmt.Sprintf("the new schema's property '%s' does not read what the old additionalProperties allowed", name))
			}
		}
	}
	for _, name := range sortedKeys(wprops) {
		if _, ok := rprops[name]; ok {
			continue
		}
		switch {
		case rclosed:
			c.fail("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", path+"/properties/"+name, fmt.Sprintf("the new schema removes property '%s' and allows no additional properties", name))
		case radd == true:
		default:
			sub := &jsonChecker{reader: c.reader, writer: c.writer}
			sub.check(wprops[name], wroot, radd, rroot, path+"/properties/"+name, depth+1)
			if len(sub.messages) > 0 {
				c.fail("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path+"/properties/"+name, fmt.Sprintf("the new schema removes property '%s' and its additionalProperties do not read it", name))
			}
		}
	}
	switch {
	case wclosed || radd == true:
	case rclosed:
		c.fail("ADDITIONAL_PROPERTIES_REMOVED", path+"/additionalProperties", "the new schema allows no additional properties where the old schema did")
	default:
		c.check(wadd, wroot, radd, rroot, path+"/additionalProperties", depth+1)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func camelToSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}
