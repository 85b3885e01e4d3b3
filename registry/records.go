package registry

import (
	"encoding/json"
	"fmt"
)

// The records of the _schemas topic, in the layout of the Confluent Schema
// Registry's own topic. The key decides what a record updates, and the
// topic is compacted on it, so keys are encoded by one function with a
// fixed field order (the same logical key is always the same bytes):
//
//	SCHEMA  {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
//	        value: {"subject","version","id","schemaType"?,"references"?,"schema","deleted"}
//	        null value: version V of S permanently deleted
//	CONFIG  {"keytype":"CONFIG","subject":S|null,"magic":0}
//	        value: {"compatibilityLevel":L}; null: the subject's (or global) level reset
//	MODE    {"keytype":"MODE","subject":S|null,"magic":0}
//	        value: {"mode":M}; null: reset
//	NOOP    {"keytype":"NOOP","magic":0}
//	        written by a registry that takes over as writer (see Registry)
//	MAXID   {"keytype":"MAXID","magic":0}
//	        value: {"id":N}: no id up to N is ever given to a new schema,
//	        written with a permanent delete so that a compacted topic never
//	        forgets the highest id handed out.
//
// Records of other key types are skipped, so a newer layout can be read.
const (
	keySchema = "SCHEMA"
	keyConfig = "CONFIG"
	keyMode   = "MODE"
	keyNoop   = "NOOP"
	keyMaxID  = "MAXID"
)

type recordKey struct {
	KeyType string  `json:"keytype"`
	Subject *string `json:"subject,omitempty"`
	Version int     `json:"version,omitempty"`
	Magic   int     `json:"magic"`
}

// encodeKey renders a key with a fixed field order; subject is nil for the
// global CONFIG and MODE keys (encoded as null).
func encodeKey(keyType string, subject *string, version int) []byte {
	switch keyType {
	case keySchema:
		return mustJSON(struct {
			KeyType string `json:"keytype"`
			Subject string `json:"subject"`
			Version int    `json:"version"`
			Magic   int    `json:"magic"`
		}{keyType, *subject, version, 1})
	case keyConfig, keyMode:
		return mustJSON(struct {
			KeyType string  `json:"keytype"`
			Subject *string `json:"subject"`
			Magic   int     `json:"magic"`
		}{keyType, subject, 0})
	}
	return mustJSON(struct {
		KeyType string `json:"keytype"`
		Magic   int    `json:"magic"`
	}{keyType, 0})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("registry: encoding %T: %v", v, err)) // only fixed, encodable types reach here
	}
	return b
}

// Reference is a schema reference as the API and the topic spell it.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// schemaValue is a SCHEMA record's value: one version of one subject.
type schemaValue struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
	Deleted    bool        `json:"deleted"`
}

type configValue struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type modeValue struct {
	Mode string `json:"mode"`
}

type maxIDValue struct {
	ID int `json:"id"`
}

// record is one write to the topic: key and value (nil value: tombstone).
type record struct {
	key, value []byte
}

func schemaRecord(v *schemaValue) record {
	return record{encodeKey(keySchema, &v.Subject, v.Version), mustJSON(v)}
}

func schemaTombstone(subject string, version int) record {
	return record{encodeKey(keySchema, &subject, version), nil}
}

// subjectPtr is nil for the global ("") subject of CONFIG and MODE keys.
func subjectPtr(subject string) *string {
	if subject == "" {
		return nil
	}
	return &subject
}
