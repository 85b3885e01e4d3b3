package registry

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

func TestSoftAndHardDeletes(t *testing.T) {
	tr := startRegistry(t)
	ctx, cl := ctxT(t), tr.client
	for _, s := range []string{avroV1, avroV2} {
		if _, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: s}); err != nil {
			t.Fatal(err)
		}
	}
	// A hard delete needs a soft delete first.
	if err := cl.DeleteSchema(ctx, "s", 1, sr.HardDelete); srCode(err) != CodeVersionNotSoftDeleted {
		t.Fatalf("hard delete of a live version: %v, want 40407", err)
	}
	if err := cl.DeleteSchema(ctx, "s", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteSchema(ctx, "s", 1, sr.SoftDelete); srCode(err) != CodeVersionSoftDeleted {
		t.Fatalf("second soft delete: %v, want 40406", err)
	}
	if _, err := cl.SchemaByVersion(ctx, "s", 1); srCode(err) != CodeVersionNotFound {
		t.Fatalf("soft-deleted version: %v, want 40402", err)
	}
	vs, err := cl.SubjectVersions(ctx, "s")
	if err != nil || len(vs) != 1 || vs[0] != 2 {
		t.Fatalf("versions after soft delete: %v %v", vs, err)
	}
	// The soft-deleted version stays readable by id and with deleted=true.
	if _, err := cl.SchemaByID(ctx, 1); err != nil {
		t.Fatalf("id of a soft-deleted version: %v", err)
	}
	if _, err := cl.SchemaByVersion(sr.WithParams(ctx, sr.ShowDeleted), "s", 1); err != nil {
		t.Fatalf("soft-deleted version with deleted=true: %v", err)
	}
	// Hard delete of the subject needs the subject soft-deleted.
	if _, err := cl.DeleteSubject(ctx, "s", sr.HardDelete); srCode(err) != CodeSubjectNotSoftDeleted {
		t.Fatalf("hard delete of a live subject: %v, want 40405", err)
	}
	got, err := cl.DeleteSubject(ctx, "s", sr.SoftDelete)
	if err != nil || len(got) != 1 || got[0] != 2 {
		t.Fatalf("soft delete subject: %v %v", got, err)
	}
	if _, err := cl.DeleteSubject(ctx, "s", sr.SoftDelete); srCode(err) != CodeSubjectSoftDeleted {
		t.Fatalf("second soft delete of the subject: %v, want 40404", err)
	}
	subs, err := cl.Subjects(ctx)
	if err != nil || len(subs) != 0 {
		t.Fatalf("subjects after soft delete: %v %v", subs, err)
	}
	subs, err = cl.Subjects(sr.WithParams(ctx, sr.ShowDeleted))
	if err != nil || len(subs) != 1 {
		t.Fatalf("subjects with deleted=true: %v %v", subs, err)
	}
	got, err = cl.DeleteSubject(ctx, "s", sr.HardDelete)
	if err != nil || len(got) != 2 {
		t.Fatalf("hard delete subject: %v %v", got, err)
	}
	if _, err := cl.SchemaByID(ctx, 1); srCode(err) != CodeSchemaNotFound {
		t.Fatalf("id after hard delete: %v, want 40403", err)
	}
	// Ids are never reused: the next schema gets a new one.
	s, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: avroBad})
	if err != nil || s.ID != 3 || s.Version != 1 {
		t.Fatalf("after hard delete: %+v %v, want id 3 version 1", s, err)
	}
}

func TestReferences(t *testing.T) {
	tr := startRegistry(t)
	ctx, cl := ctxT(t), tr.client
	addr := `{"type":"record","name":"Address","namespace":"ex","fields":[{"name":"city","type":"string"}]}`
	if _, err := cl.CreateSchema(ctx, "address", sr.Schema{Schema: addr}); err != nil {
		t.Fatal(err)
	}
	user := `{"type":"record","name":"Person","namespace":"ex","fields":[{"name":"home","type":"ex.Address"}]}`
	ref := []sr.SchemaReference{{Name: "ex.Address", Subject: "address", Version: 1}}
	s, err := cl.CreateSchema(ctx, "person", sr.Schema{Schema: user, References: ref})
	if err != nil {
		t.Fatalf("schema with a reference: %v", err)
	}
	got, err := cl.SchemaByID(ctx, s.ID)
	if err != nil || len(got.References) != 1 || got.References[0].Subject != "address" {
		t.Fatalf("references not kept: %+v %v", got, err)
	}
	// Without its reference the schema does not parse.
	if _, err := cl.CreateSchema(ctx, "person2", sr.Schema{Schema: user}); srCode(err) != CodeInvalidSchema {
		t.Fatalf("unresolved name: %v, want 42201", err)
	}
	bad := []sr.SchemaReference{{Name: "ex.Address", Subject: "address", Version: 9}}
	if _, err := cl.CreateSchema(ctx, "person3", sr.Schema{Schema: user, References: bad}); srCode(err) != CodeInvalidSchema {
		t.Fatalf("unknown reference: %v, want 42201", err)
	}
	by, err := cl.SchemaUsagesByID(ctx, 1)
	_ = by
	// A referenced version can't be deleted.
	if err := cl.DeleteSchema(ctx, "address", 1, sr.SoftDelete); srCode(err) != CodeReferenceExists {
		t.Fatalf("deleting a referenced version: %v, want 42206", err)
	}
	var ids []int
	if err := cl.Do(ctx, "GET", "/subjects/address/versions/1/referencedby", nil, &ids); err != nil || len(ids) != 1 || ids[0] != s.ID {
		t.Fatalf("referencedby: %v %v", ids, err)
	}
}

func TestConfigAndMode(t *testing.T) {
	tr := startRegistry(t)
	ctx, cl := ctxT(t), tr.client
	res := cl.Compatibility(ctx)
	if res[0].Err != nil || res[0].Level != sr.CompatBackward {
		t.Fatalf("default level: %+v", res[0])
	}
	if res := cl.Compatibility(ctx, "s"); srCode(res[0].Err) != CodeSubjectCompatNotSet {
		t.Fatalf("unset subject level: %+v, want 40408", res[0])
	}
	if res := cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), "s"); res[0].Err != nil || res[0].Level != sr.CompatBackward {
		t.Fatalf("defaultToGlobal: %+v", res[0])
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "s"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if _, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: avroV1}); err != nil {
		t.Fatal(err)
	}
	// NONE: an incompatible change is accepted.
	if _, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: avroBad}); err != nil {
		t.Fatalf("NONE refused a change: %v", err)
	}
	if res := cl.ResetCompatibility(ctx, "s"); res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Fatalf("reset: %+v", res[0])
	}
	var e struct{}
	if err := cl.Do(ctx, "PUT", "/config", map[string]string{"compatibility": "SIDEWAYS"}, &e); srCode(err) != CodeInvalidCompatibilityLevel {
		t.Fatalf("invalid level: %v, want 42203", err)
	}

	if res := cl.SetMode(ctx, sr.ModeReadOnly, "s"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if _, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: avroV2}); srCode(err) != CodeOperationNotPermitted {
		t.Fatalf("register in READONLY: %v, want 42205", err)
	}
	if res := cl.Mode(ctx, "s"); res[0].Err != nil || res[0].Mode != sr.ModeReadOnly {
		t.Fatalf("mode: %+v", res[0])
	}
	if res := cl.ResetMode(ctx, "s"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if err := cl.Do(ctx, "PUT", "/mode", map[string]string{"mode": "SOMETIMES"}, &e); srCode(err) != CodeInvalidMode {
		t.Fatalf("invalid mode: %v, want 42204", err)
	}
	// IMPORT needs an empty registry (or force), then takes explicit ids.
	if res := cl.SetMode(ctx, sr.ModeImport); srCode(res[0].Err) != CodeOperationNotPermitted {
		t.Fatalf("IMPORT on a non-empty registry: %+v, want 42205", res[0])
	}
	if res := cl.SetMode(sr.WithParams(ctx, sr.Force), sr.ModeImport); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	imp, err := cl.CreateSchemaWithIDAndVersion(ctx, "imported", sr.Schema{Schema: avroV2}, 100, 5)
	if err != nil || imp.ID != 100 || imp.Version != 5 {
		t.Fatalf("import: %+v %v", imp, err)
	}
	if _, err := cl.CreateSchemaWithIDAndVersion(ctx, "imported2", sr.Schema{Schema: avroV1}, 100, 1); srCode(err) != CodeIDDoesNotMatch {
		t.Fatalf("import over another schema's id: %v, want 42207", err)
	}
	if res := cl.SetMode(ctx, sr.ModeReadWrite); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	// After an import, new ids continue above the imported ones.
	s, err := cl.CreateSchema(ctx, "after", sr.Schema{Schema: `{"type":"string"}`})
	if err != nil || s.ID != 101 {
		t.Fatalf("after import: %+v %v, want id 101", s, err)
	}
}

func TestCompatibilityEndpoint(t *testing.T) {
	tr := startRegistry(t)
	ctx, cl := ctxT(t), tr.client
	if _, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: avroV1}); err != nil {
		t.Fatal(err)
	}
	ok, err := cl.CheckCompatibility(ctx, "s", -1, sr.Schema{Schema: avroV2})
	if err != nil || !ok.Is {
		t.Fatalf("compatible check: %+v %v", ok, err)
	}
	bad, err := cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), "s", -1, sr.Schema{Schema: avroBad})
	if err != nil || bad.Is || len(bad.Messages) == 0 {
		t.Fatalf("incompatible check: %+v %v", bad, err)
	}
	if _, err := cl.CheckCompatibility(ctx, "s", 9, sr.Schema{Schema: avroV2}); srCode(err) != CodeVersionNotFound {
		t.Fatalf("check against a missing version: %v, want 40402", err)
	}
}
