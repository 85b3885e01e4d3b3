package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type memCreds map[[2]string]ScramCredential

func (m memCreds) ScramCredential(user, mech string) (ScramCredential, bool) {
	c, ok := m[[2]string{user, mech}]
	return c, ok
}

func newCreds(t testing.TB, user, pass string, mechs ...string) memCreds {
	m := memCreds{}
	for _, mech := range mechs {
		c, err := NewScramCredentialFromPassword(mech, pass, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		m[[2]string{user, mech}] = c
	}
	return m
}

// RFC 7677 section 3: the SCRAM-SHA-256 example exchange, byte for byte.
func TestScramSHA256RFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sp, err := SaltPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := NewScramCredential(ScramSHA256, salt, sp, 4096)
	if err != nil {
		t.Fatal(err)
	}
	sess, _ := NewScramSession(ScramSHA256, memCreds{{"user", ScramSHA256}: cred}, []byte("k"))
	sess.(*scramSession).serverNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	reply, done, err := sess.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("first: %v %v", done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(reply) != want {
		t.Fatalf("server-first %q, want %q", reply, want)
	}
	reply, done, err = sess.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("final: %v %v", done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(reply) != want {
		t.Fatalf("server-final %q, want %q", reply, want)
	}
	if sess.Principal() != "User:user" {
		t.Fatalf("principal %q", sess.Principal())
	}
}

// runExchange drives a franz-go client mechanism against a server session.
func runExchange(t *testing.T, m sasl.Mechanism, srv Session) error {
	t.Helper()
	cs, msg, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		reply, done, err := srv.Step(msg)
		if err != nil {
			return err
		}
		cdone, next, cerr := cs.Challenge(reply)
		if cerr != nil {
			t.Fatalf("client rejected the server's reply: %v", cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return nil
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return nil
}

// franz-go's SCRAM client (an independent implementation) logs in; a wrong
// password and an unknown user both fail with ErrAuthFailed and a message
// that carries neither the password nor the proof.
func TestScramAgainstFranzGo(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			creds := newCreds(t, "alice", "s3cret-pw", mech)
			mk := func(user, pass string) sasl.Mechanism {
				a := scram.Auth{User: user, Pass: pass}
				if mech == ScramSHA256 {
					return a.AsSha256Mechanism()
				}
				return a.AsSha512Mechanism()
			}
			srv, _ := NewScramSession(mech, creds, []byte("secret"))
			if err := runExchange(t, mk("alice", "s3cret-pw"), srv); err != nil {
				t.Fatalf("good password: %v", err)
			}
			if srv.Principal() != "User:alice" {
				t.Fatalf("principal %q", srv.Principal())
			}
			for _, c := range [][2]string{{"alice", "wrong-pw"}, {"mallory", "s3cret-pw"}} {
				srv, _ := NewScramSession(mech, creds, []byte("secret"))
				err := runExchange(t, mk(c[0], c[1]), srv)
				if !errors.Is(err, ErrAuthFailed) {
					t.Fatalf("%s/%s: got %v, want ErrAuthFailed", c[0], c[1], err)
				}
				if strings.Contains(err.Error(), c[1]) {
					t.Fatalf("error reveals the password: %v", err)
				}
			}
			// The other mechanism's credential does not log in.
			other := ScramSHA512
			if mech == ScramSHA512 {
				other = ScramSHA256
			}
			srv, _ = NewScramSession(other, creds, []byte("secret"))
			a := scram.Auth{User: "alice", Pass: "s3cret-pw"}
			m := a.AsSha256Mechanism()
			if other == ScramSHA512 {
				m = a.AsSha512Mechanism()
			}
			if err := runExchange(t, m, srv); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("credential of %s used for %s: %v", mech, other, err)
			}
		})
	}
}

// An unknown user gets a server-first message shaped like a known user's
// with a credential of the default iteration count: the same attributes
// in the same order, a server nonce of the same length, a salt of the
// same length, the same iteration count; the same salt on every attempt
// with the same name (and another for another name); and the exchange
// fails at the proof with the message of a wrong password.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			creds := memCreds{}
			c, err := NewScramCredentialFromPassword(mech, "pw", DefaultIterations)
			if err != nil {
				t.Fatal(err)
			}
			creds[[2]string{"alice", mech}] = c
			secret := []byte("per-process secret")
			type serverFirst struct {
				keys           []string
				serverNonceLen int
				salt           []byte
				iterations     string
			}
			first := func(user string) (serverFirst, Session) {
				t.Helper()
				s, err := NewScramSession(mech, creds, secret)
				if err != nil {
					t.Fatal(err)
				}
				r, _, err := s.Step([]byte("n,,n=" + user + ",r=clientnonce"))
				if err != nil {
					t.Fatal(err)
				}
				var sf serverFirst
				for _, attr := range strings.Split(string(r), ",") {
					k, v, _ := strings.Cut(attr, "=")
					sf.keys = append(sf.keys, k)
					switch k {
					case "r":
						sf.serverNonceLen = len(strings.TrimPrefix(v, "clientnonce"))
					case "s":
						if sf.salt, err = base64.StdEncoding.DecodeString(v); err != nil {
							t.Fatalf("salt %q: %v", v, err)
						}
					case "i":
						sf.iterations = v
					}
				}
				return sf, s
			}
			known, _ := first("alice")
			unknown, sess := first("nobody")
			if strings.Join(known.keys, ",") != strings.Join(unknown.keys, ",") ||
				known.serverNonceLen != unknown.serverNonceLen || len(known.salt) != len(unknown.salt) ||
				known.iterations != unknown.iterations {
				t.Fatalf("server-first of an unknown user %+v differs from a known user's %+v", unknown, known)
			}
			if known.iterations != strconv.Itoa(DefaultIterations) || len(known.salt) != SaltBytes {
				t.Fatalf("known user's server-first %+v: want i=%d and a %d-byte salt", known, DefaultIterations, SaltBytes)
			}
			again, _ := first("nobody")
			if string(again.salt) != string(unknown.salt) {
				t.Fatalf("a repeated unknown name got another salt: %x then %x", unknown.salt, again.salt)
			}
			if other, _ := first("somebody"); string(other.salt) == string(unknown.salt) {
				t.Fatalf("two unknown names got the same salt %x", other.salt)
			}

			// The unknown user's proof fails as a wrong password's does.
			proof := base64.StdEncoding.EncodeToString(make([]byte, ScramHash(mech)().Size()))
			final := func(s Session, nonce string) error {
				_, _, err := s.Step([]byte("c=biws,r=" + nonce + ",p=" + proof))
				return err
			}
			_, wrong := first("alice")
			ws := wrong.(*scramSession)
			us := sess.(*scramSession)
			errWrong, errUnknown := final(wrong, ws.nonce), final(sess, us.nonce)
			if !errors.Is(errWrong, ErrAuthFailed) || !errors.Is(errUnknown, ErrAuthFailed) || errWrong.Error() != errUnknown.Error() {
				t.Fatalf("wrong password: %v; unknown user: %v", errWrong, errUnknown)
			}
		})
	}
}

func TestScramParseErrors(t *testing.T) {
	for _, m := range []string{
		"", "n", "n,", "x,,n=a,r=b", "p=tls-unique,,n=a,r=b", "n,,", "n,,n=a", "n,,r=b,n=a",
		"n,,n=,r=b", "n,,n=a=2X,r=b", "n,,n=a,r=", "n,,n=a,r=b c", "n,,m=x,n=a,r=b", "n,z=1,n=a,r=b",
	} {
		if _, err := ParseScramClientFirst([]byte(m)); !errors.Is(err, ErrMalformed) {
			t.Errorf("client-first %q: %v, want ErrMalformed", m, err)
		}
	}
	if _, err := ParseScramClientFirst([]byte("n,a=bob,n=alice,r=x")); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("authzid != user: %v", err)
	}
	if _, err := ParseScramClientFirst([]byte("n,,n=alice,r=x,tokenauth=true")); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("tokenauth: %v", err)
	}
	cf, err := ParseScramClientFirst([]byte("n,a=a=3Db=2Cc,n=a=3Db=2Cc,r=x"))
	if err != nil || cf.User != "a=b,c" {
		t.Errorf("escaped name: %+v %v", cf, err)
	}
	for _, m := range []string{"", "c=biws,r=x", "c=biws,r=x,p=", "c=biws,r=x,p=!!", "r=x,c=biws,p=AAAA", "c=%%,r=x,p=AAAA"} {
		if _, err := ParseScramClientFinal([]byte(m)); !errors.Is(err, ErrMalformed) {
			t.Errorf("client-final %q: %v, want ErrMalformed", m, err)
		}
	}
}

func TestPlain(t *testing.T) {
	creds := newCreds(t, "alice", "pw-alice", ScramSHA512)
	creds2 := newCreds(t, "bob", "pw-bob", ScramSHA256)
	for k, v := range creds2 {
		creds[k] = v
	}
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{{"alice", "pw-alice", true}, {"bob", "pw-bob", true}, {"alice", "pw-bob", false}, {"carol", "x", false}} {
		srv := NewPlainSession(creds)
		err := runExchange(t, plain.Auth{User: c.user, Pass: c.pass}.AsMechanism(), srv)
		if c.ok != (err == nil) {
			t.Fatalf("%s: err %v", c.user, err)
		}
		if err != nil && (!errors.Is(err, ErrAuthFailed) || strings.Contains(err.Error(), c.pass)) {
			t.Fatalf("%s: bad error %v", c.user, err)
		}
		if c.ok && srv.Principal() != "User:"+c.user {
			t.Fatalf("principal %q", srv.Principal())
		}
	}
	if _, _, err := ParsePlain([]byte("a\x00b")); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	if _, _, err := ParsePlain([]byte("x\x00b\x00c")); !errors.Is(err, ErrAuthFailed) {
		t.Fatal(err)
	}
}

// testKeys is a JWKS with an RSA, an EC and an Ed25519 key.
type testKeys struct {
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	ed   ed25519.PrivateKey
	jwks []byte
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newTestKeys(t testing.TB) *testKeys {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edk, _ := ed25519.GenerateKey(rand.Reader)
	pad := func(b []byte) []byte { return append(make([]byte, 32-len(b)), b...) }
	set := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "n": b64u(rk.N.Bytes()), "e": b64u(big.NewInt(int64(rk.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64u(pad(ek.X.Bytes())), "y": b64u(pad(ek.Y.Bytes()))},
		{"kty": "OKP", "kid": "d1", "crv": "Ed25519", "x": b64u(edk.Public().(ed25519.PublicKey))},
	}}
	data, _ := json.Marshal(set)
	return &testKeys{rsa: rk, ec: ek, ed: edk, jwks: data}
}

// sign makes a compact JWS of claims with the key named by kid.
func (k *testKeys) sign(t testing.TB, alg, kid string, claims map[string]any) string {
	hdr, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"})
	body, _ := json.Marshal(claims)
	signed := b64u(hdr) + "." + b64u(body)
	d := sha256.Sum256([]byte(signed))
	var sig []byte
	var err error
	switch alg {
	case "RS256":
		sig, err = rsa.SignPKCS1v15(rand.Reader, k.rsa, crypto.SHA256, d[:])
	case "PS256":
		sig, err = rsa.SignPSS(rand.Reader, k.rsa, crypto.SHA256, d[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case "ES256":
		r, s, e := ecdsa.Sign(rand.Reader, k.ec, d[:])
		err = e
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	case "EdDSA":
		sig = ed25519.Sign(k.ed, []byte(signed))
	default:
		sig = []byte("x")
	}
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + b64u(sig)
}

func TestJWTValidation(t *testing.T) {
	keys := newTestKeys(t)
	set, err := ParseJWKS(keys.jwks)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	cfg := JWTConfig{Keys: set, Issuer: "https://idp.example", Audience: "weir", Now: func() time.Time { return now }}
	good := func() map[string]any {
		return map[string]any{"sub": "svc-orders", "iss": "https://idp.example", "aud": []string{"other", "weir"},
			"exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	}
	for _, alg := range [][2]string{{"RS256", "r1"}, {"PS256", "r1"}, {"ES256", "e1"}, {"EdDSA", "d1"}} {
		tok, err := ValidateJWT(cfg, keys.sign(t, alg[0], alg[1], good()))
		if err != nil {
			t.Fatalf("%s: %v", alg[0], err)
		}
		if tok.Principal != "User:svc-orders" || !tok.Expiry.Equal(now.Add(time.Hour)) {
			t.Fatalf("%s: %+v", alg[0], tok)
		}
	}
	bad := map[string]string{}
	mod := func(name string, f func(m map[string]any)) {
		c := good()
		f(c)
		bad[name] = keys.sign(t, "RS256", "r1", c)
	}
	mod("expired", func(m map[string]any) { m["exp"] = now.Add(-time.Minute).Unix() })
	mod("no exp", func(m map[string]any) { delete(m, "exp") })
	mod("issuer", func(m map[string]any) { m["iss"] = "https://evil.example" })
	mod("audience", func(m map[string]any) { m["aud"] = "someone-else" })
	mod("nbf", func(m map[string]any) { m["nbf"] = now.Add(time.Hour).Unix() })
	mod("no sub", func(m map[string]any) { delete(m, "sub") })
	bad["unknown kid"] = keys.sign(t, "RS256", "zz", good())
	bad["alg mismatch"] = keys.sign(t, "ES256", "r1", good())
	bad["alg none"] = keys.sign(t, "none", "r1", good())
	bad["HS256"] = keys.sign(t, "HS256", "r1", good())
	tampered := keys.sign(t, "RS256", "r1", good())
	parts := strings.Split(tampered, ".")
	c := good()
	c["sub"] = "admin"
	body, _ := json.Marshal(c)
	bad["tampered"] = parts[0] + "." + b64u(body) + "." + parts[2]
	bad["garbage"] = "not.a.jwt"
	bad["two parts"] = "a.b"
	for name, tok := range bad {
		_, err := ValidateJWT(cfg, tok)
		if !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s: got %v, want ErrAuthFailed", name, err)
			continue
		}
		if strings.Contains(err.Error(), tok) || (len(tok) > 20 && strings.Contains(err.Error(), tok[len(tok)-20:])) {
			t.Errorf("%s: error quotes the token: %v", name, err)
		}
	}
	if _, err := ValidateJWT(cfg, bad["expired"]); !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token error does not say so: %v", err)
	}
}

func TestOAuthSessionWithFranzGo(t *testing.T) {
	keys := newTestKeys(t)
	set, _ := ParseJWKS(keys.jwks)
	cfg := JWTConfig{Keys: set}
	tok := keys.sign(t, "ES256", "e1", map[string]any{"sub": "app", "exp": time.Now().Add(time.Hour).Unix()})
	srv := NewOAuthSession(cfg)
	if err := runExchange(t, oauth.Auth{Token: tok, Extensions: map[string]string{"x": "y"}}.AsMechanism(), srv); err != nil {
		t.Fatal(err)
	}
	if srv.Principal() != "User:app" || srv.Expiry().IsZero() {
		t.Fatalf("%q %v", srv.Principal(), srv.Expiry())
	}
	// An expired token: error JSON, the client's \x01, then failure.
	expired := keys.sign(t, "ES256", "e1", map[string]any{"sub": "app", "exp": time.Now().Add(-time.Hour).Unix()})
	srv = NewOAuthSession(cfg)
	_, first, _ := oauth.Auth{Token: expired}.AsMechanism().Authenticate(context.Background(), "")
	reply, done, err := srv.Step(first)
	if err != nil || done || !strings.Contains(string(reply), "invalid_token") {
		t.Fatalf("first step: %q %v %v", reply, done, err)
	}
	if _, _, err := srv.Step([]byte{1}); !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("second step: %v", err)
	}
	for _, m := range []string{"", "n,,\x01\x01", "n,,\x01auth=Basic x\x01\x01", "n,,\x01auth=Bearer t\x01", "q,,\x01auth=Bearer t\x01\x01"} {
		if _, _, err := ParseOAuthBearer([]byte(m)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v", m, err)
		}
	}
}

// A JWKS file is read again when it changes: a token of a rotated-in key
// validates without a restart.
func TestJWKSFileReload(t *testing.T) {
	k1, k2 := newTestKeys(t), newTestKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, k1.jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenJWKSFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := JWTConfig{Keys: f}
	claims := map[string]any{"sub": "x", "exp": time.Now().Add(time.Hour).Unix()}
	if _, err := ValidateJWT(cfg, k1.sign(t, "RS256", "r1", claims)); err != nil {
		t.Fatal(err)
	}
	tok2 := k2.sign(t, "RS256", "r1", claims)
	if _, err := ValidateJWT(cfg, tok2); err == nil {
		t.Fatal("token of a key not yet in the file validated")
	}
	if err := os.WriteFile(path, k2.jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	_ = os.Chtimes(path, later, later)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err = ValidateJWT(cfg, tok2); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotated key never picked up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestJWKSURL(t *testing.T) {
	keys := newTestKeys(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(keys.jwks) }))
	defer srv.Close()
	u, err := OpenJWKSURL(context.Background(), srv.URL, srv.Client(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tok := keys.sign(t, "EdDSA", "d1", map[string]any{"sub": "x", "exp": time.Now().Add(time.Hour).Unix()})
	if _, err := ValidateJWT(JWTConfig{Keys: u}, tok); err != nil {
		t.Fatal(err)
	}
}

// librdkafka's client-final repeats the client nonce before the combined
// nonce; Kafka accepts it, and so does weir (with a valid proof), while
// any other nonce is refused.
func TestScramLibrdkafkaNonce(t *testing.T) {
	creds := newCreds(t, "u", "pw", ScramSHA256)
	for _, c := range []struct {
		form string
		ok   bool
	}{{"rfc", true}, {"librdkafka", true}, {"other", false}} {
		s, _ := NewScramSession(ScramSHA256, creds, []byte("k"))
		first, _, err := s.Step([]byte("n,,n=u,r=cnonce"))
		if err != nil {
			t.Fatal(err)
		}
		attrs := strings.Split(string(first), ",")
		full := strings.TrimPrefix(attrs[0], "r=")
		salt, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(attrs[1], "s="))
		nonce := map[string]string{"rfc": full, "librdkafka": "cnonce" + full, "other": full + "x"}[c.form]
		wo := "c=biws,r=" + nonce
		sp, _ := SaltPassword(ScramSHA256, "pw", salt, MinIterations)
		ck := hmacSum(sha256.New, sp, "Client Key")
		sk := sha256.Sum256(ck)
		sig := hmacSum(sha256.New, sk[:], "n=u,r=cnonce,"+string(first)+","+wo)
		for i := range ck {
			ck[i] ^= sig[i]
		}
		_, done, err := s.Step([]byte(wo + ",p=" + base64.StdEncoding.EncodeToString(ck)))
		if done != c.ok || (err == nil) != c.ok {
			t.Errorf("%s: done %v err %v", c.form, done, err)
		}
	}
}

// Unsecured tokens ("alg":"none", as franz-go's integration test and
// Kafka's default validator use) only when allowed, and still with exp.
func TestUnsecuredTokens(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	tok := func(exp time.Time) string {
		return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{"sub":"admin","exp":`+strconv.FormatInt(exp.Unix(), 10)+`}`)) + "."
	}
	if _, err := ValidateJWT(JWTConfig{}, tok(time.Now().Add(time.Hour))); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("unsecured token accepted by default: %v", err)
	}
	got, err := ValidateJWT(JWTConfig{AllowUnsecured: true}, tok(time.Now().Add(time.Hour)))
	if err != nil || got.Principal != "User:admin" {
		t.Fatalf("allowed unsecured: %+v %v", got, err)
	}
	if _, err := ValidateJWT(JWTConfig{AllowUnsecured: true}, tok(time.Now().Add(-time.Hour))); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("expired unsecured token: %v", err)
	}
	// A "none" token with a signature is not unsecured: refused.
	if _, err := ValidateJWT(JWTConfig{AllowUnsecured: true}, tok(time.Now().Add(time.Hour))+"AAAA"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("none with signature: %v", err)
	}
}
