package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ContentType is the registry's response media type.
const ContentType = "application/vnd.schemaregistry.v1+json"

// requestTypes are the request media types accepted (Confluent's list);
// a request without Content-Type is read as JSON too.
var requestTypes = map[string]bool{
	"application/vnd.schemaregistry.v1+json": true,
	"application/vnd.schemaregistry+json":    true,
	"application/json":                       true,
	"application/octet-stream":               true,
}

// Handler serves the REST API.
//
// Behavior:
//   - every response body is JSON (ContentType) except the /schema raw
//     endpoints; errors are {"error_code": N, "message": "..."} with the
//     HTTP status of their code (404 for 404xx, 422 for 422xx, ...).
//   - request bodies larger than Config.MaxRequestBytes: 413; bodies that
//     are not one JSON value of the expected shape: 400; a request
//     Content-Type other than the registry's JSON types: 415.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range r.routes() {
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, req *http.Request) {
			if a, subject := routeAction(req, rt.perSubject, rt.global); a != 0 && !r.allowed(req, a, subject) {
				writeError(w, errForbidden(a, subject))
				return
			}
			if req.Body != nil && req.ContentLength != 0 {
				if ct := req.Header.Get("Content-Type"); ct != "" {
					mt, _, err := mime.ParseMediaType(ct)
					if err != nil || !requestTypes[mt] {
						writeError(w, newError(http.StatusUnsupportedMediaType, 415, "HTTP 415 Unsupported Media Type: %q", ct))
						return
					}
				}
				req.Body = http.MaxBytesReader(w, req.Body, r.cfg.MaxRequestBytes)
			}
			v, err := rt.fn(w, req)
			if err != nil {
				writeError(w, err)
				return
			}
			if raw, ok := v.(rawText); ok {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = io.WriteString(w, string(raw))
				return
			}
			writeJSON(w, http.StatusOK, v)
		})
	}
	return mux
}

// route is one endpoint of the API and the authorization it needs
// (authz.go): perSubject on the path's subject, or global without one,
// checked before fn; a route with neither is public or checkedByHandler.
type route struct {
	pattern          string
	perSubject       Action
	global           Action
	checkedByHandler bool // fn filters its answer or checks per schema id
	fn               func(w http.ResponseWriter, req *http.Request) (any, error)
}

func (r *Registry) routes() []route {
	const none = Action(0)
	rs := []route{
		{"GET /{$}", none, none, false, func(http.ResponseWriter, *http.Request) (any, error) { return struct{}{}, nil }},
		{"GET /schemas/types", none, none, false, r.getTypes},
		{"GET /schemas", none, none, true, r.getSchemas},
		{"GET /schemas/ids/{id}", none, none, true, r.getSchemaByID},
		{"GET /schemas/ids/{id}/schema", none, none, true, r.getSchemaTextByID},
		{"GET /schemas/ids/{id}/subjects", none, none, true, r.getSubjectsByID},
		{"GET /schemas/ids/{id}/versions", none, none, true, r.getVersionsByID},
		{"GET /subjects", none, none, true, r.getSubjects},
		{"POST /subjects/{subject}", SubjectRead, none, false, r.lookup},
		{"DELETE /subjects/{subject}", SubjectDelete, none, false, r.deleteSubject},
		{"GET /subjects/{subject}/versions", SubjectRead, none, false, r.getVersions},
		{"POST /subjects/{subject}/versions", SubjectWrite, none, false, r.register},
		{"GET /subjects/{subject}/versions/{version}", SubjectRead, none, false, r.getVersion},
		{"GET /subjects/{subject}/versions/{version}/schema", SubjectRead, none, false, r.getVersionText},
		{"GET /subjects/{subject}/versions/{version}/referencedby", SubjectRead, none, false, r.getReferencedBy},
		{"DELETE /subjects/{subject}/versions/{version}", SubjectDelete, none, false, r.deleteVersion},
		{"POST /compatibility/subjects/{subject}/versions/{version}", SubjectRead, none, false, r.checkCompatibility},
		{"POST /compatibility/subjects/{subject}/versions", SubjectRead, none, false, r.checkCompatibility},
		{"GET /contexts", none, none, false, func(http.ResponseWriter, *http.Request) (any, error) { return []string{"."}, nil }},
		{"/", none, none, false, func(http.ResponseWriter, *http.Request) (any, error) {
			return nil, newError(http.StatusNotFound, 404, "HTTP 404 Not Found")
		}},
	}
	for _, res := range []struct {
		path          string
		get, put, del func(http.ResponseWriter, *http.Request) (any, error)
	}{{"/config", r.getConfig, r.putConfig, r.deleteConfig}, {"/mode", r.getMode, r.putMode, r.deleteMode}} {
		for _, p := range []string{res.path, res.path + "/{subject}"} {
			rs = append(rs,
				route{"GET " + p, SubjectConfigRead, GlobalConfigRead, false, res.get},
				route{"PUT " + p, SubjectConfigWrite, GlobalConfigWrite, false, res.put},
				route{"DELETE " + p, SubjectConfigWrite, GlobalConfigWrite, false, res.del})
		}
	}
	return rs
}

// rawText is a handler result served as text (the /schema endpoints).
type rawText string

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, newError(500, 500, "encoding the response: %v", err))
		return
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = newError(http.StatusInternalServerError, 50001, "%v", err)
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, e)
}

// decodeBody reads one JSON object into v. Unknown fields are ignored (as
// the Confluent registry ignores them); anything else is a 400, or a 413
// for a body over the limit.
func decodeBody(req *http.Request, v any) error {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return newError(http.StatusRequestEntityTooLarge, 413, "request body larger than %d bytes", mbe.Limit)
		}
		return newError(http.StatusBadRequest, 400, "reading the request body: %v", err)
	}
	return decodeJSON(body, v)
}

func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return newError(http.StatusBadRequest, 400, "the request body is empty; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return newError(http.StatusBadRequest, 400, "the request body is not valid JSON of the expected shape: %v", err)
	}
	if dec.More() {
		return newError(http.StatusBadRequest, 400, "the request body holds more than one JSON value")
	}
	return nil
}

// maxSubjectBytes bounds a subject name (a topic name of 249 bytes plus a
// record name under TopicRecordNameStrategy fits).
const maxSubjectBytes = 1024

// checkSubject rejects subject names the registry will not store: empty,
// too long, not UTF-8, or holding control characters.
func checkSubject(s string) error {
	switch {
	case s == "":
		return newError(http.StatusUnprocessableEntity, CodeInvalidSubject, "Invalid subject: the subject name is empty")
	case len(s) > maxSubjectBytes:
		return newError(http.StatusUnprocessableEntity, CodeInvalidSubject, "Invalid subject: the subject name is %d bytes, the limit is %d", len(s), maxSubjectBytes)
	case !utf8.ValidString(s):
		return newError(http.StatusUnprocessableEntity, CodeInvalidSubject, "Invalid subject: the subject name is not valid UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return newError(http.StatusUnprocessableEntity, CodeInvalidSubject, "Invalid subject %q: control characters are not allowed", s)
	}
	return nil
}

func subjectOf(req *http.Request) (string, error) {
	s := req.PathValue("subject")
	return s, checkSubject(s)
}

func boolParam(req *http.Request, name string) bool {
	v, _ := strconv.ParseBool(req.URL.Query().Get(name))
	return v
}

// versionLatest is the "latest" (or -1) version selector.
const versionLatest = -1

func parseVersion(s string) (int, error) {
	if s == "latest" {
		return versionLatest, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v == 0 || v < -1 {
		return 0, errInvalidVersion(s)
	}
	return int(v), nil
}
