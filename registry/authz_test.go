package registry

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirhq/weir/weirtest"
)

// policy is a test Authorizer: the user named by the X-User header may
// perform the (action, subject) pairs it lists ("*" any subject); every
// decision asked is recorded.
type policy struct {
	grants map[string][]grant
	mu     sync.Mutex
	asked  []grant
}

type grant struct {
	a       Action
	subject string
}

func (p *policy) authorize(req *http.Request, a Action, subject string) bool {
	p.mu.Lock()
	p.asked = append(p.asked, grant{a, subject})
	p.mu.Unlock()
	for _, g := range p.grants[req.Header.Get("X-User")] {
		if g.a == a && (g.subject == subject || g.subject == "*") {
			return true
		}
	}
	return false
}

func (p *policy) last() (grant, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.asked) == 0 {
		return grant{}, 0
	}
	return p.asked[len(p.asked)-1], len(p.asked)
}

func call(t *testing.T, tr *testRegistry, user, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, tr.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User", user)
	if body != "" {
		req.Header.Set("Content-Type", ContentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAuthorizerRoutes(t *testing.T) {
	p := &policy{grants: map[string][]grant{
		"admin": {{SubjectRead, "*"}, {SubjectWrite, "*"}, {SubjectDelete, "*"}, {SubjectConfigRead, "*"},
			{SubjectConfigWrite, "*"}, {GlobalConfigRead, ""}, {GlobalConfigWrite, ""}},
		"reader": {{SubjectRead, "a-value"}},
		"writer": {{SubjectWrite, "a-value"}, {SubjectRead, "a-value"}},
	}}
	tr := startRegistryOn(t, weirtest.Start(t), Config{Authorizer: p.authorize})
	schema := func(s string) string { b, _ := json.Marshal(map[string]string{"schema": s}); return string(b) }

	// Set up as admin: id 1 under a-value and b-value, id 2 under b-value only.
	for _, step := range []struct{ subject, schema string }{{"a-value", avroV1}, {"b-value", avroV1}, {"b-value", avroV2}} {
		if code, body := call(t, tr, "admin", "POST", "/subjects/"+step.subject+"/versions", schema(step.schema)); code != 200 {
			t.Fatalf("admin register %s: %d %s", step.subject, code, body)
		}
	}

	// Each route asks for its action on its subject, and a refusal is
	// 403 / 40301.
	for _, tc := range []struct {
		method, path, body string
		want               grant
	}{
		{"GET", "/subjects/b-value/versions", "", grant{SubjectRead, "b-value"}},
		{"GET", "/subjects/b-value/versions/1", "", grant{SubjectRead, "b-value"}},
		{"GET", "/subjects/b-value/versions/latest/schema", "", grant{SubjectRead, "b-value"}},
		{"GET", "/subjects/b-value/versions/1/referencedby", "", grant{SubjectRead, "b-value"}},
		{"POST", "/subjects/b-value", schema(avroV1), grant{SubjectRead, "b-value"}},
		{"POST", "/compatibility/subjects/b-value/versions/latest", schema(avroV2), grant{SubjectRead, "b-value"}},
		{"POST", "/subjects/b-value/versions", schema(avroV2), grant{SubjectWrite, "b-value"}},
		{"DELETE", "/subjects/b-value/versions/1", "", grant{SubjectDelete, "b-value"}},
		{"DELETE", "/subjects/b-value", "", grant{SubjectDelete, "b-value"}},
		{"GET", "/config/b-value", "", grant{SubjectConfigRead, "b-value"}},
		{"PUT", "/config/b-value", `{"compatibility":"NONE"}`, grant{SubjectConfigWrite, "b-value"}},
		{"DELETE", "/mode/b-value", "", grant{SubjectConfigWrite, "b-value"}},
		{"GET", "/mode", "", grant{GlobalConfigRead, ""}},
		{"GET", "/config", "", grant{GlobalConfigRead, ""}},
		{"PUT", "/config", `{"compatibility":"NONE"}`, grant{GlobalConfigWrite, ""}},
		{"PUT", "/mode", `{"mode":"READONLY"}`, grant{GlobalConfigWrite, ""}},
		{"GET", "/schemas/ids/2", "", grant{SubjectRead, "b-value"}},
	} {
		code, body := call(t, tr, "reader", tc.method, tc.path, tc.body)
		if code != http.StatusForbidden || !strings.Contains(body, "40301") {
			t.Errorf("%s %s as reader: %d %s, want 403 / 40301", tc.method, tc.path, code, body)
		}
		if got, _ := p.last(); got != tc.want {
			t.Errorf("%s %s asked %v %q, want %v %q", tc.method, tc.path, got.a, got.subject, tc.want.a, tc.want.subject)
		}
	}

	// The reader reads a-value, and sees only it in the lists.
	for _, tc := range []struct{ path, want string }{
		{"/subjects", `["a-value"]`},
		{"/schemas/ids/1/subjects", `["a-value"]`},
		{"/schemas/ids/1/versions", `[{"subject":"a-value","version":1}]`},
		{"/subjects/a-value/versions", `[1]`},
	} {
		if code, body := call(t, tr, "reader", "GET", tc.path, ""); code != 200 || strings.TrimSpace(body) != tc.want {
			t.Errorf("GET %s as reader: %d %s, want %s", tc.path, code, body, tc.want)
		}
	}
	if code, body := call(t, tr, "reader", "GET", "/schemas", ""); code != 200 || strings.Contains(body, "b-value") || !strings.Contains(body, "a-value") {
		t.Errorf("GET /schemas as reader: %d %s", code, body)
	}
	if code, _ := call(t, tr, "reader", "GET", "/schemas/ids/1", ""); code != 200 {
		t.Errorf("schema 1 (used by a-value) as reader: %d", code)
	}
	if code, _ := call(t, tr, "reader", "GET", "/schemas/ids/99", ""); code != 404 {
		t.Errorf("absent schema id as reader: %d, want 404", code)
	}
	if code, body := call(t, tr, "nobody", "GET", "/subjects", ""); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("GET /subjects as nobody: %d %s", code, body)
	}
	for _, path := range []string{"/", "/schemas/types", "/contexts"} {
		if code, _ := call(t, tr, "nobody", "GET", path, ""); code != 200 {
			t.Errorf("GET %s as nobody: %d", path, code)
		}
	}

	// The writer registers under a-value only; a Confluent client sees
	// the 40301 error code.
	if code, body := call(t, tr, "writer", "POST", "/subjects/a-value/versions", schema(avroV2)); code != 200 {
		t.Fatalf("writer register: %d %s", code, body)
	}
	cl, err := sr.NewClient(sr.URLs(tr.srv.URL), sr.PreReq(func(r *http.Request) error { r.Header.Set("X-User", "writer"); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSchema(ctxT(t), "b-value", sr.Schema{Schema: avroV1}); srCode(err) != CodeForbidden {
		t.Fatalf("writer on b-value: %v, want 40301", err)
	}
	subjects, err := cl.Subjects(ctxT(t))
	if err != nil || !slices.Equal(subjects, []string{"a-value"}) {
		t.Fatalf("writer subjects: %v %v", subjects, err)
	}
}

func TestTopicOfSubject(t *testing.T) {
	for in, want := range map[string]string{
		"orders-value": "orders", "orders-key": "orders", "a-b-value": "a-b",
		"ex.User": "ex.User", "-value": "-value", "value": "value", "orders-values": "orders-values",
	} {
		if got := TopicOfSubject(in); got != want {
			t.Errorf("TopicOfSubject(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every route is authorized: one naming a subject checks an action on
// it, one without checks a global action, filters in its handler, or is
// one of the few that reveal nothing of any subject.
func TestEveryRouteAuthorized(t *testing.T) {
	public := map[string]bool{"GET /{$}": true, "GET /schemas/types": true, "GET /contexts": true, "/": true}
	var r Registry
	for _, rt := range r.routes() {
		switch {
		case strings.Contains(rt.pattern, "{subject}"):
			if rt.perSubject == 0 {
				t.Errorf("%s names a subject and checks no action on it", rt.pattern)
			}
		case rt.global == 0 && !rt.checkedByHandler && !public[rt.pattern]:
			t.Errorf("%s checks nothing", rt.pattern)
		}
	}
}
