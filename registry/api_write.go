package registry

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/weirhq/weir/registry/schema"
)

// registerRequest is the body of POST /subjects/{s}/versions, of the
// lookup POST /subjects/{s} and of the compatibility checks.
type registerRequest struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []Reference `json:"references"`
	// ID and Version are honoured in IMPORT mode only.
	ID      int `json:"id"`
	Version int `json:"version"`
}

// candidate is a request's schema, parsed against the current state.
type candidate struct {
	typ    schema.Type
	text   string
	refs   []Reference
	parsed schema.Schema
	key    string
}

// DecodeRegisterRequest reads a register/lookup/check body: one JSON object
// with a non-empty schema of at most maxSchema bytes, a known schemaType and
// well-formed references. It is the request decoder the fuzz target drives.
func DecodeRegisterRequest(body []byte, maxSchema int) (*registerRequest, error) {
	var rr registerRequest
	if err := decodeJSON(body, &rr); err != nil {
		return nil, err
	}
	if rr.Schema == "" {
		return nil, errInvalidSchema("the request has no schema")
	}
	if len(rr.Schema) > maxSchema {
		return nil, newError(http.StatusUnprocessableEntity, CodeInvalidSchema, "Invalid schema: the schema is %d bytes, the limit is %d", len(rr.Schema), maxSchema)
	}
	if _, err := schema.ParseType(rr.SchemaType); err != nil {
		return nil, errInvalidSchema("%v", err)
	}
	for _, ref := range rr.References {
		if ref.Name == "" || ref.Subject == "" || ref.Version <= 0 && ref.Version != versionLatest {
			return nil, errInvalidSchema("reference %+v needs a name, a subject and a version", ref)
		}
		if err := checkSubject(ref.Subject); err != nil {
			return nil, err
		}
	}
	// Clients send -1 (or 0) for "no explicit id or version".
	rr.ID, rr.Version = max(rr.ID, 0), max(rr.Version, 0)
	return &rr, nil
}

// readRegisterRequest reads the subject and the body of a register,
// lookup or compatibility request.
func (r *Registry) readRegisterRequest(req *http.Request) (string, *registerRequest, error) {
	subject, err := subjectOf(req)
	if err != nil {
		return "", nil, err
	}
	var raw rawJSON
	if err := decodeBody(req, &raw); err != nil {
		return "", nil, err
	}
	rr, err := DecodeRegisterRequest(raw, r.cfg.MaxSchemaBytes)
	return subject, rr, err
}

// rawJSON keeps a body as read after checking it is one JSON value.
type rawJSON []byte

func (j *rawJSON) UnmarshalJSON(b []byte) error {
	*j = append((*j)[:0], b...)
	return nil
}

// parse parses the request's schema against st (references resolved,
// "latest" pinned to a number). State lock held.
func (st *state) parse(rr *registerRequest) (*candidate, error) {
	t, _ := schema.ParseType(rr.SchemaType)
	refs := slices.Clone(rr.References)
	for i, ref := range refs {
		if ref.Version == versionLatest {
			vs := st.versions(ref.Subject, false)
			if len(vs) == 0 {
				return nil, errInvalidSchema("reference %q: subject '%s' has no versions", ref.Name, ref.Subject)
			}
			refs[i].Version = vs[len(vs)-1].version
		}
	}
	resolved, err := st.resolve(refs)
	if err != nil {
		return nil, err
	}
	p, err := schema.Parse(t, rr.Schema, resolved)
	if err != nil {
		return nil, errInvalidSchema("%v", err)
	}
	return &candidate{typ: t, text: rr.Schema, refs: refs, parsed: p, key: identity(t, p.Normalized(), refs)}, nil
}

// liveSchemas are the parsed live versions of subject, oldest first.
func (st *state) liveSchemas(subject string) ([]schema.Schema, []*version, error) {
	var out []schema.Schema
	vs := st.versions(subject, false)
	for _, v := range vs {
		p, err := st.parsed(st.ids[v.id])
		if err != nil {
			return nil, nil, errStore(fmt.Errorf("stored schema id %d no longer parses: %v", v.id, err))
		}
		out = append(out, p)
	}
	return out, vs, nil
}

func (r *Registry) register(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject, rr, err := r.readRegisterRequest(req)
	if err != nil {
		return nil, err
	}
	normalize := boolParam(req, "normalize")
	var id int
	err = r.write(req.Context(), func(st *state) ([]record, error) {
		mode := st.mode(subject)
		if mode == ReadOnly {
			return nil, errNotPermitted("Subject %s is in read-only mode", subject)
		}
		if (rr.ID > 0 || rr.Version > 0) && mode != Import {
			return nil, errNotPermitted("Registering a schema with an explicit id or version needs IMPORT mode; subject %s is in %s mode", subject, mode)
		}
		c, err := st.parse(rr)
		if err != nil {
			return nil, err
		}
		if normalize {
			c.text = c.parsed.Normalized()
			if c.typ == schema.Protobuf {
				c.text = rr.Schema // the normalized Protobuf form is binary: keep the text
			}
		}
		// The same schema already under this subject: its id, nothing written.
		for _, v := range st.versions(subject, false) {
			if s := st.ids[v.id]; s.key == c.key && (rr.ID == 0 || rr.ID == s.id) {
				id = s.id
				return nil, nil
			}
		}
		var recs []record
		if mode == Import {
			if rr.ID == 0 {
				return nil, errNotPermitted("Subject %s is in IMPORT mode: a schema id is required", subject)
			}
			if s, ok := st.ids[rr.ID]; ok && s.key != c.key {
				return nil, newError(http.StatusUnprocessableEntity, CodeIDDoesNotMatch, "Overwrite new schema with id %d is not permitted: the id holds another schema", rr.ID)
			}
			id = rr.ID
		} else {
			prev, _, err := st.liveSchemas(subject)
			if err != nil {
				return nil, err
			}
			if msgs := schema.CheckLevel(st.level(subject), c.parsed, prev); len(msgs) > 0 {
				return nil, incompatibleError(msgs, st.level(subject))
			}
			if s, ok := st.byKey[c.key]; ok {
				id = s.id
			} else {
				id = st.maxID + 1
			}
		}
		ver := 1
		if all := st.subjects[subject]; len(all) > 0 {
			ver = all[len(all)-1].version + 1
		}
		if rr.Version > 0 {
			if st.versionSchema(subject, rr.Version) != nil {
				return nil, errNotPermitted("Version %d of subject %s already exists", rr.Version, subject)
			}
			ver = rr.Version
		}
		recs = append(recs, schemaRecord(&schemaValue{Subject: subject, Version: ver, ID: id, SchemaType: typeName(c.typ), References: c.refs, Schema: c.text}))
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return struct {
		ID int `json:"id"`
	}{id}, nil
}

func incompatibleError(msgs []string, l schema.Level) *Error {
	e := newError(http.StatusConflict, CodeIncompatibleSchema, "Schema being registered is incompatible with an earlier schema for subject, details: %v; compatibility: '%s'", msgs, l)
	return e
}

// lookup is POST /subjects/{s}: the version of subject holding the schema.
func (r *Registry) lookup(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject, rr, err := r.readRegisterRequest(req)
	if err != nil {
		return nil, err
	}
	deleted := boolParam(req, "deleted")
	r.mu.Lock() // parse may record identities of stored schemas
	defer r.mu.Unlock()
	if len(r.st.versions(subject, deleted)) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	c, err := r.st.parse(rr)
	if err != nil {
		return nil, err
	}
	for _, v := range r.st.versions(subject, deleted) {
		if r.st.ids[v.id].key == c.key {
			return r.versionResponse(v), nil
		}
	}
	return nil, errSchemaNotFound()
}

func (r *Registry) checkCompatibility(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject, rr, err := r.readRegisterRequest(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.st.parse(rr)
	if err != nil {
		return nil, err
	}
	level := r.st.level(subject)
	prev, vs, err := r.st.liveSchemas(subject)
	if err != nil {
		return nil, err
	}
	var msgs []string
	if sel := req.PathValue("version"); sel != "" {
		v, err := r.st.findVersion(subject, sel, false)
		if err != nil {
			if e := (*Error)(nil); errors.As(err, &e) && e.Code == CodeSubjectNotFound {
				// Nothing to be compatible with.
				return compatResponse{IsCompatible: true}, nil
			}
			return nil, err
		}
		i := slices.Index(vs, v)
		if level != schema.None && i >= 0 {
			// Against one version: the level's direction, not its transitivity.
			base := schema.Level(trimTransitive(level))
			msgs = schema.CheckLevel(base, c.parsed, prev[i:i+1])
		}
	} else {
		msgs = schema.CheckLevel(level, c.parsed, prev)
	}
	resp := compatResponse{IsCompatible: len(msgs) == 0}
	if boolParam(req, "verbose") {
		resp.Messages = append([]string{}, msgs...)
		if len(msgs) > 0 {
			resp.Messages = append(resp.Messages, fmt.Sprintf("{compatibility: '%s'}", level))
		}
	}
	return resp, nil
}

type compatResponse struct {
	IsCompatible bool     `json:"is_compatible"`
	Messages     []string `json:"messages,omitempty"`
}

func trimTransitive(l schema.Level) string {
	s := string(l)
	if n := len(s) - len("_TRANSITIVE"); n > 0 && s[n:] == "_TRANSITIVE" {
		return s[:n]
	}
	return s
}
