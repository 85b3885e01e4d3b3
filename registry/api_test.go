package registry

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

const (
	avroV1 = `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"id","type":"long"}]}`
	// avroV2 adds a field with a default: backward compatible.
	avroV2 = `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"id","type":"long"},{"name":"email","type":"string","default":""}]}`
	// avroBad adds a field without a default: backward incompatible.
	avroBad = `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}`
)

func srCode(err error) int {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return 0
}

func TestRegisterEvolveAndRead(t *testing.T) {
	tr := startRegistry(t)
	ctx, cl := ctxT(t), tr.client

	s1, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: avroV1})
	if err != nil {
		t.Fatal(err)
	}
	if s1.ID != 1 || s1.Version != 1 {
		t.Fatalf("first schema: id %d version %d, want 1/1", s1.ID, s1.Version)
	}
	// The same schema again, with other whitespace: same id, no new version.
	again, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: "  " + avroV1 + "\n"})
	if err != nil || again.ID != 1 || again.Version != 1 {
		t.Fatalf("re-register: %+v %v, want id 1 version 1", again, err)
	}
	s2, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: avroV2})
	if err != nil || s2.ID != 2 || s2.Version != 2 {
		t.Fatalf("compatible evolution: %+v %v", s2, err)
	}
	_, err = cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: avroBad})
	if srCode(err) != CodeIncompatibleSchema {
		t.Fatalf("incompatible schema: err %v, want error code 409", err)
	}
	// The same schema under another subject keeps its id.
	other, err := cl.CreateSchema(ctx, "other-value", sr.Schema{Schema: avroV1})
	if err != nil || other.ID != 1 || other.Version != 1 {
		t.Fatalf("same schema, other subject: %+v %v, want id 1", other, err)
	}

	got, err := cl.SchemaByID(ctx, 2)
	if err != nil || got.Schema != avroV2 || got.Type != sr.TypeAvro {
		t.Fatalf("schema by id: %+v %v", got, err)
	}
	latest, err := cl.SchemaByVersion(ctx, "users-value", -1)
	if err != nil || latest.Version != 2 || latest.ID != 2 {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	vs, err := cl.SubjectVersions(ctx, "users-value")
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions: %v %v", vs, err)
	}
	subs, err := cl.Subjects(ctx)
	if err != nil || len(subs) != 2 || subs[0] != "other-value" || subs[1] != "users-value" {
		t.Fatalf("subjects: %v %v", subs, err)
	}
	found, err := cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: avroV1})
	if err != nil || found.Version != 1 || found.ID != 1 {
		t.Fatalf("lookup: %+v %v", found, err)
	}
	if _, err := cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: avroBad}); srCode(err) != CodeSchemaNotFound {
		t.Fatalf("lookup of an unregistered schema: %v, want 40403", err)
	}
	if _, err := cl.SchemaByID(ctx, 99); srCode(err) != CodeSchemaNotFound {
		t.Fatalf("unknown id: %v, want 40403", err)
	}
	if _, err := cl.SchemaByVersion(ctx, "nope", 1); srCode(err) != CodeSubjectNotFound {
		t.Fatalf("unknown subject: %v, want 40401", err)
	}
	if _, err := cl.SchemaByVersion(ctx, "users-value", 7); srCode(err) != CodeVersionNotFound {
		t.Fatalf("unknown version: %v, want 40402", err)
	}
	svs, err := cl.SchemaVersionsByID(ctx, 1)
	if err != nil || len(svs) != 2 {
		t.Fatalf("versions by id: %v %v", svs, err)
	}
}

// TestNormalize: with normalize=true the stored text is the normalized
// form, and a schema differing only in key order and whitespace is the
// same schema (same id, no new version) with or without it.
func TestNormalize(t *testing.T) {
	tr := startRegistry(t)
	ctx, cl := ctxT(t), tr.client
	messy := `{"fields": [{"type": "long", "name": "id"}], "name": "User", "type": "record"}`
	s, err := cl.CreateSchema(sr.WithParams(ctx, sr.Normalize), "n", sr.Schema{Schema: messy})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.SchemaByID(ctx, s.ID)
	if err != nil || got.Schema != `{"fields":[{"name":"id","type":"long"}],"name":"User","type":"record"}` {
		t.Fatalf("normalized text: %q %v", got.Schema, err)
	}
	same, err := cl.CreateSchema(ctx, "n", sr.Schema{Schema: `{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}`})
	if err != nil || same.ID != s.ID || same.Version != 1 {
		t.Fatalf("same schema in another key order: %+v %v, want id %d version 1", same, err, s.ID)
	}
}
