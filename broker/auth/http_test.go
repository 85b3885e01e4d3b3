package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func TestParseBasicAuth(t *testing.T) {
	for _, tc := range []struct {
		header, user, password string
		ok                     bool
	}{
		{basic("alice", "pw"), "alice", "pw", true},
		{"basic " + base64.StdEncoding.EncodeToString([]byte("alice:pw")), "alice", "pw", true},
		{"BASIC   " + base64.StdEncoding.EncodeToString([]byte("alice:pw")), "alice", "pw", true},
		{basic("alice", "a:b:c"), "alice", "a:b:c", true}, // the first ':' separates
		{basic("älice", "pässword"), "älice", "pässword", true},
		{basic("alice", ""), "alice", "", true}, // empty passwords then fail the check
		{basic("", "pw"), "", "", false},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("no-colon")), "", "", false},
		{"Basic", "", "", false},
		{"Basic ", "", "", false},
		{"Basic !!!", "", "", false},
		{"Basic " + base64.RawStdEncoding.EncodeToString([]byte("alice:pw")), "", "", false}, // unpadded
		{"Bearer " + base64.StdEncoding.EncodeToString([]byte("alice:pw")), "", "", false},
		{"Digest username=alice", "", "", false},
		{basic("al\x00ice", "pw"), "", "", false},
		{basic("alice", "p\nw"), "", "", false},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("alice:\xff\xfe")), "", "", false},
		{"Basic " + strings.Repeat("A", 5000), "", "", false},
	} {
		u, p, err := ParseBasicAuth(tc.header)
		if tc.ok != (err == nil) || u != tc.user || p != tc.password {
			t.Errorf("ParseBasicAuth(%q) = %q, %q, %v", tc.header, u, p, err)
		}
		if err != nil && !errors.Is(err, ErrBadAuthorization) {
			t.Errorf("ParseBasicAuth(%q): error %v is not ErrBadAuthorization", tc.header, err)
		}
		if err != nil && tc.password != "" && strings.Contains(err.Error(), tc.password) {
			t.Errorf("error %q names the password", err)
		}
	}
}

// The parser never panics, accepts only what it can give back exactly,
// and its errors never carry the decoded credentials.
func FuzzParseBasicAuth(f *testing.F) {
	f.Add(basic("alice", "pw"))
	f.Add("Basic")
	f.Add("basic   YTpi")
	f.Add("Basic YTo=")
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("a\x00b:c")))
	f.Fuzz(func(t *testing.T, header string) {
		u, p, err := ParseBasicAuth(header)
		if err != nil {
			if !errors.Is(err, ErrBadAuthorization) {
				t.Fatalf("error %v is not ErrBadAuthorization", err)
			}
			if raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(strings.TrimPrefix(header, "Basic"))); derr == nil && len(raw) > 3 && strings.Contains(err.Error(), string(raw)) {
				t.Fatalf("error %q carries the credentials", err)
			}
			return
		}
		if u == "" || strings.ContainsRune(u, ':') || hasControl(u) || hasControl(p) {
			t.Fatalf("accepted user %q password %q", u, p)
		}
		u2, p2, err := ParseBasicAuth(basic(u, p))
		if err != nil || u2 != u || p2 != p {
			t.Fatalf("round trip of %q:%q: %q %q %v", u, p, u2, p2, err)
		}
	})
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer   abc", "abc", true},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{basic("a", "b"), "", false},
		{"Bearer " + strings.Repeat("a", 20<<10), "", false},
	} {
		tok, ok := BearerToken(tc.header)
		if ok != tc.ok || tok != tc.token {
			t.Errorf("BearerToken(%.40q) = %.40q, %v", tc.header, tok, ok)
		}
	}
}
