// Package auth holds the server side of the SASL mechanisms weir's broker
// speaks: PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
// RFC 7677) and OAUTHBEARER (RFC 7628) with JWT validation against a JWKS.
// It knows nothing of the Kafka protocol: the broker feeds each client
// message of a SaslAuthenticate request to a Session and sends back what
// the Session returns.
//
// Secrets never leave a Session: errors and log-friendly messages name the
// mechanism and, at most, the user name, never a password, proof, salted
// password or token.
//
// The cryptography is Go's standard library (crypto/pbkdf2, crypto/hmac,
// crypto/sha256, crypto/sha512, crypto/rsa, crypto/ecdsa, crypto/ed25519);
// this package only parses and composes messages.
package auth

import (
	"errors"
	"time"
)

// Mechanism names as Kafka clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// ErrAuthFailed is wrapped by every error that means "the client did not
// prove who it is" (wrong password, unknown user, bad proof, invalid or
// expired token). The broker answers it with SASL_AUTHENTICATION_FAILED;
// any other Session error is a malformed exchange (ILLEGAL_SASL_STATE).
var ErrAuthFailed = errors.New("authentication failed")

// ErrMalformed is wrapped by errors for messages that do not parse.
var ErrMalformed = errors.New("malformed SASL message")

// authError is an ErrAuthFailed with a message safe to send to the client
// and to log: it never carries a credential.
type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }
func (e *authError) Unwrap() error { return ErrAuthFailed }

func failed(msg string) error { return &authError{msg: msg} }

type malformedError struct{ msg string }

func (e *malformedError) Error() string { return e.msg }
func (e *malformedError) Unwrap() error { return ErrMalformed }

func malformed(msg string) error { return &malformedError{msg: msg} }

// Session is one SASL exchange. Step is called with each client message in
// order until it returns done or an error; a Session is not safe for
// concurrent use.
type Session interface {
	// Step consumes the client's next message and returns the server's
	// reply. done is true once the client is authenticated (reply is the
	// last server message, possibly empty).
	Step(msg []byte) (reply []byte, done bool, err error)
	// Principal is the authenticated principal in Kafka's form,
	// "User:<name>"; valid once Step returned done.
	Principal() string
	// Expiry is when the credential stops being valid (a token's exp),
	// or the zero time for credentials that do not expire.
	Expiry() time.Time
}

// UserPrincipal is the Kafka principal of a user name.
func UserPrincipal(name string) string { return "User:" + name }
