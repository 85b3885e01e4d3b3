package registry

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

type apiError struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

// do sends a raw request and decodes the answer's error body, if any.
func do(t *testing.T, tr *testRegistry, method, path, contentType, body string) (int, apiError, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, tr.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e apiError
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e, string(raw)
}

func TestBadInput(t *testing.T) {
	tr := startRegistryOn(t, startRegistry(t).broker, Config{MaxSchemaBytes: 64 << 10, MaxRequestBytes: 256 << 10})
	if _, err := tr.client.CreateSchema(ctxT(t), "s", sr.Schema{Schema: avroV1}); err != nil {
		t.Fatal(err)
	}
	huge := `{"schema":"` + strings.Repeat("x", 100<<10) + `"}`
	giant := `{"schema":"` + strings.Repeat("x", 300<<10) + `"}`
	ct := ContentType
	for _, c := range []struct {
		name, method, path, ctype, body string
		status, code                    int
	}{
		{"malformed JSON", "POST", "/subjects/s/versions", ct, `{"schema": `, 400, 400},
		{"not an object", "POST", "/subjects/s/versions", ct, `[1,2]`, 400, 400},
		{"two values", "POST", "/subjects/s/versions", ct, `{"schema":"\"int\""} {}`, 400, 400},
		{"empty body", "POST", "/subjects/s/versions", ct, ``, 400, 400},
		{"no schema", "POST", "/subjects/s/versions", ct, `{"schemaType":"AVRO"}`, 422, CodeInvalidSchema},
		{"invalid avro", "POST", "/subjects/s/versions", ct, `{"schema":"{\"type\":\"record\"}"}`, 422, CodeInvalidSchema},
		{"invalid json schema", "POST", "/subjects/j/versions", ct, `{"schemaType":"JSON","schema":"{\"type\":12}"}`, 422, CodeInvalidSchema},
		{"invalid protobuf", "POST", "/subjects/p/versions", ct, `{"schemaType":"PROTOBUF","schema":"message {"}`, 422, CodeInvalidSchema},
		{"unknown type", "POST", "/subjects/s/versions", ct, `{"schemaType":"XML","schema":"<a/>"}`, 422, CodeInvalidSchema},
		{"unknown reference", "POST", "/subjects/r/versions", ct, `{"schema":"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"A\"}]}","references":[{"name":"A","subject":"nope","version":1}]}`, 422, CodeInvalidSchema},
		{"schema over the limit", "POST", "/subjects/s/versions", ct, huge, 422, CodeInvalidSchema},
		{"body over the limit", "POST", "/subjects/s/versions", ct, giant, 413, 413},
		{"wrong content type", "POST", "/subjects/s/versions", "text/plain", `{"schema":"\"int\""}`, 415, 415},
		{"control character in subject", "POST", "/subjects/a%01b/versions", ct, `{"schema":"\"int\""}`, 422, CodeInvalidSubject},
		{"subject too long", "POST", "/subjects/" + strings.Repeat("s", 2000) + "/versions", ct, `{"schema":"\"int\""}`, 422, CodeInvalidSubject},
		{"bad version", "GET", "/subjects/s/versions/zero", "", "", 422, CodeInvalidVersion},
		{"version 0", "GET", "/subjects/s/versions/0", "", "", 422, CodeInvalidVersion},
		{"version overflow", "GET", "/subjects/s/versions/99999999999", "", "", 422, CodeInvalidVersion},
		{"bad id", "GET", "/schemas/ids/abc", "", "", 404, CodeSchemaNotFound},
		{"bad level", "PUT", "/config/s", ct, `{"compatibility":"MAYBE"}`, 422, CodeInvalidCompatibilityLevel},
		{"bad mode", "PUT", "/mode/s", ct, `{"mode":"MAYBE"}`, 422, CodeInvalidMode},
		{"unknown path", "GET", "/nothing/here", "", "", 404, 404},
	} {
		status, e, raw := do(t, tr, c.method, c.path, c.ctype, c.body)
		if status != c.status || e.Code != c.code || e.Message == "" {
			t.Errorf("%s: status %d code %d (%s), want %d/%d", c.name, status, e.Code, raw, c.status, c.code)
		}
	}
	// Nothing of the refused requests was written: one subject, one version,
	// and the next id is 2.
	ctx := ctxT(t)
	subs, err := tr.client.Subjects(sr.WithParams(ctx, sr.ShowDeleted))
	if err != nil || len(subs) != 1 {
		t.Fatalf("subjects after bad input: %v %v", subs, err)
	}
	s, err := tr.client.CreateSchema(ctx, "s", sr.Schema{Schema: avroV2})
	if err != nil || s.ID != 2 || s.Version != 2 {
		t.Fatalf("after bad input: %+v %v", s, err)
	}
	// -1 for id and version means "none", as clients send it.
	if status, _, raw := do(t, tr, "POST", "/subjects/s/versions", ct, `{"schema":"\"int\"","id":-1,"version":-1}`); status != 409 {
		t.Fatalf("id and version -1: status %d (%s), want the compatibility check's 409", status, raw)
	}
	// Content types: the response is the registry's JSON type.
	req, _ := http.NewRequest("GET", tr.srv.URL+"/schemas/ids/1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Content-Type"); got != ContentType {
		t.Fatalf("Content-Type %q, want %q", got, ContentType)
	}
}

func FuzzDecodeRegisterRequest(f *testing.F) {
	for _, s := range []string{
		`{"schema":"\"int\""}`,
		`{"schema":"{}","schemaType":"JSON","references":[{"name":"a","subject":"b","version":1}]}`,
		`{"schema":"syntax = \"proto3\"; message M {}","schemaType":"PROTOBUF","id":3,"version":2}`,
		`{"schema": 1}`, `[]`, `{`, ``, `null`, `{"references":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rr, err := DecodeRegisterRequest(body, 1<<16)
		if err != nil {
			var e *Error
			if !asError(err, &e) || e.Status < 400 || e.Message == "" {
				t.Fatalf("error without status and message: %v", err)
			}
			return
		}
		if rr.Schema == "" || len(rr.Schema) > 1<<16 {
			t.Fatalf("accepted schema of %d bytes", len(rr.Schema))
		}
		// Whatever was accepted parses or fails with an error, never a panic.
		st := newState()
		_, _ = st.parse(rr)
	})
}

// FuzzApplyRecord feeds arbitrary topic records to the state: a record it
// can't read is skipped, never a panic.
func FuzzApplyRecord(f *testing.F) {
	f.Add([]byte(`{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}`), []byte(`{"subject":"s","version":1,"id":1,"schema":"\"int\"","deleted":false}`))
	f.Add([]byte(`{"keytype":"CONFIG","subject":null,"magic":0}`), []byte(`{"compatibilityLevel":"FULL"}`))
	f.Add([]byte(`{"keytype":"MODE","subject":"s","magic":0}`), []byte(nil))
	f.Add([]byte(`{"keytype":"MAXID","magic":0}`), []byte(`{"id":7}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		st := newState()
		st.apply(key, value, 0)
		st.apply(key, nil, 1)
		st.apply(key, value, 2)
		for _, vs := range st.subjects {
			for _, v := range vs {
				if st.ids[v.id] == nil {
					t.Fatalf("version %s/%d names id %d with no schema", v.subject, v.version, v.id)
				}
			}
		}
	})
}
