package registry

import (
	"net/http"
	"strings"
)

// Authorization of the REST API. The registry does not authenticate: the
// server in front of Handler does (weir serve puts the broker's HTTP
// authentication there) and Config.Authorizer decides, per request, with
// the operations of Confluent's schema registry authorizers:
//
//	SubjectRead         GET  /subjects/{s}/versions[/{v}[/schema|/referencedby]]
//	                    POST /subjects/{s} (lookup)
//	                    POST /compatibility/subjects/{s}/versions[/{v}] (it changes nothing)
//	                    GET  /schemas/ids/{id}[/schema|/subjects|/versions]: allowed
//	                         when one subject using the id is readable (Confluent's
//	                         SCHEMA_READ); the lists name only readable subjects
//	                    GET  /subjects, GET /schemas: filtered to readable subjects
//	SubjectWrite        POST /subjects/{s}/versions (register)
//	SubjectDelete       DELETE /subjects/{s}, DELETE /subjects/{s}/versions/{v}
//	SubjectConfigRead   GET  /config/{s}, GET /mode/{s}
//	SubjectConfigWrite  PUT|DELETE /config/{s}, /mode/{s}
//	GlobalConfigRead    GET  /config, GET /mode
//	GlobalConfigWrite   PUT|DELETE /config, /mode
//
// GET /, /schemas/types and /contexts need no permission. A refused
// request is answered 403 with error code 40301 (Confluent's), whether the
// subject exists or not; a schema id that does not exist is 404 first.

// Action is what a request does to a subject or to the registry's global
// settings.
type Action int

const (
	SubjectRead Action = iota + 1
	SubjectWrite
	SubjectDelete
	SubjectConfigRead
	SubjectConfigWrite
	GlobalConfigRead
	GlobalConfigWrite
)

var actionNames = [...]string{"", "SUBJECT_READ", "SUBJECT_WRITE", "SUBJECT_DELETE",
	"SUBJECT_COMPATIBILITY_READ", "SUBJECT_COMPATIBILITY_WRITE", "GLOBAL_COMPATIBILITY_READ", "GLOBAL_COMPATIBILITY_WRITE"}

// String is Confluent's name of the operation.
func (a Action) String() string {
	if a > 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "UNKNOWN"
}

// Authorizer reports whether the request may perform action on subject
// ("" for the global actions). It must be safe for concurrent use.
type Authorizer func(req *http.Request, action Action, subject string) bool

// CodeForbidden is the error code of a refused request (HTTP 403).
const CodeForbidden = 40301

func errForbidden(a Action, subject string) *Error {
	if subject == "" {
		return newError(http.StatusForbidden, CodeForbidden, "User is denied operation %s on the registry", a)
	}
	return newError(http.StatusForbidden, CodeForbidden, "User is denied operation %s on subject: %s", a, subject)
}

// allowed applies Config.Authorizer (nil: everything allowed).
func (r *Registry) allowed(req *http.Request, a Action, subject string) bool {
	return r.cfg.Authorizer == nil || r.cfg.Authorizer(req, a, subject)
}

// routeAction is the action a route needs, from its subject path value:
// the per-subject action when the route names a subject, else the global
// one (0: none checked before the handler).
func routeAction(req *http.Request, perSubject, global Action) (Action, string) {
	if s := req.PathValue("subject"); s != "" {
		return perSubject, s
	}
	return global, ""
}

// TopicOfSubject is the topic a subject belongs to under the
// TopicNameStrategy ("<topic>-key", "<topic>-value"); any other subject
// (RecordNameStrategy, or a name without the suffix) is returned as it is.
// weir serve authorizes a subject as this topic.
func TopicOfSubject(subject string) string {
	if t, ok := strings.CutSuffix(subject, "-value"); ok && t != "" {
		return t
	}
	if t, ok := strings.CutSuffix(subject, "-key"); ok && t != "" {
		return t
	}
	return subject
}
