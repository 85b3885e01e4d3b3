package registry

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an API error: the HTTP status and the Confluent error code and
// message the response body carries ({"error_code": ..., "message": ...}).
type Error struct {
	Status  int    `json:"-"`
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// The Confluent Schema Registry's error codes.
const (
	CodeSubjectNotFound           = 40401
	CodeVersionNotFound           = 40402
	CodeSchemaNotFound            = 40403
	CodeSubjectSoftDeleted        = 40404
	CodeSubjectNotSoftDeleted     = 40405
	CodeVersionSoftDeleted        = 40406
	CodeVersionNotSoftDeleted     = 40407
	CodeSubjectCompatNotSet       = 40408
	CodeSubjectModeNotSet         = 40409
	CodeIncompatibleSchema        = 409
	CodeInvalidSchema             = 42201
	CodeInvalidVersion            = 42202
	CodeInvalidCompatibilityLevel = 42203
	CodeInvalidMode               = 42204
	CodeOperationNotPermitted     = 42205
	CodeReferenceExists           = 42206
	CodeIDDoesNotMatch            = 42207
	CodeInvalidSubject            = 42208
	CodeStoreError                = 50001
	CodeOperationTimeout          = 50002
	CodeRequestForwardingFailed   = 50003
)

func newError(status, code int, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func errSubjectNotFound(s string) *Error {
	return newError(http.StatusNotFound, CodeSubjectNotFound, "Subject '%s' not found.", s)
}

func errVersionNotFound(s string, v int) *Error {
	return newError(http.StatusNotFound, CodeVersionNotFound, "Version %d not found for subject '%s'.", v, s)
}

func errSchemaNotFound() *Error {
	return newError(http.StatusNotFound, CodeSchemaNotFound, "Schema not found")
}

func errInvalidSchema(format string, args ...any) *Error {
	return newError(http.StatusUnprocessableEntity, CodeInvalidSchema, "Invalid schema: "+format, args...)
}

func errInvalidVersion(v string) *Error {
	return newError(http.StatusUnprocessableEntity, CodeInvalidVersion,
		"The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", v)
}

func errNotPermitted(format string, args ...any) *Error {
	return newError(http.StatusUnprocessableEntity, CodeOperationNotPermitted, format, args...)
}

func errStore(err error) *Error {
	return newError(http.StatusInternalServerError, CodeStoreError, "Error while writing to the schemas topic: %v", err)
}

// asError is errors.As for *Error.
func asError(err error, target **Error) bool { return errors.As(err, target) }
