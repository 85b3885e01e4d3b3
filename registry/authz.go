package registry

import (
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
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

// KafkaACL is a Kafka ACL operation on the topic of an action's subject
// (TopicOfSubject), or on the cluster.
type KafkaACL struct {
	Op      kmsg.ACLOperation
	Cluster bool
}

// KafkaACLs maps the registry's actions onto Kafka ACLs, a subject standing
// for its topic; any one of an action's ACLs allows it:
//
//	SubjectRead        DESCRIBE on the topic (granted by READ and WRITE too)
//	SubjectWrite       WRITE on the topic
//	SubjectDelete      DELETE on the topic
//	SubjectConfigRead  DESCRIBE or DESCRIBE_CONFIGS on the topic
//	SubjectConfigWrite ALTER_CONFIGS on the topic
//	GlobalConfigRead   DESCRIBE or DESCRIBE_CONFIGS on the cluster
//	GlobalConfigWrite  ALTER_CONFIGS on the cluster
//
// Reading a level or mode takes DESCRIBE as well as DESCRIBE_CONFIGS
// because serializers read their subject's level before registering
// (kafkajs' @kafkajs/confluent-schema-registry reads GET /config/{s} and
// accepts only 200 or 404): a producer with WRITE must get through.
func KafkaACLs(a Action) []KafkaACL {
	switch a {
	case SubjectRead:
		return []KafkaACL{{Op: kmsg.ACLOperationDescribe}}
	case SubjectWrite:
		return []KafkaACL{{Op: kmsg.ACLOperationWrite}}
	case SubjectDelete:
		return []KafkaACL{{Op: kmsg.ACLOperationDelete}}
	case SubjectConfigRead:
		return []KafkaACL{{Op: kmsg.ACLOperationDescribe}, {Op: kmsg.ACLOperationDescribeConfigs}}
	case SubjectConfigWrite:
		return []KafkaACL{{Op: kmsg.ACLOperationAlterConfigs}}
	case GlobalConfigRead:
		return []KafkaACL{{Op: kmsg.ACLOperationDescribe, Cluster: true}, {Op: kmsg.ACLOperationDescribeConfigs, Cluster: true}}
	case GlobalConfigWrite:
		return []KafkaACL{{Op: kmsg.ACLOperationAlterConfigs, Cluster: true}}
	}
	return nil
}

// ACLAuthorizer is the Authorizer of the KafkaACLs mapping: allowed reports
// whether the request's principal holds op on topic (or on the cluster,
// topic then ""); it must be safe for concurrent use.
func ACLAuthorizer(allowed func(req *http.Request, op kmsg.ACLOperation, cluster bool, topic string) bool) Authorizer {
	return func(req *http.Request, a Action, subject string) bool {
		topic := TopicOfSubject(subject)
		for _, acl := range KafkaACLs(a) {
			t := topic
			if acl.Cluster {
				t = ""
			}
			if allowed(req, acl.Op, acl.Cluster, t) {
				return true
			}
		}
		return false
	}
}
