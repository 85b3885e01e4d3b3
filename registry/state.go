package registry

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/weirhq/weir/registry/schema"
)

// Mode is a registry or subject mode.
type Mode string

const (
	ReadWrite Mode = "READWRITE"
	ReadOnly  Mode = "READONLY"
	Import    Mode = "IMPORT"
)

// version is one registered version of a subject.
type version struct {
	subject string
	version int
	id      int
	deleted bool
}

// idSchema is the schema behind one id: its type, text and references.
// parsed is filled on first use and never changes after (a schema's
// references are immutable: a referenced version can't be deleted while
// referenced).
type idSchema struct {
	id     int
	typ    schema.Type
	text   string
	refs   []Reference
	key    string // identity: type, normalized text, references
	parsed schema.Schema
	users  int // versions (live or soft-deleted) using this id
}

// state is the registry as the log says it is: every record applied in
// offset order by apply. It is guarded by Registry.mu (apply with the write
// lock, queries with the read lock).
type state struct {
	subjects map[string][]*version // versions sorted by number
	ids      map[int]*idSchema
	byKey    map[string]*idSchema // identity → schema, for "same schema, same id"
	maxID    int
	configs  map[string]schema.Level // "" is global
	modes    map[string]Mode         // "" is global
	// applied is the offset of the last applied record (-1 for none).
	applied int64
}

func newState() *state {
	return &state{
		subjects: map[string][]*version{},
		ids:      map[int]*idSchema{},
		byKey:    map[string]*idSchema{},
		configs:  map[string]schema.Level{},
		modes:    map[string]Mode{},
		applied:  -1,
	}
}

// identity is what makes two registrations the same schema.
func identity(t schema.Type, normalized string, refs []Reference) string {
	var b strings.Builder
	b.WriteString(string(t))
	b.WriteByte(0)
	b.WriteString(normalized)
	for _, r := range refs {
		b.WriteByte(0)
		b.WriteString(string(mustJSON(r)))
	}
	return b.String()
}

// apply applies one record of the topic. Records it cannot read are
// skipped: the log is the authority, and a record this version does not
// understand must not stop the registry from serving the rest.
func (st *state) apply(key, value []byte, offset int64) {
	st.applied = offset
	var k recordKey
	if err := json.Unmarshal(key, &k); err != nil {
		return
	}
	subject := ""
	if k.Subject != nil {
		subject = *k.Subject
	}
	switch k.KeyType {
	case keySchema:
		if value == nil {
			st.removeVersion(subject, k.Version)
			return
		}
		var v schemaValue
		if json.Unmarshal(value, &v) != nil || v.Subject != subject || v.Version != k.Version || v.ID <= 0 {
			return
		}
		st.putVersion(&v)
	case keyConfig:
		var v configValue
		if value == nil || json.Unmarshal(value, &v) != nil {
			delete(st.configs, subject)
			return
		}
		if l, err := schema.ParseLevel(v.CompatibilityLevel); err == nil {
			st.configs[subject] = l
		}
	case keyMode:
		var v modeValue
		if value == nil || json.Unmarshal(value, &v) != nil {
			delete(st.modes, subject)
			return
		}
		if m, ok := parseMode(v.Mode); ok {
			st.modes[subject] = m
		}
	case keyMaxID:
		var v maxIDValue
		if value != nil && json.Unmarshal(value, &v) == nil && v.ID > st.maxID {
			st.maxID = v.ID
		}
	}
}

func parseMode(s string) (Mode, bool) {
	switch m := Mode(strings.ToUpper(s)); m {
	case ReadWrite, ReadOnly, Import:
		return m, true
	}
	return "", false
}

func (st *state) putVersion(v *schemaValue) {
	t, err := schema.ParseType(v.SchemaType)
	if err != nil {
		return
	}
	vs := st.subjects[v.Subject]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].version >= v.Version })
	if i < len(vs) && vs[i].version == v.Version {
		old := vs[i]
		if old.id != v.ID {
			st.release(old.id)
			st.use(v, t)
		}
		old.id, old.deleted = v.ID, v.Deleted
		return
	}
	st.use(v, t)
	vs = slices.Insert(vs, i, &version{subject: v.Subject, version: v.Version, id: v.ID, deleted: v.Deleted})
	st.subjects[v.Subject] = vs
}

// use counts one more version using v.ID, creating the id's entry.
func (st *state) use(v *schemaValue, t schema.Type) {
	if v.ID > st.maxID {
		st.maxID = v.ID
	}
	if s, ok := st.ids[v.ID]; ok {
		s.users++
		return
	}
	s := &idSchema{id: v.ID, typ: t, text: v.Schema, refs: v.References, users: 1}
	st.ids[v.ID] = s
	_, _ = st.parsed(s) // a schema that no longer parses keeps its id, without identity
}

func (st *state) release(id int) {
	s, ok := st.ids[id]
	if !ok {
		return
	}
	if s.users--; s.users <= 0 {
		delete(st.ids, id)
		if s.key != "" && st.byKey[s.key] == s {
			delete(st.byKey, s.key)
		}
	}
}

func (st *state) removeVersion(subject string, v int) {
	vs := st.subjects[subject]
	i := slices.IndexFunc(vs, func(x *version) bool { return x.version == v })
	if i < 0 {
		return
	}
	st.release(vs[i].id)
	vs = slices.Delete(vs, i, i+1)
	if len(vs) == 0 {
		delete(st.subjects, subject)
		return
	}
	st.subjects[subject] = vs
}

// live returns a subject's versions that are not soft-deleted (with
// deleted, all of them).
func (st *state) versions(subject string, deleted bool) []*version {
	var out []*version
	for _, v := range st.subjects[subject] {
		if deleted || !v.deleted {
			out = append(out, v)
		}
	}
	return out
}

func (st *state) subjectNames(deleted bool, prefix string) []string {
	out := []string{}
	for s := range st.subjects {
		if strings.HasPrefix(s, prefix) && len(st.versions(s, deleted)) > 0 {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// level is the compatibility level in force for subject.
func (st *state) level(subject string) schema.Level {
	if l, ok := st.configs[subject]; ok {
		return l
	}
	if l, ok := st.configs[""]; ok {
		return l
	}
	return schema.DefaultLevel
}

func (st *state) mode(subject string) Mode {
	if m, ok := st.modes[subject]; ok {
		return m
	}
	if m, ok := st.modes[""]; ok {
		return m
	}
	return ReadWrite
}

// referencedBy lists the ids of live or soft-deleted versions whose
// schemas reference subject/version.
func (st *state) referencedBy(subject string, version int) []int {
	var out []int
	for _, s := range st.ids {
		for _, r := range s.refs {
			if r.Subject == subject && r.Version == version {
				out = append(out, s.id)
				break
			}
		}
	}
	sort.Ints(out)
	return out
}

// maxReferenceDepth bounds chains of references (and breaks cycles, which
// the write path never creates but a hand-written topic could hold).
const maxReferenceDepth = 32

// resolve flattens refs into the parse input: every referenced schema,
// dependencies before dependents, each once. It fails on a reference to a
// version that does not exist.
func (st *state) resolve(refs []Reference) ([]schema.Reference, error) {
	var out []schema.Reference
	seen := map[[2]any]bool{}
	var walk func(refs []Reference, depth int) error
	walk = func(refs []Reference, depth int) error {
		if depth > maxReferenceDepth {
			return errInvalidSchema("references nest deeper than %d", maxReferenceDepth)
		}
		for _, r := range refs {
			s := st.versionSchema(r.Subject, r.Version)
			if s == nil {
				return errInvalidSchema("reference %q names subject '%s' version %d, which does not exist", r.Name, r.Subject, r.Version)
			}
			if err := walk(s.refs, depth+1); err != nil {
				return err
			}
			if k := [2]any{r.Name, s.id}; !seen[k] {
				seen[k] = true
				out = append(out, schema.Reference{Name: r.Name, Schema: s.text})
			}
		}
		return nil
	}
	if err := walk(refs, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// versionSchema is the schema of subject/version, soft-deleted or not.
func (st *state) versionSchema(subject string, v int) *idSchema {
	for _, x := range st.subjects[subject] {
		if x.version == v {
			return st.ids[x.id]
		}
	}
	return nil
}

// parsed returns s parsed (parsing it on first use) and records its
// identity. Write lock held, or read lock with s already parsed.
func (st *state) parsed(s *idSchema) (schema.Schema, error) {
	if s.parsed != nil {
		return s.parsed, nil
	}
	refs, err := st.resolve(s.refs)
	if err != nil {
		return nil, err
	}
	p, err := schema.Parse(s.typ, s.text, refs)
	if err != nil {
		return nil, err
	}
	s.parsed = p
	s.key = identity(s.typ, p.Normalized(), s.refs)
	if _, ok := st.byKey[s.key]; !ok {
		st.byKey[s.key] = s
	}
	return p, nil
}
