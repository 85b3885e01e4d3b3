package registry

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/weirhq/weir/registry/schema"
)

// schemaResponse is GET /schemas/ids/{id}.
type schemaResponse struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
}

// versionResponse is a subject's version (GET .../versions/{v}, lookup).
type versionResponse struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
	Deleted    bool        `json:"deleted,omitempty"`
}

type subjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// typeName is schemaType as the API writes it: omitted for Avro.
func typeName(t schema.Type) string {
	if t == schema.Avro {
		return ""
	}
	return string(t)
}

func (r *Registry) getTypes(http.ResponseWriter, *http.Request) (any, error) {
	return schema.Types, nil
}

func parseID(req *http.Request) (int, error) {
	id, err := strconv.ParseInt(req.PathValue("id"), 10, 32)
	if err != nil || id <= 0 {
		return 0, errSchemaNotFound()
	}
	return int(id), nil
}

// byID returns the schema of id, if the request may read one subject
// using it (Confluent's SCHEMA_READ). Read lock held.
func (r *Registry) byID(req *http.Request) (*idSchema, error) {
	id, err := parseID(req)
	if err != nil {
		return nil, err
	}
	s, ok := r.st.ids[id]
	if !ok {
		return nil, errSchemaNotFound()
	}
	if r.cfg.Authorizer != nil {
		uses := r.usesOf(id, true)
		readable := false
		for _, sv := range uses {
			if r.allowed(req, SubjectRead, sv.Subject) {
				readable = true
				break
			}
		}
		if !readable {
			return nil, newError(http.StatusForbidden, CodeForbidden, "User is denied operation SCHEMA_READ on schema id %d", id)
		}
	}
	return s, nil
}

// readable keeps the subjects the request may read. Read lock held.
func (r *Registry) readable(req *http.Request, subjects []string) []string {
	if r.cfg.Authorizer == nil {
		return subjects
	}
	out := []string{}
	for _, s := range subjects {
		if r.allowed(req, SubjectRead, s) {
			out = append(out, s)
		}
	}
	return out
}

func (r *Registry) getSchemaByID(_ http.ResponseWriter, req *http.Request) (any, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, err := r.byID(req)
	if err != nil {
		return nil, err
	}
	return schemaResponse{Schema: s.text, SchemaType: typeName(s.typ), References: s.refs}, nil
}

func (r *Registry) getSchemaTextByID(_ http.ResponseWriter, req *http.Request) (any, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, err := r.byID(req)
	if err != nil {
		return nil, err
	}
	return rawText(s.text), nil
}

// usesOf lists the versions using id. Read lock held.
func (r *Registry) usesOf(id int, deleted bool) []subjectVersion {
	out := []subjectVersion{}
	for subject, vs := range r.st.subjects {
		for _, v := range vs {
			if v.id == id && (deleted || !v.deleted) {
				out = append(out, subjectVersion{subject, v.version})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Subject != out[j].Subject {
			return out[i].Subject < out[j].Subject
		}
		return out[i].Version < out[j].Version
	})
	return out
}

func (r *Registry) getSubjectsByID(_ http.ResponseWriter, req *http.Request) (any, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, err := r.byID(req)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, sv := range r.usesOf(s.id, boolParam(req, "deleted")) {
		if !r.allowed(req, SubjectRead, sv.Subject) {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != sv.Subject {
			out = append(out, sv.Subject)
		}
	}
	return out, nil
}

func (r *Registry) getVersionsByID(_ http.ResponseWriter, req *http.Request) (any, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, err := r.byID(req)
	if err != nil {
		return nil, err
	}
	out := []subjectVersion{}
	for _, sv := range r.usesOf(s.id, boolParam(req, "deleted")) {
		if r.allowed(req, SubjectRead, sv.Subject) {
			out = append(out, sv)
		}
	}
	return out, nil
}

func (r *Registry) getSubjects(_ http.ResponseWriter, req *http.Request) (any, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.readable(req, r.st.subjectNames(boolParam(req, "deleted"), req.URL.Query().Get("subjectPrefix"))), nil
}

func (r *Registry) versionResponse(v *version) versionResponse {
	s := r.st.ids[v.id]
	return versionResponse{Subject: v.subject, Version: v.version, ID: v.id, SchemaType: typeName(s.typ), References: s.refs, Schema: s.text, Deleted: v.deleted}
}

// getSchemas is GET /schemas: every version of every subject (latest only
// with latestOnly=true).
func (r *Registry) getSchemas(_ http.ResponseWriter, req *http.Request) (any, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	deleted, latestOnly := boolParam(req, "deleted"), boolParam(req, "latestOnly")
	out := []versionResponse{}
	for _, subject := range r.readable(req, r.st.subjectNames(deleted, req.URL.Query().Get("subjectPrefix"))) {
		vs := r.st.versions(subject, deleted)
		if latestOnly {
			vs = vs[len(vs)-1:]
		}
		for _, v := range vs {
			out = append(out, r.versionResponse(v))
		}
	}
	return out, nil
}

func (r *Registry) getVersions(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject, err := subjectOf(req)
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := r.st.versions(subject, boolParam(req, "deleted"))
	if len(vs) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = v.version
	}
	return out, nil
}

// findVersion resolves a version selector of subject. Read (or write)
// lock held.
func (st *state) findVersion(subject, sel string, deleted bool) (*version, error) {
	n, err := parseVersion(sel)
	if err != nil {
		return nil, err
	}
	all := st.subjects[subject]
	vs := st.versions(subject, deleted)
	if len(all) == 0 || (len(vs) == 0 && n == versionLatest) {
		return nil, errSubjectNotFound(subject)
	}
	if n == versionLatest {
		return vs[len(vs)-1], nil
	}
	for _, v := range vs {
		if v.version == n {
			return v, nil
		}
	}
	return nil, errVersionNotFound(subject, n)
}

// withVersion answers with fn applied to the version the request's subject
// and version selector name (soft-deleted ones too when deleted), under
// the read lock.
func (r *Registry) withVersion(req *http.Request, deleted bool, fn func(v *version) any) (any, error) {
	subject, err := subjectOf(req)
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, err := r.st.findVersion(subject, req.PathValue("version"), deleted)
	if err != nil {
		return nil, err
	}
	return fn(v), nil
}

func (r *Registry) getVersion(_ http.ResponseWriter, req *http.Request) (any, error) {
	return r.withVersion(req, boolParam(req, "deleted"), func(v *version) any { return r.versionResponse(v) })
}

func (r *Registry) getVersionText(_ http.ResponseWriter, req *http.Request) (any, error) {
	return r.withVersion(req, boolParam(req, "deleted"), func(v *version) any { return rawText(r.st.ids[v.id].text) })
}

func (r *Registry) getReferencedBy(_ http.ResponseWriter, req *http.Request) (any, error) {
	return r.withVersion(req, true, func(v *version) any {
		out := r.st.referencedBy(v.subject, v.version)
		if out == nil {
			out = []int{}
		}
		return out
	})
}
