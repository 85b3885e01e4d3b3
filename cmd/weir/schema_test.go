package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/registry/registrytest"
	"github.com/weirhq/weir/weirtest"
)

func TestSchemaCommands(t *testing.T) {
	r := "--registry=" + registrytest.Serve(t, weirtest.Start(t).Addr())
	dir := t.TempDir()
	v1 := filepath.Join(dir, "v1.avsc")
	if err := os.WriteFile(v1, []byte(`{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	const v2 = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":""}]}`
	const bad = `{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}`

	if out := mustCLI(t, "", "schema", "register", r, "orders-value", "-f", v1); out != "subject orders-value version 1 id 1\n" {
		t.Fatalf("register: %q", out)
	}
	if out := mustCLI(t, v2, "schema", "register", r, "orders-value", "-f", "-"); out != "subject orders-value version 2 id 2\n" {
		t.Fatalf("register from stdin: %q", out)
	}
	if out := mustCLI(t, "", "schema", "check", r, "orders-value", "--schema", v2); out != "compatible\n" {
		t.Fatalf("check: %q", out)
	}
	out, _, code := runCLI(t, "", "schema", "check", r, "orders-value", "--schema", bad)
	if code != 1 || !strings.HasPrefix(out, "incompatible:\n") || !strings.Contains(out, "TYPE_MISMATCH") {
		t.Fatalf("check of an incompatible schema: exit %d, %q", code, out)
	}
	if _, errOut, code := runCLI(t, "", "schema", "register", r, "orders-value", "--schema", bad); code == 0 || !strings.Contains(errOut, "409") {
		t.Fatalf("register incompatible: exit %d, stderr %q", code, errOut)
	}
	if out := mustCLI(t, "", "schema", "get", r, "orders-value"); !strings.HasPrefix(out, "# subject orders-value version 2 id 2 type AVRO\n") {
		t.Fatalf("get latest: %q", out)
	}
	if out := mustCLI(t, "", "schema", "get", r, "--id", "1"); !strings.Contains(out, `"name":"a"`) {
		t.Fatalf("get by id: %q", out)
	}
	if out := mustCLI(t, "", "schema", "list", r); out != "orders-value\n" {
		t.Fatalf("list: %q", out)
	}
	if out := mustCLI(t, "", "schema", "versions", r, "orders-value"); out != "version 1 id 1 type AVRO\nversion 2 id 2 type AVRO\n" {
		t.Fatalf("versions: %q", out)
	}
	if out := mustCLI(t, "", "schema", "config", r); out != "BACKWARD\n" {
		t.Fatalf("config: %q", out)
	}
	if out := mustCLI(t, "", "schema", "config", r, "orders-value", "--set", "full_transitive"); out != "FULL_TRANSITIVE\n" {
		t.Fatalf("config --set: %q", out)
	}
	if out := mustCLI(t, "", "schema", "config", r, "orders-value"); out != "FULL_TRANSITIVE\n" {
		t.Fatalf("config of the subject: %q", out)
	}
	if out := mustCLI(t, "", "schema", "mode", r, "orders-value", "--set", "READONLY"); out != "READONLY\n" {
		t.Fatalf("mode --set: %q", out)
	}
	if _, errOut, code := runCLI(t, "", "schema", "delete", r, "orders-value", "1"); code == 0 || !strings.Contains(errOut, "42205") {
		t.Fatalf("delete in READONLY: exit %d, stderr %q", code, errOut)
	}
	mustCLI(t, "", "schema", "mode", r, "orders-value", "--reset")
	if out := mustCLI(t, "", "schema", "delete", r, "orders-value", "1"); out != "deleted orders-value version 1\n" {
		t.Fatalf("delete version: %q", out)
	}
	if out := mustCLI(t, "", "schema", "delete", r, "orders-value"); out != "deleted orders-value versions [2]\n" {
		t.Fatalf("delete subject: %q", out)
	}
	if out := mustCLI(t, "", "schema", "list", r, "--deleted"); out != "orders-value\n" {
		t.Fatalf("list --deleted: %q", out)
	}
	if out := mustCLI(t, "", "schema", "delete", r, "orders-value", "--permanent"); out != "deleted orders-value versions [1 2]\n" {
		t.Fatalf("delete --permanent: %q", out)
	}
	if _, errOut, code := runCLI(t, "", "schema", "register", r, "x", "--schema", `"int"`, "--ref", "bad"); code == 0 || !strings.Contains(errOut, "NAME=SUBJECT:VERSION") {
		t.Fatalf("bad --ref: exit %d, stderr %q", code, errOut)
	}
}
