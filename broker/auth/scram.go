package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// SCRAM (RFC 5802) as Kafka uses it: no channel binding ("n,," or "y,,"
// GS2 headers), an optional authzid that must equal the user name, the
// extension "tokenauth" refused (weir has no delegation tokens).
//
// The server stores per user and mechanism only salt, iteration count,
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key"): a stolen store does not
// reveal passwords, nor lets anyone log in without breaking the hash.
//
// An unknown user is not told apart from a wrong password: the exchange
// runs to the client's proof with a decoy credential (decoyCredential)
// whose server-first-message has the shape of a real one, and fails there
// after the same computation as a wrong proof.

// Iteration bounds Kafka enforces on SCRAM credentials.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// DefaultIterations is the PBKDF2 iteration count of the SCRAM credentials
// weir creates when none is given (weir user --iterations). An unknown
// user's decoy shows it, so it must stay what most real credentials carry.
const DefaultIterations = 8192

// SaltBytes is the length of the salts weir generates, as franz-go's kadm
// does for AlterUserScramCredentials; an unknown user's decoy salt has it.
const SaltBytes = 24

// ScramHash returns the hash of a SCRAM mechanism, or nil if mech is not
// SCRAM-SHA-256 or SCRAM-SHA-512.
func ScramHash(mech string) func() hash.Hash {
	switch mech {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// ScramCredential is what the server keeps of one user's password for one
// SCRAM mechanism.
type ScramCredential struct {
	Mechanism  string
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// SaltPassword is SCRAM's Hi(password, salt, i): PBKDF2 with the
// mechanism's HMAC, its output the hash's size.
func SaltPassword(mech, password string, salt []byte, iterations int) ([]byte, error) {
	h := ScramHash(mech)
	if h == nil {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// NewScramCredential derives a credential from a salted password (what
// AlterUserScramCredentials carries).
func NewScramCredential(mech string, salt, saltedPassword []byte, iterations int) (ScramCredential, error) {
	h := ScramHash(mech)
	if h == nil {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return ScramCredential{}, fmt.Errorf("iterations %d outside [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 {
		return ScramCredential{}, fmt.Errorf("empty salt")
	}
	if len(saltedPassword) != h().Size() {
		return ScramCredential{}, fmt.Errorf("salted password of %d bytes, %s needs %d", len(saltedPassword), mech, h().Size())
	}
	return deriveCredential(mech, h, salt, saltedPassword, iterations), nil
}

// deriveCredential computes StoredKey and ServerKey from a salted password
// (RFC 5802 §3); the arguments are valid.
func deriveCredential(mech string, h func() hash.Hash, salt, saltedPassword []byte, iterations int) ScramCredential {
	clientKey := hmacSum(h, saltedPassword, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{
		Mechanism:  mech,
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacSum(h, saltedPassword, "Server Key"),
	}
}

// NewScramCredentialFromPassword salts password with a fresh random salt.
func NewScramCredentialFromPassword(mech, password string, iterations int) (ScramCredential, error) {
	salt := make([]byte, SaltBytes)
	if _, err := rand.Read(salt); err != nil {
		return ScramCredential{}, err
	}
	sp, err := SaltPassword(mech, password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	return NewScramCredential(mech, salt, sp, iterations)
}

// VerifyPassword reports whether password is the one c was derived from
// (PLAIN checks passwords against the SCRAM credentials this way).
func (c ScramCredential) VerifyPassword(password string) bool {
	h := ScramHash(c.Mechanism)
	if h == nil {
		return false
	}
	sp, err := pbkdf2.Key(h, password, c.Salt, c.Iterations, h().Size())
	if err != nil {
		return false
	}
	stored := h()
	stored.Write(hmacSum(h, sp, "Client Key"))
	return hmac.Equal(stored.Sum(nil), c.StoredKey)
}

// Credentials looks up SCRAM credentials. Implementations must be safe
// for concurrent use.
type Credentials interface {
	ScramCredential(user, mech string) (ScramCredential, bool)
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// ScramClientFirst is a parsed client-first-message.
type ScramClientFirst struct {
	GS2Header string // "n,," or "y,," or "n,a=...,": echoed in c= of the final message
	User      string // unescaped saslname
	Nonce     string
	Bare      string // client-first-message-bare, part of the AuthMessage
}

// ParseScramClientFirst parses gs2-header client-first-message-bare.
func ParseScramClientFirst(msg []byte) (ScramClientFirst, error) {
	s := string(msg)
	var cf ScramClientFirst
	// gs2-header = gs2-cbind-flag "," [ authzid ] ","
	cbind, rest, ok := strings.Cut(s, ",")
	if !ok {
		return cf, malformed("SCRAM client-first: missing GS2 header")
	}
	switch {
	case cbind == "n" || cbind == "y":
	case strings.HasPrefix(cbind, "p="):
		return cf, malformed("SCRAM client-first: channel binding is not supported")
	default:
		return cf, malformed("SCRAM client-first: bad channel binding flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return cf, malformed("SCRAM client-first: truncated GS2 header")
	}
	var authzid string
	if authz != "" {
		if !strings.HasPrefix(authz, "a=") {
			return cf, malformed("SCRAM client-first: bad authzid")
		}
		var err error
		if authzid, err = unescapeSaslName(authz[2:]); err != nil {
			return cf, err
		}
	}
	cf.GS2Header = s[:len(s)-len(bare)]
	cf.Bare = bare
	// client-first-message-bare = [reserved-mext ","] username "," nonce ["," extensions]
	if strings.HasPrefix(bare, "m=") {
		return cf, malformed("SCRAM client-first: mandatory extensions are not supported")
	}
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return cf, malformed("SCRAM client-first: expected n=<user>,r=<nonce>")
	}
	user, err := unescapeSaslName(attrs[0][2:])
	if err != nil {
		return cf, err
	}
	if user == "" {
		return cf, malformed("SCRAM client-first: empty user name")
	}
	cf.User = user
	cf.Nonce = attrs[1][2:]
	if !validNonce(cf.Nonce) {
		return cf, malformed("SCRAM client-first: bad nonce")
	}
	for _, ext := range attrs[2:] {
		k, _, _ := strings.Cut(ext, "=")
		if k == "tokenauth" {
			return cf, failed("SCRAM: delegation tokens are not supported")
		}
	}
	if authzid != "" && authzid != user {
		return cf, failed("SCRAM: authorization id must equal the user name")
	}
	return cf, nil
}

// validNonce: printable ASCII except ',' (RFC 5802), non-empty.
func validNonce(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// unescapeSaslName decodes "=2C" and "=3D"; any other '=' is an error.
func unescapeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", malformed("SCRAM: bad escape in user name")
		}
		i += 2
	}
	return b.String(), nil
}

// ScramClientFinal is a parsed client-final-message.
type ScramClientFinal struct {
	ChannelBinding []byte // decoded c=
	Nonce          string
	Proof          []byte
	WithoutProof   string // client-final-message-without-proof
}

// ParseScramClientFinal parses c=...,r=...[,extensions],p=...
func ParseScramClientFinal(msg []byte) (ScramClientFinal, error) {
	s := string(msg)
	var cf ScramClientFinal
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return cf, malformed("SCRAM client-final: missing proof")
	}
	cf.WithoutProof = s[:i]
	proof, err := base64.StdEncoding.Strict().DecodeString(s[i+3:])
	if err != nil || len(proof) == 0 {
		return cf, malformed("SCRAM client-final: bad proof encoding")
	}
	cf.Proof = proof
	attrs := strings.Split(cf.WithoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return cf, malformed("SCRAM client-final: expected c=<binding>,r=<nonce>")
	}
	if cf.ChannelBinding, err = base64.StdEncoding.Strict().DecodeString(attrs[0][2:]); err != nil {
		return cf, malformed("SCRAM client-final: bad channel binding encoding")
	}
	cf.Nonce = attrs[1][2:]
	return cf, nil
}

// scramSession is the server side of one SCRAM exchange:
// client-first → server-first, client-final → server-final.
type scramSession struct {
	mech  string
	h     func() hash.Hash
	creds Credentials
	fake  func(user string) ScramCredential

	step      int
	first     ScramClientFirst
	cred      ScramCredential
	known     bool
	nonce     string // client nonce + server nonce
	srvFirst  string
	principal string
	// serverNonce, if set, replaces the random server nonce (tests
	// replaying RFC 7677's exchange).
	serverNonce func() string
}

// NewScramSession starts a SCRAM exchange of mech (ScramSHA256 or
// ScramSHA512) against creds. secret keys the decoy salts of unknown
// users (any stable per-process random bytes).
func NewScramSession(mech string, creds Credentials, secret []byte) (Session, error) {
	h := ScramHash(mech)
	if h == nil {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	return &scramSession{mech: mech, h: h, creds: creds, fake: func(user string) ScramCredential {
		return decoyCredential(mech, h, user, secret)
	}}, nil
}

// decoyCredential is the credential an unknown user's exchange runs with.
// Its server-first-message cannot be told from a real user's: the
// iteration count is DefaultIterations, the salt has SaltBytes bytes and
// is the same on every attempt with the same name (HMAC of the name under
// secret, so no one without the secret can predict it), and the keys are
// derived as a real credential's are, so the client's proof is checked by
// the same computation and fails there. The password behind the keys is
// a secret-keyed value no client can know.
func decoyCredential(mech string, h func() hash.Hash, user string, secret []byte) ScramCredential {
	salt := hmacSum(sha256.New, secret, "salt\x00"+mech+"\x00"+user)[:SaltBytes]
	salted := hmacSum(h, secret, "salted-password\x00"+mech+"\x00"+user)
	return deriveCredential(mech, h, salt, salted, DefaultIterations)
}

func (s *scramSession) Principal() string { return s.principal }
func (s *scramSession) Expiry() time.Time { return time.Time{} }

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		s.step++
		first, err := ParseScramClientFirst(msg)
		if err != nil {
			return nil, false, err
		}
		s.first = first
		s.cred, s.known = s.creds.ScramCredential(first.User, s.mech)
		if !s.known {
			s.cred = s.fake(first.User)
		}
		if s.serverNonce != nil {
			s.nonce = first.Nonce + s.serverNonce()
		} else {
			var sn [24]byte
			if _, err := rand.Read(sn[:]); err != nil {
				return nil, false, err
			}
			s.nonce = first.Nonce + base64.RawURLEncoding.EncodeToString(sn[:])
		}
		s.srvFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) +
			",i=" + strconv.Itoa(s.cred.Iterations)
		return []byte(s.srvFirst), false, nil
	case 1:
		s.step++
		final, err := ParseScramClientFinal(msg)
		if err != nil {
			return nil, false, err
		}
		if string(final.ChannelBinding) != s.first.GS2Header {
			return nil, false, failed("SCRAM: channel binding does not match the GS2 header")
		}
		// RFC 5802 wants the nonce of server-first back; librdkafka
		// (before 2.x fixes) sends its client nonce in front of it
		// again. Kafka accepts any nonce ending in the server's; this
		// accepts exactly those two forms. Both contain the server's
		// fresh nonce, which is what defeats replay.
		if final.Nonce != s.nonce && final.Nonce != s.first.Nonce+s.nonce {
			return nil, false, failed("SCRAM: nonce mismatch")
		}
		authMsg := s.first.Bare + "," + s.srvFirst + "," + final.WithoutProof
		sig := hmacSum(s.h, s.cred.StoredKey, authMsg)
		if len(final.Proof) != len(sig) {
			return nil, false, s.invalid()
		}
		clientKey := make([]byte, len(sig))
		for i := range sig {
			clientKey[i] = final.Proof[i] ^ sig[i]
		}
		stored := s.h()
		stored.Write(clientKey)
		if !hmac.Equal(stored.Sum(nil), s.cred.StoredKey) || !s.known {
			return nil, false, s.invalid()
		}
		s.principal = UserPrincipal(s.first.User)
		return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSum(s.h, s.cred.ServerKey, authMsg))), true, nil
	}
	return nil, false, malformed("SCRAM: exchange already finished")
}

func (s *scramSession) invalid() error {
	return failed("Authentication failed during authentication due to invalid credentials with SASL mechanism " + s.mech)
}
