package auth

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Credentials of HTTP requests, shared by every HTTP front that
// authenticates Kafka principals (the broker's, the standalone schema
// registry's): basic auth (RFC 7617), bearer tokens (RFC 6750) and verified
// client certificates. Parsing only: who checks the credentials is the
// front's business. Errors never carry the credentials.

// BearerToken returns the token of a Bearer Authorization header (RFC 6750
// §2.1: the scheme in any case, one or more spaces, a non-empty token).
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(header) > maxBearerBytes {
		return "", false
	}
	return token, true
}

// maxBearerBytes bounds a bearer token (a JWT with a few kilobytes of
// claims).
const maxBearerBytes = 16 << 10

// ErrBadAuthorization is returned by ParseBasicAuth for an Authorization
// header that is not well-formed basic auth.
var ErrBadAuthorization = errors.New("malformed basic Authorization header")

// maxAuthorizationBytes bounds the Authorization header parsed: a user name
// and password of a few hundred bytes each, base64-encoded.
const maxAuthorizationBytes = 4096

// ParseBasicAuth parses an Authorization header value of the Basic scheme
// (RFC 7617): the scheme name (any case), one or more spaces, then the
// standard base64 (padded) of "user:password". The user name must not be
// empty; neither part may hold a control character, and both must be
// UTF-8. The password may contain ':' (the first one separates).
func ParseBasicAuth(header string) (user, password string, err error) {
	if len(header) > maxAuthorizationBytes {
		return "", "", fmt.Errorf("%w: longer than %d bytes", ErrBadAuthorization, maxAuthorizationBytes)
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", fmt.Errorf("%w: not the Basic scheme", ErrBadAuthorization)
	}
	token = strings.TrimLeft(token, " ")
	raw, derr := base64.StdEncoding.Strict().DecodeString(token)
	if derr != nil || token == "" {
		return "", "", fmt.Errorf("%w: credentials are not base64", ErrBadAuthorization)
	}
	u, p, ok := strings.Cut(string(raw), ":")
	switch {
	case !ok:
		return "", "", fmt.Errorf("%w: no ':' between user and password", ErrBadAuthorization)
	case u == "":
		return "", "", fmt.Errorf("%w: empty user name", ErrBadAuthorization)
	case !utf8.ValidString(u) || !utf8.ValidString(p):
		return "", "", fmt.Errorf("%w: credentials are not UTF-8", ErrBadAuthorization)
	case hasControl(u) || hasControl(p):
		return "", "", fmt.Errorf("%w: control character in the credentials", ErrBadAuthorization)
	}
	return u, p, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// CertPrincipal returns the principal of a TLS connection's verified
// client certificate, "User:" plus the subject in RFC 2253 form (Kafka's
// default principal builder, as SSL listeners), and false when the
// connection has none.
func CertPrincipal(st *tls.ConnectionState) (string, bool) {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return "", false
	}
	return "User:" + st.PeerCertificates[0].Subject.String(), true
}
