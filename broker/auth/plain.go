package auth

import (
	"bytes"
	"time"
)

// PLAIN (RFC 4616): one client message "authzid NUL authcid NUL passwd".
// The password is checked against the user's SCRAM credentials (either
// mechanism), so one set of users serves PLAIN and SCRAM and no password
// is stored in the clear. PLAIN sends the password itself: use it over
// SASL_SSL only.

// ParsePlain splits a PLAIN message. authzid, if not empty, must equal
// the user name (Kafka's rule).
func ParsePlain(msg []byte) (user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", malformed("PLAIN: expected authzid NUL user NUL password")
	}
	authz, u, p := string(parts[0]), string(parts[1]), string(parts[2])
	if u == "" || p == "" {
		return "", "", failed("Authentication failed: user name and password must not be empty")
	}
	if authz != "" && authz != u {
		return "", "", failed("Authentication failed: authorization id must equal the user name")
	}
	return u, p, nil
}

type plainSession struct {
	creds     Credentials
	done      bool
	principal string
}

// NewPlainSession starts a PLAIN exchange checking passwords against the
// SCRAM credentials of creds.
func NewPlainSession(creds Credentials) Session { return &plainSession{creds: creds} }

func (s *plainSession) Principal() string { return s.principal }
func (s *plainSession) Expiry() time.Time { return time.Time{} }

func (s *plainSession) Step(msg []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, malformed("PLAIN: exchange already finished")
	}
	s.done = true
	user, password, err := ParsePlain(msg)
	if err != nil {
		return nil, false, err
	}
	ok := false
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		if c, found := s.creds.ScramCredential(user, mech); found {
			ok = c.VerifyPassword(password)
			break
		}
	}
	if !found(s.creds, user) {
		// As much work as a real check of a credential with the default
		// iteration count, so that timing does not tell unknown users
		// from wrong passwords.
		_, _ = SaltPassword(ScramSHA512, password, plainDecoySalt[:], DefaultIterations)
	}
	if !ok {
		return nil, false, failed("Authentication failed: Invalid username or password")
	}
	s.principal = UserPrincipal(user)
	return nil, true, nil
}

// plainDecoySalt salts the decoy computation of an unknown user's PLAIN
// login: its content is irrelevant, its length that of a real salt.
var plainDecoySalt [SaltBytes]byte

func found(creds Credentials, user string) bool {
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		if _, ok := creds.ScramCredential(user, mech); ok {
			return true
		}
	}
	return false
}
