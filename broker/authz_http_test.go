package broker

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/broker/authz"
)

// The admin HTTP API applies the Kafka listener's ACLs to the principal an
// HTTP front recorded (User:ANONYMOUS when none did).
func TestAdminHTTPAuthorized(t *testing.T) {
	b, _ := aclBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(clientAs(t, b, "admin"))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "h"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.authz.Create([]authz.Binding{{ResourceType: authz.ResourceTopic, ResourceName: "h", PatternType: authz.PatternPrefixed,
		Principal: "User:ops", Host: "*", Operation: authz.OpDescribe, Permission: authz.PermAllow}}); err != nil {
		t.Fatal(err)
	}
	h := b.AdminHandler()
	get := func(path, principal string) int {
		r := httptest.NewRequest("GET", path, nil)
		if principal != "" {
			r = r.WithContext(WithPrincipal(r.Context(), principal))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		path, principal string
		want            int
	}{
		{"/v1/partitions/h", "", http.StatusForbidden},         // ANONYMOUS
		{"/v1/partitions/h", "User:eve", http.StatusForbidden}, // no ACL
		{"/v1/partitions/h", "User:ops", http.StatusOK},
		{"/v1/partitions/h", "User:admin", http.StatusOK},            // super user
		{"/v1/partitions/missing", "User:eve", http.StatusForbidden}, // no existence leak
		{"/v1/partitions/hidden", "User:ops", http.StatusNotFound},   // allowed by prefix, absent
	} {
		if got := get(tc.path, tc.principal); got != tc.want {
			t.Errorf("GET %s as %q: %d, want %d", tc.path, tc.principal, got, tc.want)
		}
	}
	// Without an authorizer everything stays open.
	open, _ := testBroker(t)
	w := httptest.NewRecorder()
	open.AdminHandler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/partitions/__consumer_offsets", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("no authorizer: %d", w.Code)
	}
	if PrincipalFrom(ctx) != authz.Anonymous {
		t.Fatal("default principal is not ANONYMOUS")
	}
}
