package registry

import (
	"net/http"

	"github.com/weirhq/weir/registry/schema"
)

// checkWritable refuses writes to a READONLY subject (or registry).
func (st *state) checkWritable(subject string) error {
	if st.mode(subject) == ReadOnly {
		return errNotPermitted("Subject %s is in read-only mode", subject)
	}
	return nil
}

// checkUnreferenced refuses deleting a version other schemas reference.
func (st *state) checkUnreferenced(subject string, v int) error {
	if ids := st.referencedBy(subject, v); len(ids) > 0 {
		return newError(http.StatusUnprocessableEntity, CodeReferenceExists, "One or more references exist to the schema {subject=%s,version=%d}: ids %v", subject, v, ids)
	}
	return nil
}

// deleteRecords are the records that soft-delete (deleted=true) or
// permanently delete (tombstone, plus MAXID so the id is never handed out
// again) the versions vs.
func (st *state) deleteRecords(vs []*version, permanent bool) []record {
	var recs []record
	for _, v := range vs {
		if permanent {
			recs = append(recs, schemaTombstone(v.subject, v.version))
			continue
		}
		s := st.ids[v.id]
		recs = append(recs, schemaRecord(&schemaValue{Subject: v.subject, Version: v.version, ID: v.id, SchemaType: typeName(s.typ), References: s.refs, Schema: s.text, Deleted: true}))
	}
	if permanent {
		recs = append(recs, record{encodeKey(keyMaxID, nil, 0), mustJSON(maxIDValue{st.maxID})})
	}
	return recs
}

func (r *Registry) deleteSubject(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject, err := subjectOf(req)
	if err != nil {
		return nil, err
	}
	permanent := boolParam(req, "permanent")
	var deleted []int
	err = r.write(req.Context(), func(st *state) ([]record, error) {
		deleted = []int{}
		if err := st.checkWritable(subject); err != nil {
			return nil, err
		}
		all, live := st.subjects[subject], st.versions(subject, false)
		if len(all) == 0 {
			return nil, errSubjectNotFound(subject)
		}
		var target []*version
		if permanent {
			if len(live) > 0 {
				return nil, newError(http.StatusNotFound, CodeSubjectNotSoftDeleted, "Subject '%s' was not deleted first before being permanently deleted", subject)
			}
			target = all
		} else {
			if len(live) == 0 {
				return nil, newError(http.StatusNotFound, CodeSubjectSoftDeleted, "Subject '%s' was soft deleted.Set permanent=true to delete permanently", subject)
			}
			target = live
		}
		for _, v := range target {
			if err := st.checkUnreferenced(subject, v.version); err != nil {
				return nil, err
			}
			deleted = append(deleted, v.version)
		}
		recs := st.deleteRecords(target, permanent)
		if permanent {
			// The subject is gone: so are its level and mode.
			if _, ok := st.configs[subject]; ok {
				recs = append(recs, record{encodeKey(keyConfig, &subject, 0), nil})
			}
			if _, ok := st.modes[subject]; ok {
				recs = append(recs, record{encodeKey(keyMode, &subject, 0), nil})
			}
		}
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return deleted, nil
}

func (r *Registry) deleteVersion(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject, err := subjectOf(req)
	if err != nil {
		return nil, err
	}
	sel := req.PathValue("version")
	if _, err := parseVersion(sel); err != nil {
		return nil, err
	}
	permanent := boolParam(req, "permanent")
	var deleted int
	err = r.write(req.Context(), func(st *state) ([]record, error) {
		if err := st.checkWritable(subject); err != nil {
			return nil, err
		}
		v, err := st.findVersion(subject, sel, permanent)
		if err != nil {
			if e, ok := err.(*Error); ok && e.Code == CodeVersionNotFound && !permanent {
				// Not live: soft-deleted already, or absent.
				if n, _ := parseVersion(sel); st.versionSchema(subject, n) != nil {
					return nil, newError(http.StatusNotFound, CodeVersionSoftDeleted, "Subject '%s' Version %s was soft deleted.Set permanent=true to delete permanently", subject, sel)
				}
			}
			return nil, err
		}
		if permanent && !v.deleted {
			return nil, newError(http.StatusNotFound, CodeVersionNotSoftDeleted, "Subject '%s' Version %d was not deleted first before being permanently deleted", subject, v.version)
		}
		if err := st.checkUnreferenced(subject, v.version); err != nil {
			return nil, err
		}
		deleted = v.version
		return st.deleteRecords([]*version{v}, permanent), nil
	})
	if err != nil {
		return nil, err
	}
	return deleted, nil
}

// configRequest is PUT /config; the response echoes it.
type configRequest struct {
	Compatibility string `json:"compatibility"`
}

type configResponse struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

func optionalSubject(req *http.Request) (string, error) {
	if req.PathValue("subject") == "" {
		return "", nil // the global resource
	}
	return subjectOf(req)
}

// getSetting answers GET of a per-subject setting (level or mode): the
// subject's own (notSet if it has none, unless defaultToGlobal), or the
// one in force globally.
func getSetting[T ~string](r *Registry, req *http.Request, own func(*state) map[string]T, inForce func(*state, string) T, notSet func(subject string) *Error) (T, error) {
	subject, err := optionalSubject(req)
	if err != nil {
		return "", err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if subject != "" && !boolParam(req, "defaultToGlobal") {
		v, ok := own(r.st)[subject]
		if !ok {
			return "", notSet(subject)
		}
		return v, nil
	}
	return inForce(r.st, subject), nil
}

// deleteSetting removes a subject's (or the global) setting of keyType and
// returns the one that was in force. A subject without one is 40401.
func deleteSetting[T ~string](r *Registry, req *http.Request, keyType string, own func(*state) map[string]T, inForce func(*state, string) T, writable bool) (T, error) {
	subject, err := optionalSubject(req)
	if err != nil {
		return "", err
	}
	var prev T
	err = r.write(req.Context(), func(st *state) ([]record, error) {
		if writable {
			if err := st.checkWritable(subject); err != nil {
				return nil, err
			}
		}
		prev = inForce(st, subject)
		if _, ok := own(st)[subject]; !ok {
			if subject != "" {
				return nil, errSubjectNotFound(subject)
			}
			return nil, nil
		}
		return []record{{encodeKey(keyType, subjectPtr(subject), 0), nil}}, nil
	})
	return prev, err
}

func configsOf(st *state) map[string]schema.Level { return st.configs }
func modesOf(st *state) map[string]Mode           { return st.modes }

func (r *Registry) getConfig(_ http.ResponseWriter, req *http.Request) (any, error) {
	l, err := getSetting(r, req, configsOf, (*state).level, func(subject string) *Error {
		return newError(http.StatusNotFound, CodeSubjectCompatNotSet, "Subject '%s' does not have subject-level compatibility configured", subject)
	})
	if err != nil {
		return nil, err
	}
	return configResponse{string(l)}, nil
}
func (r *Registry) putConfig(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject, err := optionalSubject(req)
	if err != nil {
		return nil, err
	}
	var cr configRequest
	if err := decodeBody(req, &cr); err != nil {
		return nil, err
	}
	l, err := schema.ParseLevel(cr.Compatibility)
	if err != nil {
		return nil, newError(http.StatusUnprocessableEntity, CodeInvalidCompatibilityLevel, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
	}
	err = r.write(req.Context(), func(st *state) ([]record, error) {
		if err := st.checkWritable(subject); err != nil {
			return nil, err
		}
		if cur, ok := st.configs[subject]; ok && cur == l {
			return nil, nil
		}
		return []record{{encodeKey(keyConfig, subjectPtr(subject), 0), mustJSON(configValue{string(l)})}}, nil
	})
	if err != nil {
		return nil, err
	}
	return configRequest{string(l)}, nil
}

func (r *Registry) deleteConfig(_ http.ResponseWriter, req *http.Request) (any, error) {
	prev, err := deleteSetting(r, req, keyConfig, configsOf, (*state).level, true)
	if err != nil {
		return nil, err
	}
	// Confluent's documentation names the field "compatibility" and its
	// server writes "compatibilityLevel": clients read one or the other.
	return struct {
		configResponse
		configRequest
	}{configResponse{string(prev)}, configRequest{string(prev)}}, nil
}

type modeBody struct {
	Mode string `json:"mode"`
}

func (r *Registry) getMode(_ http.ResponseWriter, req *http.Request) (any, error) {
	m, err := getSetting(r, req, modesOf, (*state).mode, func(subject string) *Error {
		return newError(http.StatusNotFound, CodeSubjectModeNotSet, "Subject '%s' does not have subject-level mode configured", subject)
	})
	if err != nil {
		return nil, err
	}
	return modeBody{string(m)}, nil
}
func (r *Registry) putMode(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject, err := optionalSubject(req)
	if err != nil {
		return nil, err
	}
	var mb modeBody
	if err := decodeBody(req, &mb); err != nil {
		return nil, err
	}
	m, ok := parseMode(mb.Mode)
	if !ok {
		return nil, newError(http.StatusUnprocessableEntity, CodeInvalidMode, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT")
	}
	force := boolParam(req, "force")
	err = r.write(req.Context(), func(st *state) ([]record, error) {
		if m == Import && !force {
			// Importing keeps the source's ids: only into an empty
			// registry (or subject), unless forced.
			if (subject == "" && len(st.subjects) > 0) || (subject != "" && len(st.subjects[subject]) > 0) {
				return nil, errNotPermitted("Cannot import since found existing subjects")
			}
		}
		if cur, ok := st.modes[subject]; ok && cur == m {
			return nil, nil
		}
		return []record{{encodeKey(keyMode, subjectPtr(subject), 0), mustJSON(modeValue{string(m)})}}, nil
	})
	if err != nil {
		return nil, err
	}
	return modeBody{string(m)}, nil
}

func (r *Registry) deleteMode(_ http.ResponseWriter, req *http.Request) (any, error) {
	prev, err := deleteSetting(r, req, keyMode, modesOf, (*state).mode, false)
	if err != nil {
		return nil, err
	}
	return modeBody{string(prev)}, nil
}
